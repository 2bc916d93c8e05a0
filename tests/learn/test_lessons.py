"""`clearformer learn`: the lessons' snippets compute the seeds' true values; questions are read off the recording."""

from __future__ import annotations

import builtins
import math
import re
import sys

import pytest
import torch

from clearformer.cli import main
from clearformer.learn.lessons import LESSONS, lesson
from clearformer.learn.session import open_lesson
from clearformer.learn.snippets import run_snippet
from clearformer.load import load_model
from clearformer.record import trace

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

ISSUE_TOPICS = ["token ids and embeddings", "positional encoding", "queries, keys and values",
                "scaled dot-product attention", "masks", "multi-head attention", "add & norm",
                "the encoder", "cross-attention", "greedy decoding", "label smoothing", "beam search",
                "decoder-only", "kv cache", "put it together"]


def test_the_list_is_the_issues_fifteen_lessons_in_the_seeds_order(capsys):
    assert main(["learn"]) == 0
    listed = [line.split(". ", 1)[1] for line in capsys.readouterr().out.splitlines()
              if re.match(r"\s+\d+\. ", line)]
    assert len(listed) == len(LESSONS) == 16
    for title, topic in zip(listed[:15], ISSUE_TOPICS, strict=True):
        assert topic in title.lower()
    assert "browser" in listed[15].lower()  # issue 38's lesson after the seeds' fifteen (learn/browser.py)


@pytest.fixture(scope="module")
def snippets() -> dict:
    return {item.number: run_snippet(item.snippet) for item in LESSONS}


def _t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def test_snippets_compute_the_seeds_true_values(snippets, golden):
    i_love_you, india = golden["seed_002_i_love_you"], golden["seed_001_india_is_great"]
    ns = {n: run.namespace for n, run in snippets.items()}
    assert torch.equal(ns[1]["rows"][0], _t(i_love_you["embedding_matrix"])[1:4])
    torch.testing.assert_close(ns[2]["pe"].double(), _t(golden["seed_003_positional_encoding_5x6"]["PE"]),
                               atol=1e-6, rtol=0)
    torch.testing.assert_close(ns[2]["X"], _t(i_love_you["X"]), atol=1e-6, rtol=0)
    for name in "QKV":
        torch.testing.assert_close(ns[3][name], _t(india[name]), atol=1e-6, rtol=0)
    for name in ("scores", "scaled", "weights", "output"):
        torch.testing.assert_close(ns[4][name], _t(i_love_you[name]), atol=1e-6, rtol=0)
    torch.testing.assert_close(ns[5]["weights"].double(), _t(i_love_you["masked_example"]["weights"]), atol=1e-6,
                               rtol=0)
    torch.testing.assert_close(ns[6]["output"], _t(india["multi_head"]["output"]), atol=1e-6, rtol=0)
    torch.testing.assert_close(ns[10]["probabilities"].double(),
                               _t(i_love_you["output_layer_example"]["probabilities"]), atol=1e-6, rtol=0)


def test_snippets_show_what_they_computed(snippets):
    """The printed output is the run's own: the true (not the seed's) numbers appear in it."""
    assert "4.1483" in snippets[4].output and "3.21" not in snippets[4].output
    assert "0.4992" in snippets[5].output           # seed 002's masked row 2, corrected
    assert "2.3151" in snippets[6].output
    assert "Je       0.4792" in snippets[10].output
    assert "one token at a time with the cache == all at once: True" in snippets[14].output
    assert "(28.1% of MHA)" in snippets[14].output


def test_other_snippets_hold_their_formulas(snippets):
    ns = {n: run.namespace for n, run in snippets.items()}
    norm = ns[7]["norm"]
    torch.testing.assert_close(norm.mean(-1), torch.zeros(3), atol=1e-5, rtol=0)
    recorder = ns[7]["recorder"]
    torch.testing.assert_close(ns[7]["residual"], recorder.get("encoder.layers.0.self_attention.output")[0]
                               + torch.tensor(ns[7]["INDIA_X"]), atol=1e-6, rtol=0)
    weights = recorder_weights = ns[9]["recorder"].get("decoder.layers.0.self_attention.weights")[0, 0]
    assert torch.equal(weights.triu(1), torch.zeros_like(recorder_weights))            # causal
    loss, nll, _ = ns[11]["loss"], ns[11]["nll"], ns[11]["tokens"]
    assert math.isclose(float(nll), -math.log(0.479195), abs_tol=1e-5)
    assert float(loss) > float(nll)                                                     # smoothing 0.1
    seed_is_row = torch.softmax(torch.tensor([0.2, 0.6]), -1)
    torch.testing.assert_close(ns[13]["masked_softmax"](ns[13]["scaled"], ns[13]["causal_mask"](6))[1, :2],
                               seed_is_row)


