"""`explain --beam K`: the tree read from beam search's records is the search `translate --beam K` ran."""

from __future__ import annotations

import json

import pytest
import torch
from test_translate_cli import run_cli

from clearformer.explain.beam import rule_for
from clearformer.explain.search import explain_search
from clearformer.generate import DecodingOptions, search_tokens, translate
from clearformer.generate.beam import beam_search
from clearformer.generate.facts import DecodingFacts
from clearformer.load import load_model
from clearformer.tokenize import encode_source

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

SENTENCES = ["I love you", "the dog sleeps", "we eat bread ."]


@pytest.mark.parametrize("beam", [2, 4])
def test_explain_beam_ends_in_translates_result(checkpoint, capsys, beam):
    code, out, _ = run_cli(["translate", "--checkpoint", str(checkpoint), "--beam", str(beam), "I love you"], capsys)
    assert code == 0
    code, text, _ = run_cli(["explain", "--checkpoint", str(checkpoint), "--beam", str(beam), "I love you",
                             "--format", "json"], capsys)
    assert code == 0
    walk = json.loads(text)
    assert walk["result"] + "\n" == out
    assert walk["beam"]["result"] == walk["result"]
    code, table, _ = run_cli(["explain", "--checkpoint", str(checkpoint), "--beam", str(beam), "I love you"], capsys)
    assert code == 0 and "step 1 " in table and "step 0" not in table  # counted from 1 (docs/learn.md)
    assert table.rstrip().endswith(f"result: {walk['result']}")


@pytest.mark.parametrize("sentence", SENTENCES)
@pytest.mark.parametrize("options", [dict(beam=3, alpha=0.6, brevity=0.0), dict(beam=4, alpha=2.0, brevity=1.0),
                                     dict(beam=2, alpha=1.0, brevity=0.5, stop="bound", max_extra=3)])
def test_tree_is_the_search(checkpoint, sentence, options):
    model, tokenizer, _ = load_model(checkpoint)
    settings = DecodingOptions(**options)
    walk = explain_search(model, tokenizer, sentence, settings)
    assert walk.result == translate(model, tokenizer, [sentence], settings)[0]
    tree = walk.beam
    src = torch.tensor([encode_source(tokenizer, sentence)])
    decoded = beam_search(model, src, settings, search_tokens(model, tokenizer, settings))
    best = tree["ranking"][0]
    assert best["best"] and best["tokens"] == decoded.tokens[0, : int(decoded.lengths[0])].tolist()
    assert best["score"] == pytest.approx(float(decoded.scores[0]), abs=1e-5)
    assert [f["score"] for f in tree["ranking"]] == sorted((f["score"] for f in tree["ranking"]), reverse=True)
    nodes = {h["id"]: h for s in tree["steps"] for h in s["hypotheses"]}
    for step in tree["steps"]:
        assert 1 <= len(step["hypotheses"]) <= settings.beam
        assert step["penalty"] == pytest.approx(((5 + step["step"] + 1) / 6) ** settings.alpha)
        for hypothesis in step["hypotheses"]:
            for candidate in hypothesis["candidates"]:
                if candidate["adjusted"] is None:  # -inf: a token a rule forbids
                    assert candidate["total"] is None and candidate["rule"]
                    continue
                assert candidate["total"] == pytest.approx(hypothesis["total"] + candidate["adjusted"], abs=1e-6)
                if candidate["fate"] == "continues":  # the child carries the sum on
                    child = nodes[candidate["child"]]
                    assert child["parent"] == hypothesis["id"]
                    assert child["tokens"] == hypothesis["tokens"] + [candidate["token"]]
                    assert child["total"] == pytest.approx(candidate["total"], abs=1e-5)  # float32 sums
        going = [c for h in step["hypotheses"] for c in h["candidates"] if c["fate"] == "continues"]
        assert len(going) <= settings.beam
        assert all(c["token"] != tokenizer.eos_id for c in going)
    assert tree["steps"][-1]["stopped"]
    # The chosen path ends in the translation, one hypothesis per step, and the walkthrough follows it.
    path = [nodes[i] for i in tree["chosen_path"]]
    assert [len(n["tokens"]) for n in path] == list(range(len(path)))
    assert path[-1]["tokens"] == best["tokens"][:-1]
    chosen = [int(s.matrices[0].values[0][0]) for s in walk.find("generate.chosen")]
    assert chosen == best["tokens"]
    for t, step in enumerate(walk.find("output.probabilities")):
        prefix = torch.tensor([[tokenizer.bos_id, *best["tokens"][:t]]])
        expected = torch.softmax(model(src, prefix)[0, -1].double(), dim=-1)
        shown = torch.tensor(step.matrices[0].values[0], dtype=torch.float64)
        torch.testing.assert_close(shown, expected.sort(descending=True).values[: shown.numel()], rtol=0, atol=1e-5)


