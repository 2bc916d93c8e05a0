"""What a `learn check` child sends back (issue 41): any events, any values -> a report or a one-line UserError, and
never a pass the results do not earn. The checker reads these as untrusted (learn/verdict.py, learn/wire.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from fuzz_helpers import one_line
from hypothesis import given
from hypothesis import strategies as st

from clearformer.errors import UserError
from clearformer.learn.check import judge_run
from clearformer.learn.exercises import exercise
from clearformer.learn.sandbox import ChildRun
from clearformer.learn.wire import Malformed, decode, encode

KEYS = ["event", "index", "value", "raised", "tensor", "dtype", "shape", "data", "unsent", "int", "float", "bool",
        "list", "tuple", "length", "other", "kind", "classes", "text", "where", "function", "line", "stage",
        "unusable", "internal"]
leaves = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=6)
          | st.sampled_from(["float64", "bool", "int64", "AAAA", "AA==", "result", "done", "cases", "Exception"]))
json_values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=4),
                           max_leaves=25)
ITEM = exercise("causal-mask")
CASES = ITEM.cases()
START = [{"event": "ready"}, {"event": "stage", "stage": "cases"}]


def judged(events: list) -> None:
    try:
        report = judge_run(ChildRun(events, returncode=0), ITEM, Path("mine.py"), CASES, 60.0)
    except UserError as error:
        assert one_line(str(error))
        return
    if report.ok:  # a pass only where every case's value is the expected one
        for index, case in enumerate(CASES):
            got = decode(next(e for e in events if e.get("event") == "result" and e.get("index") == index)["value"])
            assert isinstance(got, torch.Tensor) and torch.equal(got, case.expected)
    elif report.stopped is not None:
        assert one_line(report.stopped)


@given(values=st.lists(json_values, min_size=len(CASES), max_size=len(CASES)))
def test_any_result_values(values):
    judged([*START, *({"event": "result", "index": i, "value": v} for i, v in enumerate(values)), {"event": "done"}])


@given(records=st.lists(json_values, min_size=len(CASES), max_size=len(CASES)))
def test_any_exception_records(records):
    judged([*START, *({"event": "result", "index": i, "raised": r} for i, r in enumerate(records)),
            {"event": "done"}])


@given(events=st.lists(st.dictionaries(st.sampled_from(KEYS), json_values, max_size=4)
                       .map(lambda e: {"event": "result", **e}), max_size=8))
def test_any_events(events):
    judged([*START, *events, {"event": "done"}])


@given(value=json_values)
def test_decode_gives_a_value_or_malformed(value):
    try:
        decode(value)
    except Malformed as error:
        assert one_line(str(error))


@pytest.mark.parametrize("value", [torch.tensor([[True, False]]), torch.zeros(2, 3, dtype=torch.bfloat16),
                                   torch.tensor([1 + 2j]), torch.empty(0, 4), torch.arange(6).reshape(2, 3).T,
                                   torch.tensor(float("nan")), [1, (2, 3.5), None], torch.zeros(3).to_sparse()])
def test_what_is_encoded_decodes_to_itself(value):
    got = decode(encode(value))
    if isinstance(value, torch.Tensor) and value.layout == torch.strided:
        assert got.dtype == value.dtype and torch.equal(got, value) or bool(torch.isnan(value).all())
    elif isinstance(value, torch.Tensor):
        assert got.shape == tuple(value.shape) and "not a dense tensor" in got.why
    else:
        assert got[:2] == [1, (2, 3.5)] and got[2].name == "NoneType"
