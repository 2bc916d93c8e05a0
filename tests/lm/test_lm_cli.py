"""`clearformer lm train | generate | explain` end to end on a tiny corpus, and their one-line errors."""

from __future__ import annotations

import json

import pytest
import torch
from seeds import seed_args

from clearformer.cli import main
from clearformer.load import load_model
from clearformer.model.lm import LanguageModel
from clearformer.record.trace import Recorder

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_train_writes_a_loadable_language_model_that_learned(trained_lm):
    model, tokenizer, meta = load_model(trained_lm)
    assert isinstance(model, LanguageModel)
    assert meta["kind"] == "lm" and meta["step"] == 150
    assert meta["val_loss"] < 1.5  # the tiny corpus is a 3-slot grammar: ln(vocab) ~ 3.5 before training
    assert (trained_lm / "checkpoints" / "step-00000150" / "trainer_state.json").exists()


def test_generate_continues_the_prompt_in_the_corpus_grammar(trained_lm, capsys):
    code, out, _ = run(capsys, "lm", "generate", "the dog", "--checkpoint", str(trained_lm), "--greedy",
                       "--max-new-tokens", "4", "--stop-at-eos")
    assert code == 0
    words = out.split()
    assert words[:2] == ["the", "dog"] and words[2] in {"ran", "walked", "looked", "came", "went"}
    again = run(capsys, "lm", "generate", "the dog", "--checkpoint", str(trained_lm), "--seed", "3")[1]
    assert again == run(capsys, "lm", "generate", "the dog", "--checkpoint", str(trained_lm), "--seed", "3")[1]


