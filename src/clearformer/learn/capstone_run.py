"""Lesson 15 from the command line (clearformer's side): find the toy run, start the child, judge, print the answer.

The learner's file runs in the child (learn/child.py -> learn/capstone.py); this module never imports it. `learn
check transformer` is judged here in full (learn/capstone_judge.py). `learn train` trains the learner's modules, which
only the child can run: what it says about its training is read as untrusted data, and the answer holds only once
this process has read the run it says it wrote (`clearformer translate --checkpoint DIR` reads the same).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.learn.capstone_judge import judge_capstone, load_toy
from clearformer.learn.check import Report
from clearformer.learn.sandbox import check_timeout, read_source, run_child
from clearformer.learn.verdict import missing, results_of
from clearformer.learn.wire import MAX_TEXT, Malformed, decode, read_raised, text, type_name, whole

CAPSTONE = "transformer"
CAPSTONE_FILE = "transformer.py"
TRAIN_CASES = ["building your Transformer", "training", "translating 'I love you'"]


def check_capstone(path: Path, timeout: float, checkpoint=None) -> Report:
    """`learn check transformer FILE`: the toy run's weights in the learner's model, compared module by module."""
    from clearformer.learn.toy import ensure_toy_model

    check_timeout(timeout)
    refuse_untouched_starters(path, read_source(path))
    run_dir = ensure_toy_model(checkpoint)
    toy = load_toy(run_dir)   # what the learner's model is compared with: read before its code runs anywhere
    run = run_child({"kind": "transformer", "path": str(path), "run": str(run_dir)}, timeout,
                    limit=toy.events_limit())
    return judge_capstone(run, path, timeout, toy)


def check_capstone_here(path: Path, run_dir: Path) -> Report:
    """The same check in this process, without the child's limits: for clearformer's own tests, on trusted files.
    The child's side (learn/capstone.py) and the checker's talk through the same JSON lines as across the pipe."""
    import json

    from clearformer.learn.capstone import check_learner
    from clearformer.learn.learner import load_module
    from clearformer.learn.sandbox import ChildRun
    from clearformer.load import load_model

    toy = load_toy(run_dir)
    reference, tokenizer, _ = load_model(run_dir)
    module = load_module(path, read_source(path), CAPSTONE)
    lines = [{"event": "stage", "stage": "cases"}, {"event": "case", "index": 0}]
    check_learner({"path": str(path)}, module, reference, tokenizer,
                  lambda event, **fields: lines.append(json.loads(json.dumps({"event": event, **fields}))))
    return judge_capstone(ChildRun([*lines, {"event": "done"}], returncode=0), path, 60.0, toy)


def refuse_untouched_starters(path: Path, source: str) -> None:
    """An exercise file the capstone imports that is still its untouched starter is not the learner's work: a
    one-line UserError naming it (learn/starters.py), before anything runs."""
    from clearformer.learn.starters import starter_advice, untouched_starters

    found = untouched_starters(path, source)
    if found:
        item, file = found[0]
        others = f" (and {len(found) - 1} more: {', '.join(f.name for _, f in found[1:])})" if len(found) > 1 else ""
        raise UserError(f"{path.name} imports {file.name}{others}, but {starter_advice(item, file)}")


def train_capstone(path: Path, out: Path | None, timeout: float, steps: int | None, overwrite: bool,
                   checkpoint=None) -> int:
    """`learn train FILE`: clearformer's trainer on the learner's model, then "I love you"; 0 when it trained."""
    from clearformer.learn.toy import ensure_toy_model
    from clearformer.store.runs import default_run_dir

    check_timeout(timeout)
    refuse_untouched_starters(path, read_source(path))
    if steps is not None and not 1 <= steps <= 100_000:
        raise UserError("--steps: give a number of steps from 1 to 100000")
    run_dir = ensure_toy_model(checkpoint)       # its tokenizer and config are the ones the trainer rebuilds
    out = out or default_run_dir("my-transformer")
    print(f"clearformer learn: training your model ({path}) with clearformer's trainer into {out}", flush=True)
    run = run_child({"kind": "train", "path": str(path), "run": str(run_dir), "out": str(out), "steps": steps,
                     "overwrite": overwrite}, timeout, quiet=False)
    try:
        trained, ids = trained_results(run, path, timeout)
    except Malformed as error:
        trained, ids = f"{path}: the checker's report holds {error}: not believed", None
    if isinstance(trained, str):
        sys.stdout.write(f"wrong: {trained}\n")
        return 1
    return report_training(trained, ids, out)


def trained_results(run, path: Path, timeout: float) -> tuple[dict | str, list | None]:
    """(the trainer's numbers, the translation's ids) from the child's three results (learn/capstone.py,
    `train_learner`), each checked as data; or (the one line saying what went wrong, None). The child stops at the
    first that failed, so each result is needed only once the one before it succeeded."""
    results = results_of(run, path, timeout, TRAIN_CASES, "your Transformer")
    for index, what in enumerate(("building Transformer(...)", "training your model", "translate()")):
        stopped = results.stopped or missing(results, path, TRAIN_CASES, index + 1)
        if stopped is not None:
            return stopped, None
        result = results.by_case[index]
        fields = set(result) - {"event", "index"}
        if fields == {"raised"}:
            error = read_raised(result["raised"])
            return f"{error.where}: {what} raised {error.describe()}", None
        if index == 0 and fields == {"problem"}:
            return text(result["problem"], MAX_TEXT, "a problem"), None
    trained, translated = results.by_case[1].get("trained"), results.by_case[2].get("value")
    numbers = ("seconds", "loss", "valid_loss")
    if not isinstance(trained, dict) or set(trained) != {"steps", *numbers} or not whole(trained["steps"]) \
            or not all(number(trained[key]) for key in numbers) or translated is None:
        raise Malformed("a training result that is not the trainer's numbers and a translation")
    got = decode(translated)
    ids = got.tolist() if isinstance(got, torch.Tensor) else list(got) if isinstance(got, (list, tuple)) else None
    if ids is None:
        return f"{path}: translate() returned {type_name(got)}, expected a list of token ids", None
    return trained, ids


def number(value) -> bool:
    """A finite number or None (a loss the trainer did not measure)."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))


def report_training(trained: dict, ids: list, out: Path) -> int:
    """What the trainer said, once the run it wrote reads back here as a clearformer run; its tokenizer spells the
    learner's translation."""
    from clearformer.learn.capstone_judge import spelled
    from clearformer.load import load_model

    try:
        _, tokenizer, _ = load_model(out)
    except UserError as error:
        sys.stdout.write(f"wrong: {out}: training left no run clearformer can read ({error})\n")
        return 1
    losses = ", ".join(f"{what} loss {trained[key]:.3f}" for what, key in (("training", "loss"),
                                                                           ("validation", "valid_loss"))
                       if trained.get(key) is not None)
    print(f"trained your model for {trained['steps']} steps in {trained['seconds']:g} s ({losses}); run in "
          f"{out} (`clearformer translate --checkpoint DIR` reads it)")
    print(f"your model translates 'I love you' as {spelled(tokenizer, ids)!r}")
    return 0


__all__ = ["CAPSTONE", "CAPSTONE_FILE", "check_capstone", "train_capstone"]
