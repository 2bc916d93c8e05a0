"""`clearformer check` files: any JSON, any bytes -> a CheckResult or a one-line UserError."""

from __future__ import annotations

import json

from fuzz_helpers import one_line
from hypothesis import given
from hypothesis import strategies as st

from clearformer.errors import UserError
from clearformer.explain.checker import CheckResult, check_example

numbers = st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=False, allow_infinity=False),
                    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-0.0", "0.50"]))
json_values = st.recursive(st.none() | st.booleans() | numbers | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                       max_size=4),
                           max_leaves=30)
matrix = st.integers(1, 3).flatmap(lambda cols: st.lists(st.lists(numbers, min_size=cols, max_size=cols),
                                                         min_size=1, max_size=3))
examples = st.fixed_dictionaries(
    {"tokens": st.lists(st.text(max_size=4), min_size=1, max_size=3),
     "given": st.fixed_dictionaries({"X": matrix, "W_Q": matrix, "W_K": matrix, "W_V": matrix}),
     "claimed": st.dictionaries(st.sampled_from(["Q", "K", "V", "scores", "scaled", "weights", "output", "PE"]),
                                matrix, max_size=3)},
    optional={"d_k": numbers, "mask": st.sampled_from(["none", "causal", "Causal", 3])})


def check_file(tmp_path, data: bytes):
    path = tmp_path / "example.json"
    path.write_bytes(data)
    try:
        result = check_example(path)
    except UserError as error:
        assert one_line(str(error)) and error.exit_code == 2
        return None
    assert isinstance(result, CheckResult) and result.ok == all(step.ok for step in result.steps)
    return result


def dump(value) -> bytes:
    text = json.dumps(value, allow_nan=True)
    for name in ("NaN", "Infinity", "-Infinity", "1e999", "-0.0", "0.50"):  # as bare JSON numbers
        text = text.replace(f'"{name}"', name)
    return text.encode()


@given(data=st.binary(max_size=300))
def test_any_bytes(tmp_path, data):
    check_file(tmp_path, data)


@given(value=json_values)
def test_any_json(tmp_path, value):
    check_file(tmp_path, dump(value))


@given(depth=st.integers(1, 200_000), opener=st.sampled_from(["[", '{"a":']))
def test_any_nesting_depth(tmp_path, depth, opener):
    closer = "]" if opener == "[" else "}"
    check_file(tmp_path, (opener * depth + "0" + closer * depth).encode())


@given(value=examples)
def test_example_shaped_json(tmp_path, value):
    check_file(tmp_path, dump(value))