def test_the_concepts_quote_the_true_values(golden):
    """The corrected arithmetic in the lesson text is the golden one, rounded."""
    seed = golden["seed_002_i_love_you"]
    row1 = ", ".join(f"{v:.4f}" for v in seed["scores"][1])
    assert row1 in lesson(4).concept
    assert ", ".join(f"{v:.3f}" for v in seed["masked_example"]["weights"][2][:3]) in lesson(5).concept
    assert f"{seed['output_layer_example']['probabilities'][4]:.4f}" in lesson(10).concept
    assert ", ".join(f"{v:.4f}" for v in golden["seed_001_india_is_great"]["multi_head"]["output"][0]) \
        in lesson(6).concept


@pytest.mark.parametrize("number", [item.number for item in LESSONS])
def test_each_lesson_in_the_terminal_checks_its_answer(toy_runs, number, capsys):
    session = open_lesson(number, "I love you")
    answer = session.question.shown_answer().split(")")[0]   # a number, or a choice's letter
    assert main(["learn", str(number), "--answer", answer]) == 0
    out = capsys.readouterr().out
    assert f"Lesson {number} of {len(LESSONS)}" in out and "See it work" in out and "--- output ---" in out
    assert "On your sentence: 'I love you'" in out and "Right:" in out
    wrong = "zzz" if session.question.kind == "choice" else str(float(session.question.answer) + 1)
    if session.question.kind == "choice":
        wrong = next(chr(ord("a") + i) for i, c in enumerate(session.question.choices) if c != session.question.answer)
    assert main(["learn", str(number), "--answer", wrong]) == 1
    assert "Hint: " in capsys.readouterr().out


def _model_scaled(sentence: str, toy_runs):
    model, tokenizer, _ = load_model(toy_runs / "toy-translate")
    from clearformer.tokenize import encode_source

    ids = torch.tensor([encode_source(tokenizer, sentence)])
    with trace.Recorder() as recorder, torch.no_grad():
        logits = model.eval()(ids, torch.tensor([[tokenizer.bos_id]]))
    return recorder, torch.softmax(logits[0, -1].double(), -1)


@pytest.mark.parametrize("sentence", ["I love you", "the cat sleeps"])
def test_numbers_in_questions_come_from_the_model_on_any_sentence(toy_runs, sentence):
    recorder, _ = _model_scaled(sentence, toy_runs)
    weight = open_lesson(4, sentence)               # a weight computed from a row of scaled scores
    view = weight.views[1]
    scores = next(s for s in weight.run.walk.steps if s.name == view.name and s.decode_step == view.decode_step)
    row = next(m for m in scores.matrices if m.head == view.head).values
    weights = [torch.softmax(torch.tensor(r, dtype=torch.float64), -1).tolist() for r in row]
    assert any(math.isclose(float(weight.question.answer), w, abs_tol=1e-9) for r in weights for w in r)
    ratio = open_lesson(10, sentence)               # p(runner-up) / p(chosen) from two logits
    logits = step_of(ratio, 0)
    chosen = step_of(ratio, 1).matrices[0].note
    values = dict(zip(logits.matrices[0].col_labels, logits.matrices[0].values[0], strict=True))
    other = max((w for w in values if w != chosen), key=values.get)
    assert math.isclose(float(ratio.question.answer), math.exp(values[other] - values[chosen]), rel_tol=1e-9)
    cache = open_lesson(14, sentence)
    last = max(s.decode_step for s in cache.run.walk.steps if s.decode_step is not None)
    config = load_model(toy_runs / "toy-translate")[0].config
    assert cache.question.answer == 2 * config.n_decoder_layers * config.d_model * (last + 1)  # K and V, each position
    memory = open_lesson(8, sentence)
    assert memory.question.answer == 2 * config.n_decoder_layers * config.d_model * len(memory.run.walk.source_tokens)
    memory_rows = recorder.get("encoder.output").shape[1]
    assert memory_rows == len(memory.run.walk.source_tokens)


def step_of(session, index: int):
    view = session.views[index]
    return next(s for s in session.run.walk.steps if s.name == view.name and s.decode_step == view.decode_step)


