"""The commands end to end: `import marian`, `export`, `lm import gpt2`, then translate / explain / evaluate /
serve and `lm generate` / `lm explain` on the imported runs, and the one-line errors."""

from __future__ import annotations

import json
import sys

import pytest
import torch

pytest.importorskip("transformers")
from interop_helpers import gpt2_folder, marian_depth, marian_folder  # noqa: E402
from tolerance import assert_float32_close  # noqa: E402

from clearformer.cli import main  # noqa: E402
from clearformer.generate import DecodingOptions  # noqa: E402

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)


@pytest.fixture(autouse=True)
def _runs_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))  # `import marian` marks a run in runs/ the latest


@pytest.fixture(scope="module")
def imported_marian(tmp_path_factory):
    folder, theirs = marian_folder(tmp_path_factory.mktemp("marian") / "folder")
    run = folder.parent / "run"
    assert main(["import", "marian", str(folder), "--out", str(run)]) == 0
    return run, theirs


def test_import_marks_latest_only_for_a_run_inside_runs(imported_marian, tmp_path, capsys):
    """Issue 32: `--out` outside runs/ writes nothing else (runs/LATEST stays the user's run)."""
    folder = imported_marian[0].parent / "folder"
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "LATEST").write_text("/my/run\n", encoding="utf-8")
    assert main(["import", "marian", str(folder), "--out", str(tmp_path / "elsewhere")]) == 0
    assert (runs / "LATEST").read_text(encoding="utf-8") == "/my/run\n"
    assert main(["import", "marian", str(folder), "--out", str(runs / "marian")]) == 0
    assert (runs / "LATEST").read_text(encoding="utf-8").strip() == str((runs / "marian").resolve())
    assert sorted(p.name for p in runs.iterdir()) == ["LATEST", "marian"]
    capsys.readouterr()


def one_line_error(capsys, argv, says: str) -> None:
    capsys.readouterr()
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_translate_explain_evaluate_on_an_imported_marian(imported_marian, tmp_path, capsys):
    from clearformer.generate import translate
    from clearformer.load import load_model

    run, _ = imported_marian
    model, tokenizer, _ = load_model(run)
    expected = translate(model, tokenizer, ["the cat sat on the mat"])[0]
    assert main(["translate", "the cat sat on the mat", "--checkpoint", str(run)]) == 0
    assert capsys.readouterr().out.strip() == expected.strip()
    assert main(["explain", "the cat sat", "--checkpoint", str(run), "--html", str(tmp_path / "page.html")]) == 0
    out = capsys.readouterr().out
    assert "▁c" in out and "</s>" in out  # Marian's pieces and the </s> it appends to sources
    assert (tmp_path / "page.html").stat().st_size > 1000
    split = tmp_path / "test.tsv"
    split.write_text("the cat sat on the mat\tle chat est sur le tapis\n", encoding="utf-8")
    assert main(["evaluate", "--checkpoint", str(run), "--data", str(split), "--output", str(tmp_path / "h")]) == 0
    assert "BLEU" in capsys.readouterr().out


def test_server_explains_with_an_imported_marian(imported_marian):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from clearformer.serve.app import create_app
    from clearformer.serve.explainer import load

    run, _ = imported_marian
    client = TestClient(create_app(load(run)), base_url="http://127.0.0.1:8000", raise_server_exceptions=False)
    response = client.post("/api/explain", json={"sentence": "I love you"})
    assert response.status_code == 200
    walk = response.json()
    assert walk["source_tokens"][-1] == "</s>" and walk["target_tokens"][0] == "<pad>"  # Marian's start token


def test_export_of_an_imported_marian_reloads_in_transformers(imported_marian, tmp_path, capsys):
    from transformers import MarianMTModel

    run, theirs = imported_marian
    assert main(["export", "--checkpoint", str(run), "--to", "marian", str(tmp_path / "m")]) == 0
    again = MarianMTModel.from_pretrained(str(tmp_path / "m")).eval()
    ids = torch.tensor([[5, 7, 9, 0]])
    with torch.no_grad():
        assert_float32_close(again(input_ids=ids, decoder_input_ids=ids).logits,
                             theirs(input_ids=ids, decoder_input_ids=ids).logits, marian_depth(theirs.config))
    one_line_error(capsys, ["export", "--checkpoint", str(run), "--to", "marian", str(tmp_path / "m")],
                   "exists and is not an empty folder")


