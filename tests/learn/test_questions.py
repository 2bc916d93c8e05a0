"""The lessons' questions need thinking: the answer is never printed, a round answer is refused, the hint names the
step and the rule; lesson 9's claim holds against the recorded weights; every lesson ends with its exercise."""

from __future__ import annotations

import re

import pytest
import torch

from clearformer.cli import main
from clearformer.learn.exercises import EXERCISES
from clearformer.learn.lessons import LESSONS, cross_rows
from clearformer.learn.questions import Question, is_right
from clearformer.learn.session import open_lesson
from clearformer.load import load_model
from clearformer.record import trace
from clearformer.tokenize import encode_source

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

SENTENCES = ["I love you", "the cat sleeps"]


def printed(number: int, sentence: str, capsys) -> str:
    """What `clearformer learn N --sentence S` prints before the learner answers."""
    assert main(["learn", str(number), "--sentence", sentence]) == 0
    return capsys.readouterr().out


def spellings(answer: float, whole: bool) -> set[str]:
    """The ways a lesson prints a number: a whole number, or 2 to 6 decimals."""
    if whole:
        return {f"{answer:.0f}"}
    return {f"{answer:.{decimals}f}" for decimals in range(2, 7)}


@pytest.mark.parametrize("sentence", SENTENCES)
@pytest.mark.parametrize("number", [item.number for item in LESSONS])
def test_the_answer_is_not_on_the_screen_and_a_round_one_is_refused(toy_runs, number, sentence, capsys):
    session = open_lesson(number, sentence)
    question = session.question
    shown = printed(number, sentence, capsys) + "\n" + question.hint
    if question.kind == "choice":  # a choice is printed by design: what must not be printed is which one
        assert question.answer in question.choices and len(question.choices) >= 2
        return
    answer = float(question.answer)
    for text in spellings(answer, question.tolerance == 0):
        # a number as printed: not the digits of a longer number (0.27 in 0.2734, 21 in 215)
        assert not re.search(r"(?<![\d.])" + re.escape(text) + r"(?!\d)", shown), (number, text)
    assert is_right(question, f"{answer!r}")
    if question.tolerance > 0:  # rounded answers are refused, as is the nearest whole number
        assert not is_right(question, str(round(answer))), (number, answer)
        assert not is_right(question, str(round(answer, 1))), (number, answer)
        assert not is_right(question, "0")


@pytest.mark.parametrize("answer", [0.9007156901235668, -0.30004, 1.99996, 12.05, 0.04999, 3e-6, 123.4567])
@pytest.mark.parametrize("tolerance", [5e-5, 5e-4, 1e-3])
def test_a_rounded_answer_is_refused_whatever_the_answer(answer, tolerance):
    """The tolerance comes from the answer's own scale (questions.py `refusing_rounded`): an answer a hair from a
    round number is asked more finely, so its rounding to 0.1, to a whole number or to 0 is refused."""
    question = Question("?", "number", answer, hint="", tolerance=tolerance)
    assert 0 < question.tolerance <= tolerance
    assert is_right(question, repr(answer)) and is_right(question, repr(answer + question.tolerance * 0.99))
    for rounded in (round(answer, 1), round(answer), 0):
        if rounded != answer:
            assert not is_right(question, str(rounded)), (answer, rounded, question.tolerance)


@pytest.mark.parametrize("number", [item.number for item in LESSONS])
def test_each_lesson_ends_with_its_exercise_command(toy_runs, number, capsys):
    out = printed(number, "I love you", capsys)
    names = {item.name for item in EXERCISES} | {"transformer"}
    last = " ".join(out.split("== Practise it")[1].split()[1:])
    command = re.search(r"`clearformer learn exercise ([a-z-]+)`", last)
    assert command and command.group(1) in names
    assert f"`clearformer learn check {command.group(1)} FILE`." in last and out.rstrip().endswith("FILE`.")


@pytest.mark.parametrize("sentence", SENTENCES)
def test_lesson_9s_alignment_is_what_the_head_recorded(toy_runs, sentence, capsys):
    """The feedback lists, row by row, the word each cross-attention row chose (the NEXT word) and the source word
    the head weighed most: a fresh forward pass of the toy model on the translation (teacher forced) says the same."""
    session = open_lesson(9, sentence)
    layer, head = map(int, re.match(r"Decoder layer (\d+), head (\d+):", session.question.prompt).groups())
    model, tokenizer, _ = load_model(toy_runs / "toy-translate")
    source = encode_source(tokenizer, sentence)
    target = [tokenizer.token_to_id(t) for t in session.run.walk.target_tokens]
    with torch.no_grad(), trace.Recorder() as recorder:
        model.eval()(torch.tensor([source]), torch.tensor([target[:-1]]))
    weights = recorder.get(f"decoder.layers.{layer}.cross_attention.weights")[0, head]
    words = [tokenizer.id_to_token(i) for i in source]
    rows = cross_rows(session.run, layer, head)
    assert len(rows) == len(target) - 1
    for position, row in enumerate(rows):
        assert row.label == session.run.walk.target_tokens[position]       # the decoder input at the position
        assert row.chosen == session.run.walk.target_tokens[position + 1]  # predicts the next word
        assert row.source == words[int(weights[position].argmax())]
        assert abs(row.weight - float(weights[position].max())) < 1e-4
        assert f"row {row.label!r} (choosing {row.chosen!r}) -> {row.source!r} {row.weight:.2f}" in session.question.why
    # the question names a chosen word; its answer is the row BEFORE it, which the row of the word itself is not
    chosen = re.search(r"the model chose (.+?) at generation step (\d+)\.", session.question.prompt)
    asked = rows[int(chosen.group(2)) - 1]
    assert repr(asked.chosen) == chosen.group(1) and session.question.answer == asked.source
    concept = " ".join(open_lesson(9, sentence).lesson.concept.split())
    assert "predicts the NEXT word" in concept and "translates" in concept
    assert "each target word looks at the source words" not in concept


def test_the_texts_the_course_corrected(toy_runs, capsys):
    from clearformer.learn.lessons import lesson

    walk = open_lesson(7, "I love you").run.walk
    formulas = {s.name: s.formula for s in walk.steps if s.decode_step is None}
    assert formulas["src_embed.X"].startswith("X = E[ids] · √d_model + PE")       # as its numbers are
    assert "+ b^Q" in formulas["encoder.layers.0.self_attention.Q"]              # the bias lesson 3 explains
    assert "+ b^K" in formulas["encoder.layers.0.self_attention.K"]
    hint = open_lesson(12, "I love you").question.hint
    assert "lp(t + 1)" not in hint and "labels step t with lp(t)" in hint        # as the beam table does
    assert "two minutes" not in lesson(15).concept and "prints the time it took" in " ".join(lesson(15).concept.split())
    out = printed(13, "I love you", capsys)
    assert "model/lm.py" in out and "BEFORE the causal mask" in out              # a language model reads it
    assert "(the trained toy model)" not in out.split("On your sentence")[1].split("== Question")[0]