def test_unusable_input_is_exit_2(toy_runs, capsys):
    for argv in (["learn", "0"], ["learn", str(len(LESSONS) + 1)], ["learn", "two"], ["learn", "4", "--answer", "abc"],
                 ["learn", "5", "--answer", "z"], ["learn", "4", "--answer", "nan"], ["learn", "4", "extra"],
                 ["learn", "4", "--sentence", " "], ["learn", "4", "--checkpoint", str(toy_runs / "missing")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("clearformer learn: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_a_choice_is_accepted_by_letter_or_text(toy_runs, capsys):
    question = open_lesson(9).question
    assert main(["learn", "9", "--answer", question.answer.upper()]) == 0
    letter = chr(ord("a") + question.choices.index(question.answer))
    assert main(["learn", "9", "--answer", letter]) == 0


def test_interactive_prompt_hints_then_retries(toy_runs, monkeypatch, capsys):
    question = open_lesson(4).question
    replies = iter(["1000", f"{question.answer:.4f}"])
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(builtins, "input", lambda prompt="": next(replies))
    assert main(["learn", "4"]) == 0
    out = capsys.readouterr().out
    assert "Hint: " in out and "the step \"Scaled scores\"" in out and "Right:" in out
    replies = iter(["1000", "2000"])
    assert main(["learn", "4"]) == 1
    assert "The answer: " in capsys.readouterr().out


def test_the_toy_model_is_trained_on_first_use_in_a_child(tmp_path, monkeypatch, capsys, quick_toy_training):
    """From an empty folder with no model: trained once (in a child process, whatever this process's gradient
    mode), into the cache, never under runs/ (runs/LATEST of the user's own run stays where it was)."""
    monkeypatch.setenv("CLEARFORMER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "LATEST").write_text("/my/own/run\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with torch.no_grad():
        assert main(["learn", "1", "--sentence", "I love you"]) == 0
    assert "no toy model yet; training one into" in capsys.readouterr().err
    assert (tmp_path / "cache" / "toy-translate" / "model.safetensors").exists()
    assert not (tmp_path / "cache" / "toy-translate.partial").exists()
    assert (tmp_path / "runs" / "LATEST").read_text(encoding="utf-8") == "/my/own/run\n"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["LATEST"]
    assert main(["learn", "1", "--sentence", "I love you"]) == 0  # the second time: no training
    assert "training" not in capsys.readouterr().err


def test_a_failed_first_training_blocks_nothing_and_its_advice_works(tmp_path, monkeypatch, capsys,
                                                                     quick_toy_training):
    import clearformer.learn.toy as toy

    monkeypatch.setenv("CLEARFORMER_CACHE", str(tmp_path / "cache"))
    from clearformer.store.lock import MARKER_FILE

    (tmp_path / "cache" / "toy-translate.partial").mkdir(parents=True)  # what a killed try leaves: the run's
    (tmp_path / "cache" / "toy-translate.partial" / MARKER_FILE).write_text("clearformer run\n")  # marker first
    (tmp_path / "cache" / "toy-translate.partial" / "config.json").write_text("{", encoding="utf-8")
    quick = toy.TOY_TRAINING
    monkeypatch.setattr(toy, "TOY_TRAINING", {**quick, "steps": -1})  # the child fails
    assert main(["learn", "1"]) == 2
    err = capsys.readouterr().err
    assert "failed" in err and "nothing was kept" in err and "Traceback" not in err.splitlines()[-1]
    assert not (tmp_path / "cache" / "toy-translate.partial").exists()
    advice = err.splitlines()[-1].split("run `")[1].split("`")[0]  # "clearformer learn 1"
    monkeypatch.setattr(toy, "TOY_TRAINING", quick)
    assert main(advice.split()[1:]) == 0


def test_a_second_learn_during_the_first_training_says_in_use(tmp_path, monkeypatch, capsys):
    import fcntl
    import os

    monkeypatch.setenv("CLEARFORMER_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    holder = os.open(tmp_path / "cache" / "toy-translate.lock", os.O_RDWR | os.O_CREAT)
    os.write(holder, b"PID 4242")
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        assert main(["learn", "1"]) == 2
    finally:
        os.close(holder)
    err = capsys.readouterr().err
    assert "in use" in err and "PID 4242" in err and "--resume" not in err


def test_the_session_checks_answers_as_the_terminal_does(toy_runs, capsys):
    session = open_lesson(4, "I love you")
    assert session.check(None) is None and "Put your answer" in capsys.readouterr().out
    assert session.check(session.question.answer) is True
    assert session.check(float(session.question.answer) + 0.01) is False
    assert "Hint: " in capsys.readouterr().out
    names = [s.name for s in session.steps().steps]
    # the least saturated attention row of the model: a self- or a cross-attention, as the model's seed has it
    assert len(names) == 2 and names[0].endswith("attention.scores")
    assert names[1] == names[0].replace(".scores", ".scaled")
    assert "Scaled scores" in session.steps_text()


def test_learn_names_unknown_words_and_lists_the_vocabulary(toy_runs, capsys):
    assert main(["learn", "--vocab"]) == 0
    out = capsys.readouterr().out
    assert "knows these" in out and " love " in f" {out} " and "<unk>" in out.splitlines()[0] + out.splitlines()[1]
    assert main(["learn", "4", "--sentence", "i love quantum", "--answer", "0"]) in (0, 1)
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "unknown word(s) translated as <unk>: i, quantum" in warnings[0]


def test_a_lesson_fits_an_80_column_terminal_and_numbers_its_steps(toy_runs, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["learn", "4", "--answer", "0"]) in (0, 1)
    out = capsys.readouterr().out
    ruled = [line for line in out.splitlines() if line.startswith(("==", "─"))]
    assert ruled and all(len(line) <= 80 for line in ruled)
    question = out.split("== Question")[1].splitlines()[1:]
    assert all(len(line) <= 80 for line in question)
    numbers = re.findall(r"^Step (\d+)\. ", out, re.MULTILINE)
    assert len(numbers) >= 2 and len(set(numbers)) == len(numbers)  # each step keeps its own number
    session = open_lesson(4, "I love you")
    shown = step_of(session, 1)
    scaled = next(i for i, s in enumerate(session.run.walk.steps, start=1) if s is shown)
    assert f"Step {scaled}. Scaled scores" in out  # the number the page shows for that step