def test_export_to_ctranslate2_from_the_command_line(trained_run, tmp_path, capsys):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from clearformer.generate import translate
    from clearformer.load import load_model

    out = tmp_path / "ct2"
    assert main(["export", "--checkpoint", str(trained_run), "--to", "ctranslate2", str(out)]) == 0
    assert "ctranslate2.Translator" in capsys.readouterr().out
    model, tokenizer, _ = load_model(trained_run)
    sentence = "I love you"
    pieces = tokenizer.tokenize(sentence) + [tokenizer.id_to_token(tokenizer.eos_id)]
    result = ctranslate2.Translator(str(out)).translate_batch([pieces], beam_size=1)[0].hypotheses[0]
    # CTranslate2 has no brevity penalty (clearformer's decoding rule): compare with it off.
    assert tokenizer.decode([tokenizer.token_to_id(p) for p in result]) == translate(model, tokenizer, [sentence],
                                                                                     DecodingOptions(brevity=0.0))[0]


def test_export_refuses_in_one_line(tmp_path, capsys, monkeypatch):
    from clearformer.config import preset
    from clearformer.model.transformer import Transformer
    from clearformer.store.checkpoint import save_model
    from clearformer.tokenize import SPECIALS, WordTokenizer

    tokenizer = WordTokenizer(list(SPECIALS) + ["a", "b"])
    tokenizer.source_eos = True
    config = preset("toy-translate", src_vocab_size=6, tgt_vocab_size=6, d_model=8, n_heads=2, d_ff=8)
    save_model(tmp_path / "words", Transformer(config), tokenizer)
    one_line_error(capsys, ["export", "--checkpoint", str(tmp_path / "words"), "--to", "marian", str(tmp_path / "o")],
                   "cannot export to Marian: tokenizer kind 'words'")
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if the hf extra were not installed
    from clearformer.errors import UserError
    from clearformer.interop.ctranslate2 import convert_marian_folder

    with pytest.raises(UserError, match=r"needs the `ctranslate2` package: pip install 'clearformer\[hf\]'"):
        convert_marian_folder(tmp_path, tmp_path / "never")


def test_import_errors_are_one_line(tmp_path, capsys):
    # A missing folder is an error, never a Hub request (only hf:OWNER/NAME downloads: docs/reliability.md).
    one_line_error(capsys, ["import", "marian", str(tmp_path / "missing" / "x"), "--out", str(tmp_path / "r")],
                   "no such folder (a model on the Hugging Face Hub is named hf:OWNER/NAME)")
    (tmp_path / "empty").mkdir()
    one_line_error(capsys, ["import", "marian", str(tmp_path / "empty"), "--out", str(tmp_path / "r")],
                   "config.json: missing")
    one_line_error(capsys, ["lm", "import", "gpt2", str(tmp_path / "empty"), "--out", str(tmp_path / "r")],
                   "config.json: missing")


def test_lm_generate_and_explain_on_an_imported_gpt2(tmp_path, capsys):
    pytest.importorskip("tokenizers")
    from clearformer.generate.sampling import SamplingOptions, generate
    from clearformer.interop.gpt2 import load_gpt2

    folder, _ = gpt2_folder(tmp_path / "gpt2")
    run = tmp_path / "run"
    assert main(["lm", "import", "gpt2", str(folder), "--out", str(run)]) == 0
    capsys.readouterr()
    model, tokenizer = load_gpt2(str(folder))
    prompt = [tokenizer.eos_id] + tokenizer.encode("the cat")
    new = generate(model, prompt, 8, SamplingOptions(greedy=True))
    assert main(["lm", "generate", "the cat", "--checkpoint", str(run), "--greedy", "--max-new-tokens", "8"]) == 0
    from clearformer.commands.lm import decode_lines

    assert capsys.readouterr().out.rstrip("\n") == decode_lines(tokenizer, prompt[1:] + new)
    assert main(["lm", "explain", "the cat sat", "--checkpoint", str(run), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source_tokens"] == ["<|endoftext|>"] + tokenizer.tokenize("the cat sat")  # GPT-2's own tokens
    assert main(["lm", "explain", "the cat sat", "--checkpoint", str(run), "--full", "--layer", "all"]) == 0
    full = capsys.readouterr().out  # every recorded step, every layer (steps carry their decoding step)
    assert "[layer 1, add norm 3" in full and "[layer 1, self attention, generation step 1]" in full
