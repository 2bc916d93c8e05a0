"""`lm explain` runs `lm generate`'s greedy path under the recorder: the same tokens, shown step by step."""

from __future__ import annotations

import json

import pytest
import torch
from lm_helpers import tiny_model

from clearformer.cli import main
from clearformer.data.lm import prompt_ids
from clearformer.explain.lm import explain_lm
from clearformer.generate.sampling import SamplingOptions, generate
from clearformer.load import load_model
from clearformer.tokenize import SPECIALS, WordTokenizer

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

PROMPTS = ["the dog", "the cat ran", "a man looked at", "my son", "the king went into the"]


def chosen_ids(walk) -> list[int]:
    return [int(step.matrices[0].values[0][0]) for step in walk.steps if step.name == "generate.chosen"]


def test_lm_explain_chooses_the_tokens_lm_generate_greedy_chooses(trained_lm):
    model, tokenizer, _ = load_model(trained_lm)
    for prompt in PROMPTS:
        ids = prompt_ids(tokenizer, prompt)
        walk = explain_lm(model, tokenizer, ids, max_new_tokens=4)
        expected = generate(model, ids, 4, SamplingOptions(greedy=True))
        assert chosen_ids(walk) == expected and len(expected) == 4
        assert walk.target_tokens == [tokenizer.id_to_token(i) for i in ids + expected]


def test_lm_explain_cli_matches_lm_generate_greedy_cli(trained_lm, capsys):
    for prompt in PROMPTS[:3]:
        assert main(["lm", "explain", prompt, "--model", str(trained_lm), "--format", "json",
                     "--max-new-tokens", "3"]) == 0
        walk = json.loads(capsys.readouterr().out)
        assert main(["lm", "generate", prompt, "--model", str(trained_lm), "--greedy", "--max-new-tokens", "3"]) == 0
        printed = capsys.readouterr().out.strip()
        assert "\n" not in printed and "<eos>" not in walk["target_tokens"][1:]  # so the texts compare
        assert walk["result"] == printed
        assert printed.startswith(prompt) and len(walk["target_tokens"]) == len(prompt.split()) + 4


@pytest.mark.parametrize("variant", ["mha", "gqa", "mla"])
def test_every_generation_step_records_one_new_query_row_against_every_key(variant):
    model = tiny_model(variant)
    tokenizer = WordTokenizer(list(SPECIALS) + [f"w{i}" for i in range(40 - len(SPECIALS))])
    ids = [tokenizer.eos_id, 5, 9, 12]
    paths = [True, False] if variant == "mla" else [None]
    for absorb in paths:
        model.set_mla_path(absorb)
        walk = explain_lm(model, tokenizer, ids, max_new_tokens=3)
        assert chosen_ids(walk) == generate(model, ids, 3, SamplingOptions(greedy=True))
        for t in range(3):
            scaled = walk.find("self_attention.scaled" if absorb is not True else "absorbed.scaled", t)[0]
            assert len(scaled.matrices[0].values) == (len(ids) if t == 0 else 1)
            assert len(scaled.matrices[0].values[0]) == len(ids) + t
            weights = walk.find("layers.1.self_attention.weights" if absorb is not True
                                else "layers.1.self_attention.absorbed.weights", t)[0]
            values = torch.tensor([m.values for m in weights.matrices])
            assert values.shape[1:] == (len(ids) + t, len(ids) + t)  # the rows so far
            assert torch.all(values.triu(1) == 0)
            torch.testing.assert_close(values.sum(-1), torch.ones(values.shape[:-1], dtype=values.dtype))
