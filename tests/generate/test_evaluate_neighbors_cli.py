"""`clearformer evaluate` (sacrebleu signatures, hypotheses) and `clearformer neighbors` (cosine, analogy)."""

from __future__ import annotations

import pytest
import torch

from clearformer.cli import main
from clearformer.commands.neighbors import analogy_vector, cosine_neighbors
from clearformer.config import preset
from clearformer.evaluate import score_corpus
from clearformer.generate import DecodingOptions, translate
from clearformer.load import load_model
from clearformer.model.transformer import Transformer
from clearformer.store.checkpoint import save_model
from clearformer.tokenize import WordTokenizer

PAIRS = [("I love you", "Je t'aime"), ("the dog sleeps", "le chien dort"),
         ("we eat bread", "nous mangeons du pain")]


def write_split(folder, name="test"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS), encoding="utf-8")
    return path


def test_evaluate_prints_signatures_and_writes_hypotheses(checkpoint, tmp_path, capsys):
    split = write_split(tmp_path / "corpus")
    output = tmp_path / "hyp.txt"
    code = main(["evaluate", "--checkpoint", str(checkpoint), "--split", "test", "--data", str(split),
                 "--output", str(output)])
    out = capsys.readouterr().out
    assert code == 0
    model, tokenizer, _ = load_model(checkpoint)
    hypotheses = translate(model, tokenizer, [s for s, _ in PAIRS])
    assert output.read_text(encoding="utf-8") == "".join(h + "\n" for h in hypotheses)
    scores = score_corpus(hypotheses, [t for _, t in PAIRS], [s for s, _ in PAIRS])
    assert "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in out
    assert "chrF2|nrefs:1|" in out
    assert scores.bleu_line in out and scores.chrf_line in out
    # the length ratio overall and by reference length, and the placeholder score, under them
    assert scores.summary() in out and f"length ratio {scores.ratio:.3f}" in out
    assert "placeholders: no source sentence has one" in out


def test_evaluate_default_output_beside_checkpoint_and_bad_split(checkpoint, tmp_path, capsys):
    write_split(tmp_path / "corpus", "valid")
    corpus = str(tmp_path / "corpus")
    code = main(["evaluate", "--checkpoint", str(checkpoint), "--split", "valid", "--data", corpus,
                 "--beam", "2"])
    assert code == 0
    assert len((checkpoint / "hypotheses.valid.txt").read_text(encoding="utf-8").splitlines()) == len(PAIRS)
    code = main(["evaluate", "--checkpoint", str(checkpoint), "--split", "test", "--data", corpus])
    err = capsys.readouterr().err
    assert code != 0 and "test.tsv: no such file" in err and len(err.strip().splitlines()) == 1


def test_evaluate_beam_with_bound_stopping_says_so_and_matches_the_api(checkpoint, tmp_path, capsys):
    split = write_split(tmp_path / "corpus")
    output = tmp_path / "hyp.txt"
    code = main(["evaluate", "--checkpoint", str(checkpoint), "--split", "test", "--data", str(split),
                 "--beam", "3", "--alpha", "1.0", "--early-stop", "bound", "--output", str(output)])
    out = capsys.readouterr().out
    assert code == 0 and "beam 3, alpha 1.0, early stop bound" in out
    model, tokenizer, _ = load_model(checkpoint)
    hypotheses = translate(model, tokenizer, [s for s, _ in PAIRS], DecodingOptions(beam=3, alpha=1.0, stop="bound"))
    assert output.read_text(encoding="utf-8") == "".join(h + "\n" for h in hypotheses)


def test_score_corpus_matches_sacrebleu():
    import sacrebleu

    hyps, refs = ["le chat dort", "je t'aime"], ["le chat dort .", "je t'aime"]
    scores = score_corpus(hyps, refs)
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert score_corpus(refs, refs).bleu == pytest.approx(100.0)


# Dimensions: person, royal, female, animal. king - man + woman lands on queen; cat's neighbour is dog.
VECTORS = {
    "man": [1, 0, 0, 0], "woman": [1, 0, 1, 0], "king": [1, 1, 0, 0], "queen": [1, 1, 1, 0],
    "cat": [0, 0, 0, 1], "dog": [0, 0.2, 0, 1], "car": [0.1, -1, 0, -0.3],
}


@pytest.fixture
def embedding_checkpoint(tmp_path):
    tokenizer = WordTokenizer(["<pad>", "<unk>", "<bos>", "<eos>", *VECTORS])
    model = Transformer(preset("toy", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer)))
    with torch.no_grad():
        table = model.src_embed.tokens.weight
        table.zero_()
        # The specials sit close to the query words: they must still never be listed.
        table[1:4] = torch.tensor([[0.3, 0.3, 0.3, 0.3], [1.0, 0.9, 1.0, 0.0], [0.9, 1.0, 1.0, 0.0]])
        for word, vector in VECTORS.items():
            table[tokenizer.stoi[word]] = torch.tensor(vector, dtype=torch.float32)
    return save_model(tmp_path / "emb", model, tokenizer)


def neighbours_printed(out: str) -> list[str]:
    return [line.split()[1] for line in out.strip().splitlines()[1:]]


def test_neighbors_lists_cosine_nearest(embedding_checkpoint, capsys):
    assert main(["neighbors", "cat", "--checkpoint", str(embedding_checkpoint), "--top", "20"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.strip().splitlines()[1:]]
    assert [row[1] for row in rows][0] == "dog" and [row[1] for row in rows][-1] == "car"
    assert float(rows[0][2]) == pytest.approx(1 / 1.04 ** 0.5, abs=1e-3)  # cos(cat, dog) = 1 / |dog|
    assert len(rows) == len(VECTORS) - 1  # every other word; no special token, not cat itself


def test_neighbors_analogy_king_man_woman_is_queen(embedding_checkpoint, capsys):
    args = ["neighbors", "--analogy", "king", "man", "woman", "--checkpoint", str(embedding_checkpoint)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("nearest to king - man + woman")
    assert neighbours_printed(out)[0] == "queen"
    assert not {"king", "man", "woman"} & set(neighbours_printed(out))


def test_neighbors_math_and_errors(embedding_checkpoint, capsys):
    matrix = torch.tensor([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [-1.0, 0.1]])
    found = cosine_neighbors(matrix, torch.tensor([2.0, 0.0]), top=5)
    assert [row for row, _ in found] == [1, 2, 3]  # the zero row is skipped
    assert found[1][1] == pytest.approx(2 ** -0.5)
    expected = matrix[2] / 2 ** 0.5 - matrix[1] + matrix[3] / matrix[3].norm()
    assert torch.allclose(analogy_vector(matrix, 2, 1, 3), expected)
    assert main(["neighbors", "zebra", "--checkpoint", str(embedding_checkpoint)]) != 0
    assert main(["neighbors", "--checkpoint", str(embedding_checkpoint)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["clearformer neighbors: error: 'zebra' is not in the model's vocabulary",
                   "clearformer neighbors: error: give one WORD, or --analogy A B C (not both)"]