def _matrix_rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the first 4 rows of the first table printed after `heading` (from its <eos> row)."""
    lines = text.split(heading, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["<eos>"] and line.split()[1][0].isdigit())
    return [line.split()[1:] for line in lines[start:] if line.strip()][:4]


def test_explain_shows_the_causal_mask_weights_and_next_token(trained_lm, capsys):
    code, out, _ = run(capsys, "lm", "explain", "the dog ran", "--checkpoint", str(trained_lm), "--head", "0")
    assert code == 0
    for title in ("Mask", "Scaled scores", "Attention weights", "Probabilities", "Chosen token",
                  "KV cache per token"):
        assert f"{title}  [" in out or f"{title}\n" in out, title
    assert _matrix_rows(out, "Mask  [layer 0") == [["1", "0", "0", "0"], ["1", "1", "0", "0"],
                                                   ["1", "1", "1", "0"], ["1", "1", "1", "1"]]
    assert "layer 1" not in out and "head 1" not in out  # --layer defaults to 0; --head 0 shows head 0 only
    code, out, _ = run(capsys, "lm", "explain", "the dog ran", "--model", str(trained_lm), "--format", "json")
    walk = json.loads(out)
    assert walk["source_tokens"] == ["<eos>", "the", "dog", "ran"]
    first = next(s for s in walk["steps"] if s["name"] == "output.probabilities" and s["decode_step"] == 0)
    assert first["matrices"][0]["col_labels"][0] in {"to", "into", "at"}
    assert abs(sum(first["matrices"][0]["values"][0]) - 1) < 0.2
    cache = next(s for s in walk["steps"] if s["name"] == "kv_cache.per_token")
    assert cache["matrices"][0]["values"][0][2] == 2 * 2 * 64 * 4  # 2 layers x (K + V) x d_model 64 x 4 bytes


def test_explain_records_the_causal_mask_from_the_forward_pass(trained_lm):
    model, _, _ = load_model(trained_lm)
    with Recorder() as recorder:
        model(torch.tensor([[3, 5, 6, 7, 8]]))
    mask = recorder.get("decoder.layers.0.self_attention.mask")[0]
    assert torch.equal(mask, torch.ones(5, 5, dtype=torch.bool).tril())
    weights = recorder.get("decoder.layers.1.self_attention.weights")[0]
    assert torch.all(weights.triu(1) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))


def test_mla_model_trains_and_explains_its_latent(tmp_path, corpus_file, capsys):
    out = tmp_path / "mla"
    code, log, _ = run(capsys, "lm", "train", "--corpus", str(corpus_file), "--out", str(out),
                       "--preset", "lm-tiny", "--tokenizer", "words", "--steps", "4", "--batch-size", "4",
                       "--block-size", "16", "--attention", "mla", "--threads", "1", *seed_args())
    assert code == 0 and "tok/s" in log and "MFU" in log
    code, text, _ = run(capsys, "lm", "explain", "the dog ran", "--checkpoint", str(out), "--head", "1")
    assert code == 0
    assert "Latent c_KV (MLA)" in text and "RoPE key" in text and "up-projected" in text
    code, text, _ = run(capsys, "lm", "explain", "the dog ran", "--model", str(out), "--mla-path", "absorbed")
    assert code == 0 and "Absorbed queries (MLA)" in text and "Latent c_KV (MLA)" in text
    for path in ("absorbed", "naive"):
        assert run(capsys, "lm", "generate", "the cat", "--checkpoint", str(out), "--mla-path", path,
                   "--max-new-tokens", "3")[0] == 0


def one_line_error(capsys, *argv: str) -> str:
    code, _, err = run(capsys, *argv)
    assert code != 0
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv,words", [
    (["--temperature", "0"], "temperature"),
    (["--temperature", "-0.5"], "temperature"),
    (["--top-p", "0"], "top-p"),
    (["--top-p", "1.2"], "top-p"),
    (["--max-new-tokens", "0"], "max-new-tokens"),
])
def test_generate_bad_sampling_options(trained_lm, capsys, argv, words):
    assert words in one_line_error(capsys, "lm", "generate", "the dog", "--checkpoint", str(trained_lm), *argv)


def test_prompt_errors(trained_lm, capsys):
    assert "empty" in one_line_error(capsys, "lm", "generate", "  ", "--checkpoint", str(trained_lm))
    assert "empty" in one_line_error(capsys, "lm", "explain", "", "--checkpoint", str(trained_lm))
    long_prompt = " ".join(["the dog"] * 80)  # lm-tiny's context is 128 tokens
    assert "context" in one_line_error(capsys, "lm", "generate", long_prompt, "--checkpoint", str(trained_lm))
    assert "context" in one_line_error(capsys, "lm", "explain", long_prompt, "--checkpoint", str(trained_lm))


def test_missing_model_and_corpus(tmp_path, capsys):
    missing = str(tmp_path / "x")
    assert "no such checkpoint" in one_line_error(capsys, "lm", "generate", "hi", "--checkpoint", missing)
    assert "no such corpus" in one_line_error(capsys, "lm", "train", "--corpus", str(tmp_path / "none.txt"))


@pytest.mark.parametrize("argv,words", [
    (["--kv-lora-rank", "0"], "kv_lora_rank"),
    (["--qk-rope-head-dim", "3"], "qk_rope_head_dim"),
    (["--v-head-dim", "0"], "v_head_dim"),
])
def test_mla_dimensions_that_do_not_fit(corpus_file, tmp_path, capsys, argv, words):
    err = one_line_error(capsys, "lm", "train", "--corpus", str(corpus_file), "--out", str(tmp_path / "m"),
                         "--preset", "lm-tiny", "--tokenizer", "words", "--steps", "1", "--attention", "mla",
                         *argv)
    assert words in err


def test_mla_size_options_need_mla(corpus_file, tmp_path, capsys):
    err = one_line_error(capsys, "lm", "train", "--corpus", str(corpus_file), "--out", str(tmp_path / "m"),
                         "--preset", "lm-tiny", "--tokenizer", "words", "--kv-lora-rank", "8")
    assert "--attention mla" in err


def test_explain_full_walkthrough_and_layer_choice(trained_lm, capsys):
    code, out, _ = run(capsys, "lm", "explain", "the dog ran", "--checkpoint", str(trained_lm), "--full",
                       "--layer", "1")
    assert code == 0 and "Attention weights" in out and "Probabilities" in out
    assert "layer 2" in one_line_error(capsys, "lm", "explain", "the dog", "--checkpoint", str(trained_lm),
                                       "--layer", "2")


def test_model_is_a_hidden_alias_of_checkpoint(trained_lm, capsys):
    """Old scripts pass --model DIR; it means --checkpoint DIR, and the help shows only --checkpoint."""
    new = run(capsys, "lm", "explain", "the dog", "--checkpoint", str(trained_lm))
    old = run(capsys, "lm", "explain", "the dog", "--model", str(trained_lm))
    assert new[0] == old[0] == 0 and new[1] == old[1]
    with pytest.raises(SystemExit):
        main(["lm", "generate", "--help"])
    shown = capsys.readouterr().out
    assert "--checkpoint" in shown and "--model" not in shown
