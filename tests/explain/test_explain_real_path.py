"""`explain` runs `translate`'s path: the same encoder input, the same greedy decoder, the same words."""

from __future__ import annotations

import copy

import pytest
import torch

from clearformer.errors import UserError
from clearformer.explain.translation import explain_translation
from clearformer.generate import DecodingOptions, search_tokens
from clearformer.generate.translate import translate
from clearformer.generate.translator import decode_ids
from clearformer.record import trace
from clearformer.tokenize import encode_source

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

SENTENCES = ["I love you", "I love the cat", "the dog sleeps", "we eat bread", "you like music .",
             "She reads a book", "I love Paris"]


@pytest.fixture(params=["word_model", "subword_model"])
def trained(request):
    return request.getfixturevalue(request.param)


def chosen_ids(walk) -> list[int]:
    return [int(step.matrices[0].values[0][0]) for step in walk.steps if step.name == "generate.chosen"]


def test_explain_encodes_the_source_as_translate_does(trained):
    model, tokenizer = trained
    for sentence in SENTENCES:
        walk = explain_translation(model, tokenizer, sentence)
        ids = encode_source(tokenizer, sentence)
        assert walk.source_tokens == [tokenizer.id_to_token(i) for i in ids]
        recorded = walk.find("src_embed.token_ids")[0].matrices[0].values[0]
        assert [int(v) for v in recorded] == ids


def test_explain_outputs_translates_greedy_tokens(trained):
    model, tokenizer = trained
    walks = [explain_translation(model, tokenizer, sentence) for sentence in SENTENCES]
    # translate batches the sentences (longest first, padded); explain decodes one at a time.
    assert [walk.result for walk in walks] == translate(model, tokenizer, SENTENCES, DecodingOptions())
    for sentence, walk in zip(SENTENCES, walks, strict=True):
        src = torch.tensor([encode_source(tokenizer, sentence)])
        expected = decode_ids(model, src, DecodingOptions(), search_tokens(model, tokenizer))[0]
        chosen = chosen_ids(walk)
        assert (chosen[:-1] if chosen[-1] == tokenizer.eos_id else chosen) == expected
        assert chosen == [tokenizer.token_to_id(t) for t in walk.target_tokens[1:]]
    assert any(len(chosen_ids(walk)) > 2 for walk in walks)  # more than one cached step is exercised


def test_each_step_shows_its_own_row_and_the_rows_so_far_equal_a_full_prefix_pass(word_model):
    model, tokenizer = word_model
    walk = explain_translation(model, tokenizer, "I love the cat")
    last = max(s.decode_step for s in walk.steps if s.decode_step is not None)
    assert last >= 2
    for t in range(last + 1):
        scores = walk.find("decoder.layers.0.self_attention.scores", t)[0]
        assert [len(m.values) for m in scores.matrices] == [1, 1]  # the step computed one query row
        assert len(scores.matrices[0].values[0]) == t + 1  # against every key so far (from the cache)
        weights = walk.find("decoder.layers.0.self_attention.weights", t)[0]
        assert weights.matrices[0].row_labels == walk.target_tokens[: t + 1]
    # The rows so far are the numbers a pass over the whole prefix computes (the old view's triangle).
    src = torch.tensor([encode_source(tokenizer, "I love the cat")])
    prefix = torch.tensor([[tokenizer.token_to_id(t) for t in walk.target_tokens[: last + 1]]])
    with torch.no_grad(), trace.Recorder() as recorder:
        memory, src_mask = model.encode(src)
        model.decode(prefix, memory, src_mask)
    for name in ("self_attention.weights", "cross_attention.weights"):
        full = recorder.get(f"decoder.layers.0.{name}")[0]
        shown = walk.find(f"decoder.layers.0.{name}", last)[0]
        for head, matrix in enumerate(shown.matrices):
            shown_values = torch.tensor(matrix.values, dtype=torch.float64)
            torch.testing.assert_close(shown_values, full[head].double(), atol=1e-5, rtol=1e-5)
    mask = walk.find("decoder.layers.0.self_attention.mask", last)[0].matrices[0].values
    assert mask == torch.ones(last + 1, last + 1).tril().tolist()


def test_a_model_trained_with_source_eos_gets_it_in_explain_too(word_model):
    model, tokenizer = word_model
    trained_with = copy.copy(tokenizer)
    trained_with.source_eos = True
    walk = explain_translation(model, trained_with, "I love you", DecodingOptions(max_new=2))
    assert walk.source_tokens == ["I", "love", "you", "<eos>"]
    assert walk.find("cross_attention.weights", 0)[0].matrices[0].col_labels == walk.source_tokens


@pytest.mark.parametrize("sentence, message", [("  ", "empty sentence"), ("zzz qqq", "unknown"),
                                               (" ".join(["cat"] * 200), "longer than the model.s maximum length")])
def test_input_no_model_can_use_gets_one_line(word_model, sentence, message):
    model, tokenizer = word_model
    with pytest.raises(UserError, match=message):
        explain_translation(model, tokenizer, sentence)
