"""Lesson 15 from the command line (clearformer's side): find the toy run, start the child, print the answer.

The learner's file runs in the child (learn/child.py -> learn/capstone.py); this module never imports it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from clearformer.errors import UserError
from clearformer.learn.check import Report, report_from_dict, report_of
from clearformer.learn.sandbox import check_timeout, read_source, run_child

CAPSTONE = "transformer"
CAPSTONE_FILE = "transformer.py"


class _Capstone:
    name = CAPSTONE
    function = "your Transformer"


def check_capstone(path: Path, timeout: float, checkpoint=None) -> Report:
    """`learn check transformer FILE`: the toy run's weights in the learner's model, compared module by module."""
    from clearformer.learn.toy import ensure_toy_model

    check_timeout(timeout)
    refuse_untouched_starters(path, read_source(path))
    run_dir = ensure_toy_model(checkpoint)
    run = run_child({"kind": "transformer", "path": str(path), "run": str(run_dir)}, timeout)
    return report_of(run, _Capstone, path, timeout)


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
    done = run.done
    if done is None or run.damaged or "report" in done:
        report = report_of(run, _Capstone, path, timeout)   # unusable, stopped: one line (or a UserError)
        sys.stdout.write(f"wrong: {report.stopped}\n")
        return 1
    if "unusable" in done:
        raise UserError(str(done["unusable"]))
    if "internal" in done:
        raise UserError(f"{path}: training failed ({done['internal']})")
    if "failed" in done:
        sys.stdout.write(f"wrong: {done['failed']}\n")
        return 1
    trained = done["trained"]
    losses = ", ".join(f"{what} loss {trained[key]:.3f}" for what, key in (("training", "loss"),
                                                                           ("validation", "valid_loss"))
                       if trained.get(key) is not None)
    print(f"trained your model for {trained['steps']} steps in {trained['seconds']:g} s ({losses}); run in "
          f"{trained['run']} (`clearformer translate --checkpoint DIR` reads it)")
    print(f"your model translates 'I love you' as {trained['translation']!r}")
    return 0


__all__ = ["CAPSTONE", "CAPSTONE_FILE", "check_capstone", "report_from_dict", "train_capstone"]
