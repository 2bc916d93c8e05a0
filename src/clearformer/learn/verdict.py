"""The checker's reading of a child's run (learn/sandbox.py): its events as untrusted data, a result per case.

The child runs the learner's code; every line it sends could have been written by that code (which can find the
run's token in its own memory), so nothing here takes the child's word for a verdict. `results_of` checks each
event's kind and fields and returns the raw results by case index, for learn/check.py and learn/capstone_judge.py
to decode (learn/wire.py) and judge against expected values computed in this process; or the one line that says
why no case can be judged (the learner's code ran too long, ended the process, or wrote into the pipe: stopped), or
a UserError (exit 2) for a file that cannot be used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from clearformer.errors import UserError
from clearformer.learn.sandbox import ChildRun
from clearformer.learn.wire import MAX_TEXT, Malformed, text, whole

KINDS = ("ready", "stage", "case", "result", "done")


@dataclass
class Results:
    """What a child's run gave: its result events by case index, or why it gave none (`stopped`, one line)."""

    by_case: dict[int, dict]
    stopped: str | None = None


def results_of(run: ChildRun, path: Path, timeout: float, names: list[str], function: str) -> Results:
    """The child's results by case index (`names`: the parent's own case names, in order), once it ended with its
    `done`; Results.stopped when it did not, or when what it sent cannot be believed; UserError for an unusable
    file. `function`: what the learner's code was running, in words ("causal_mask()", "your Transformer")."""
    if run.oversized:
        return Results({}, f"{path}: the checker's child sent more than {run_limit(run)} (written into its pipe "
                           "by the code, or results far larger than clearformer's): not believed")
    if run.damaged:
        return Results({}, f"{path}: the checker's report holds lines it did not write (the code wrote into its "
                           "pipe): not believed")
    try:
        by_case, last_case, stage, done = read_events(run.events, len(names))
    except Malformed as error:
        return Results({}, f"{path}: the checker's report holds {error}: not believed")
    if done is not None:
        unusable(done, path)
        return Results(by_case)
    if run.startup_timed_out:
        raise UserError(f"{path}: the checker did not start within its time (a loaded machine?); try again")
    if stage != "cases" or last_case is None:
        if run.timed_out:
            raise UserError(f"{path}: importing it still running after {timeout:g} s (top-level code that never "
                            "ends?); `--timeout SECONDS` sets the limit")
        raise UserError(f"{path}: importing it ended the checker's process ({run.ended()})")
    name = names[last_case]
    if run.timed_out:
        return Results(by_case, f"{path}: {function} still running after {timeout:g} s on case {name!r} (an endless "
                                "loop?): stopped; `--timeout SECONDS` sets the limit")
    return Results(by_case, f"{path}: {function} ended the checker's process on case {name!r} ({run.ended()}): a "
                            "function must return its result")


def read_events(events: list[dict], cases: int) -> tuple[dict[int, dict], int | None, str | None, dict | None]:
    """(results by case index, the last case begun, the last stage, the done event), every event checked;
    Malformed for one the child does not send (an unknown kind, a case that does not exist, a second result for
    a case, anything after `done`)."""
    by_case, last_case, stage, done = {}, None, None, None
    for event in events:
        kind = event.get("event")
        if kind not in KINDS:
            raise Malformed(f"an event of no known kind ({str(kind)[:40]!r})")
        if done is not None:
            raise Malformed(f"a {kind!r} after the child's 'done'")
        if kind == "stage":
            stage = event.get("stage")
            if stage not in ("import", "cases"):
                raise Malformed("a stage of no known name")
        elif kind in ("case", "result"):
            index = event.get("index")
            if not whole(index) or index >= cases:
                raise Malformed(f"a {kind} for a case that does not exist ({str(index)[:40]})")
            if kind == "case":
                last_case = index
            elif index in by_case:
                raise Malformed(f"two results for case {index}")
            else:
                by_case[index] = event
        elif kind == "done":
            if set(event) - {"event"} not in (set(), {"unusable"}, {"internal"}):
                raise Malformed("a 'done' the checker's child does not send")
            done = event
    return by_case, last_case, stage, done


def unusable(done: dict, path: Path) -> None:
    """The child's `done` said the file cannot be used, or that the checker itself failed: a UserError (one line,
    the child's words checked as text)."""
    fields = set(done) - {"event"}
    try:
        if fields == {"unusable"}:
            raise UserError(text(done["unusable"], MAX_TEXT, "a reason"))
        if fields == {"internal"}:
            raise UserError(f"{path}: the checker itself failed ({text(done['internal'], MAX_TEXT, 'a reason')}); "
                            "please report it")
    except Malformed as error:
        raise UserError(f"{path}: the checker's report holds {error}: not believed") from None


def missing(results: Results, path: Path, names: list[str], count: int | None = None) -> str | None:
    """The stopped line when a finished run lacks the result of one of its first `count` cases (all by default):
    a child of this checker sends one for every case it reaches."""
    for index in range(len(names) if count is None else count):
        if index not in results.by_case:
            return (f"{path}: the checker's child ended without the result of case {names[index]!r} (its events "
                    "were written by the code): not believed")
    return None


def run_limit(run: ChildRun) -> str:
    size = run.limit
    return f"{size / 1024**2:g} MiB" if size >= 1024**2 else f"{size} bytes"
