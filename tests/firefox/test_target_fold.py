"""Fine-tuning targets in Firefox's vocabulary, which lacks curly quotes and some capitals (tokenize/fold.py):
each such character is folded to the nearest the vocabulary writes, so the fine-tuned model never learns to
write <unk>; sources, placeholders and what the vocabulary writes are left alone."""

from __future__ import annotations

from seeds import seed_args

from clearformer.load import load_model
from clearformer.tokenize import encode_target
from clearformer.tokenize.fold import TargetFold


def test_characters_the_vocabulary_lacks_are_folded_in_targets_only(firefox_runs):
    tokenizer = load_model(firefox_runs["en-pt"])[1]
    fold = TargetFold(tokenizer)
    assert tokenizer.unk_id in tokenizer.encode_target_text("“x” Índice")  # what the vocabulary lacks
    assert fold("Verificando em “%s”…") == 'Verificando em "%s"…'  # … it writes (SentencePiece's NFKC)
    assert fold("Índice, AÇÃO, ‘sim’ – não") == "Indice, ACAO, 'sim' - não"
    assert fold("ação <b>{0}</b> #1") == "ação <b>{0}</b> #1"  # written, or nothing nearer to write: kept
    ids = encode_target(tokenizer, "Checking “%s”", "Verificando “%s”", fold)
    assert tokenizer.unk_id not in ids and set(ids) & set(tokenizer.placeholder_ids)  # folded, then masked
    assert "“ -> \" (2)" in fold.summary() and "Í -> I (1)" in fold.summary()


def test_a_fine_tuning_says_what_it_folded(firefox_runs, tmp_path, capsys):
    from clearformer.cli import main

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("Open “%s”\tAbrir “%s”\nIndex\tÍndice\nSave the file\tSalvar o arquivo\n" * 4, encoding="utf-8")
    run = tmp_path / "tuned"
    assert main(["train", "--init", str(firefox_runs["en-pt"]), "--tsv", str(pairs), "--out", str(run), "--steps",
                 "1", "--batch-tokens", "400", "--bleu-sentences", "0", *seed_args()]) == 0
    out = capsys.readouterr().out
    assert "folded to the nearest it can: “ -> \"" in out, out[:2000]