def test_brevity_moves_eos_scores(checkpoint):
    model, tokenizer, _ = load_model(checkpoint)
    facts = DecodingFacts(length_ratio=3.0)  # as if measured on a corpus: a translation three times its source
    walk = explain_search(model, tokenizer, "I love you", DecodingOptions(beam=4, brevity=3.0), facts=facts)
    assert walk.result == translate(model, tokenizer, ["I love you"], DecodingOptions(beam=4, brevity=3.0),
                                    facts=facts)[0]
    tree = walk.beam
    moved = [c for s in tree["steps"] for h in s["hypotheses"] for c in h["candidates"] if c["rule"]]
    assert moved and all(c["token"] == tokenizer.eos_id and c["rule"].startswith("brevity penalty -") for c in moved)
    assert all(c["adjusted"] is None or c["adjusted"] < c["logprob"] for c in moved)  # None: -inf


def test_rules_in_words():
    assert rule_for(3, -1.0, -1.0, 3, 0, 0) == ""
    assert rule_for(3, -1.0, float("-inf"), 3, 0, 2) == "blocked: <eos> before the minimum length"
    assert rule_for(7, -1.0, float("-inf"), 3, 4, 2) == "forbidden by the placeholder rule"
    assert rule_for(3, -1.0, -1.5, 3, 4, 0) == "brevity penalty -0.5000"


def test_explain_beam_refuses_bad_options(checkpoint, capsys):
    for extra, message in ((["--beam", "0"], "--beam must be at least 1"),
                           (["--beam", "17"], "--beam must be at most 16 to explain, not 17"),
                           (["--example", "i-love-you", "--beam", "2"], "not --example"),
                           (["--ablate", "decoder.layers.9.cross_attention.head.0"], "is not a part of this model")):
        args = ["explain", "--checkpoint", str(checkpoint)] + ([] if "--example" in extra else ["I love you"]) + extra
        code, _, err = run_cli(args, capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_placeholder_rule_shows_what_it_forbids(checkpoint):
    """With placeholder pieces, tokens the model ranked high but the rule forbids are listed with the rule."""
    model, tokenizer, _ = load_model(checkpoint)
    pieces = tuple(tokenizer.encode("love cat"))  # as if these words were placeholders such as %s
    tokenizer.placeholder_ids = pieces
    walk = explain_search(model, tokenizer, "I love you", DecodingOptions(beam=3, alpha=0.6))
    assert walk.result == translate(model, tokenizer, ["I love you"], DecodingOptions(beam=3, alpha=0.6))[0]
    forbidden = [c for s in walk.beam["steps"] for h in s["hypotheses"] for c in h["candidates"]
                 if c["rule"] == "forbidden by the placeholder rule"]
    assert forbidden and all(c["adjusted"] is None and c["fate"] == "pruned" for c in forbidden)
    assert walk.beam["ranking"][0]["tokens"].count(pieces[0]) == 1  # "love" copied once, "cat" never
    assert pieces[1] not in walk.beam["ranking"][0]["tokens"]
