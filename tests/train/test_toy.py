"""The toy translation end to end: `clearformer train` (defaults), then "I love you" -> "Je t'aime".

One training run of the toy-translate preset (about 400 steps, the slowest test here), checked
through the checkpoint API, a greedy loop, and the `translate` command.
"""

import json

import pytest
import torch
from seeds import seed_args

from clearformer.cli import main
from clearformer.data.toy import SEED_SOURCES, toy_pairs, toy_splits
from clearformer.generate import DecodingOptions, greedy_decode, search_tokens
from clearformer.load import load_decoding_facts, load_model
from clearformer.store.runs import default_run_dir, resolve_checkpoint
from clearformer.train.corpus import encode_pairs, length_ratio
from clearformer.train.metrics import MetricsLog

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)


def test_phrase_set_holds_the_seeds_and_a_fixed_split():
    pairs = dict(toy_pairs())
    assert pairs["I love you"] == "Je t'aime" and pairs["I love AI"] == "J'aime l'IA"
    assert len(pairs) > 500
    splits = toy_splits()
    train_sources = {s for s, _ in splits["train"]}
    assert set(SEED_SOURCES) <= train_sources
    assert splits["valid"] and splits["test"]
    assert not train_sources & {s for s, _ in splits["valid"] + splits["test"]}


def greedy(model, tokenizer, text):
    ids = torch.tensor([tokenizer.encode(text)])
    decoded = greedy_decode(model, ids, DecodingOptions(), search_tokens(model, tokenizer))
    return tokenizer.decode(decoded.sequences()[0])


def test_toy_translate_learns_je_t_aime(capsys):
    assert main(["train", "--preset", "toy-translate", "--quiet", *seed_args()]) == 0
    run = default_run_dir("toy-translate")
    assert resolve_checkpoint(None) == run.resolve()
    model, tokenizer, meta = load_model(run)
    assert meta["dataset"] == "toy" and meta["tokenizer"] == "words"
    # The training pairs' target tokens per source token, for the brevity penalty (generate/brevity.py).
    measured = length_ratio(encode_pairs(tokenizer, toy_splits()["train"]), True)
    facts = load_decoding_facts(run, tokenizer)  # decoding.json, apart from the tokenizer's text <-> ids
    assert tokenizer.source_eos and facts.length_ratio == pytest.approx(measured, abs=1e-4)
    assert "length_ratio" not in json.loads((run / "tokenizer.json").read_text(encoding="utf-8"))
    assert greedy(model, tokenizer, "I love you") == "Je t'aime"
    assert greedy(model, tokenizer, "I love AI") == "J'aime l'IA"
    capsys.readouterr()
    assert main(["translate", "I love you"]) == 0
    assert capsys.readouterr().out.strip() == "Je t'aime"
    rows = MetricsLog(run / "metrics.csv").read()
    bleu = [r["valid_bleu"] for r in rows if r.get("valid_bleu") is not None]
    assert bleu and bleu[-1] > 50  # held-out sentences, not just the memorised ones
    train_loss = [r["train_loss"] for r in rows if r.get("train_loss") is not None]
    assert train_loss[-1] < train_loss[0] / 3
    assert (run / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
