"""Long inputs (issue 13): an input of more than 25 words is translated sentence by sentence, as the
training data were cut (`clearformer.tokenize.sentences`), and the translations are joined."""

from __future__ import annotations

import pytest
from gen_helpers import SENTENCES, random_model

from clearformer.errors import UserError
from clearformer.evaluate import evaluate_model
from clearformer.generate import DecodingOptions, translate
from clearformer.generate.source import prepare_sources
from clearformer.generate.translator import join_pieces, per_input_progress
from clearformer.tokenize import WordTokenizer
from clearformer.tokenize.sentences import split_long

LONG = ("I love the cat. " * 9 + "We eat bread.").strip()  # 31 words, ten sentences


def test_only_inputs_over_25_words_are_cut():
    assert split_long("I love you. We eat bread.") == ["I love you. We eat bread."]
    assert split_long(LONG) == ["I love the cat."] * 9 + ["We eat bread."]
    assert split_long("word " * 30) == [("word " * 30).strip()]  # no sentence end: whole


def test_pieces_go_back_to_their_input():
    tokenizer = WordTokenizer.build(SENTENCES)
    read = prepare_sources(tokenizer, ["I love you", LONG, ""], 64, check=False)
    pieces, owners = read.texts, read.owners
    assert pieces[0] == "I love you" and owners == [0] + [1] * 10 + [2]
    assert join_pieces(["a", *["b"] * 10, ""], owners, 3) == ["a", " ".join(["b"] * 10), ""]
    counted = []
    report = per_input_progress(counted.append, 3, 12)
    for _ in range(12):
        report(1)
    assert sum(counted) == 3


def test_translate_and_evaluate_join_the_sentences_translations():
    tokenizer = WordTokenizer.build(SENTENCES)
    model = random_model(len(tokenizer), seed=2)
    with pytest.raises(UserError, match="longer than the model's maximum length"):  # whole: checked, refused
        translate(model, tokenizer, [LONG], DecodingOptions(split=False))
    by_sentence = translate(model, tokenizer, [LONG])[0]
    one_by_one = translate(model, tokenizer, ["I love the cat.", "We eat bread."])
    assert by_sentence == " ".join(t for t in [one_by_one[0]] * 9 + [one_by_one[1]] if t)
    evaluation, _ = evaluate_model(model, tokenizer, [(LONG, "x"), ("I love you", "y")])
    assert evaluation.hypotheses[0] == by_sentence
