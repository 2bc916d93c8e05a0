"""`clearformer check`: the seeds' worked examples, the rounding rule, the given forms, bad files.

The peer for the arithmetic is NumPy, written out here step by step (not the project's modules).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from clearformer.cli import main
from clearformer.errors import UserError
from clearformer.explain.checker import check_example, within_half_unit

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEED_002 = EXAMPLES / "seed-002-i-love-you.json"
SEED_001 = EXAMPLES / "seed-001-india-is-great.json"
SEED_002_MASKED = EXAMPLES / "seed-002-masked.json"

# A small example of our own: 3 tokens, d_model 4, d_k 2, d_v 3.
TOKENS = ["a", "b", "c"]
EMB = np.array([[0.2, -0.5, 0.1, 0.8], [0.9, 0.1, -0.7, 0.3], [0.3, 0.8, 0.2, -0.6]])
W_Q = np.array([[0.5, 0.1], [-0.3, 0.8], [0.2, 0.2], [0.7, -0.4]])
W_K = np.array([[0.1, 0.9], [0.6, -0.2], [-0.5, 0.3], [0.4, 0.4]])
W_V = np.array([[0.3, 0.0, -0.2], [0.1, 0.5, 0.4], [0.6, -0.1, 0.2], [0.0, 0.3, 0.9]])


def peer_pe(n: int, d: int) -> np.ndarray:
    pe = np.zeros((n, d))
    for pos in range(n):
        for i in range(0, d, 2):
            pe[pos, i] = np.sin(pos / 10000 ** (i / d))
            pe[pos, i + 1] = np.cos(pos / 10000 ** (i / d))
    return pe


def peer_softmax(s: np.ndarray, causal: bool) -> np.ndarray:
    if causal:
        s = np.where(np.tril(np.ones_like(s)) > 0, s, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def peer_chain(x: np.ndarray, causal: bool = False, rounding: int | None = None) -> dict[str, np.ndarray]:
    """Q..output from X; with `rounding`, each step is rounded before the next is computed from it
    (the way a person works by hand)."""
    r = (lambda m: np.round(m, rounding)) if rounding is not None else (lambda m: m)
    q, k, v = r(x @ W_Q), r(x @ W_K), r(x @ W_V)
    scores = r(q @ k.T)
    scaled = r(scores / np.sqrt(q.shape[1]))
    weights = r(peer_softmax(scaled, causal))
    return {"Q": q, "K": k, "V": v, "scores": scores, "scaled": scaled, "weights": weights,
            "output": r(weights @ v)}


def literal(m: np.ndarray, decimals: int) -> list[list[Decimal]]:
    """A matrix as a person writes it: each number with exactly `decimals` decimals."""
    return [[Decimal(f"{x:.{decimals}f}") for x in row] for row in m]


def example(given: dict, claimed: dict, **top) -> dict:
    return {"tokens": TOKENS, "given": given, "claimed": claimed, **top}


def x_form(claimed: dict, **top) -> dict:
    return example({"X": EMB.tolist(), "W_Q": W_Q.tolist(), "W_K": W_K.tolist(), "W_V": W_V.tolist()},
                   claimed, **top)


def flagged(result) -> set[tuple[str, int, int]]:
    return {(s.step, w.row, w.col) for s in result.steps for w in s.wrong}


def dumps(data) -> str:
    """JSON text with each Decimal written as the number literal it holds (0.50 stays 0.50)."""
    return re.sub(r'"@(-?[0-9.Ee+-]+)@"', r"\1", json.dumps(data, default=lambda d: f"@{d}@"))


def write(tmp_path: Path, data, name: str = "ex.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else dumps(data), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- the seeds


def test_seed_001_passes(capsys):
    assert main(["check", str(SEED_001)]) == 0
    out = capsys.readouterr().out
    for step in ("Q", "K", "V", "scores", "weights", "output"):
        assert f"{step} ... OK" in out
    assert out.strip().splitlines()[-1].startswith("all right")


def test_seed_001_full_precision_printout_needs_the_from_inputs_route():
    """NumPy printed 8 decimals of every step computed at full precision; output[0][2] = 0.83409842
    is 6.2e-9 from the value computed from the printed (rounded) weights, more than half a unit
    (5e-9), yet it is the correctly rounded true value, so it passes."""
    result = check_example(SEED_001)
    assert result.ok
    claimed = json.loads(SEED_001.read_text())["claimed"]
    weights, v = np.array(claimed["weights"]), np.array(claimed["V"])
    from_printed_weights = (weights @ v)[0, 2]
    assert abs(Decimal("0.83409842") - Decimal(float(from_printed_weights))) > Decimal("5e-9")


# Seed 002 as printed: every cell of scores rows 1-2 is wrong (golden seed_errors). Judged from the seed's
# own previous steps, its scaled and weights are consistent with its wrong scores, so they pass; its output
# row 2 dims 2-3 (0.95) is wrong both from its own weights (0.9674) and from the inputs (0.96417). Its
# row-0 score 2.46 is wrong too (true 2.4467; the seed rounded 1.209 to 1.21 inside the sum), which the
# golden file's "row 0 is right" overlooks: 2.46 is 2.7 half-units away from both 2.4463 and 2.446694.
SEED_002_FLAGGED = ({("scores", r, c) for r in (1, 2) for c in range(3)} | {("scores", 0, 2)}
                    | {("output", 2, 2), ("output", 2, 3)})


def test_seed_002_flags_exactly_its_wrong_cells(capsys, golden):
    assert main(["check", str(SEED_002)]) == 1
    out = capsys.readouterr().out
    for step in ("PE", "X", "Q", "K", "V", "scaled", "weights"):
        assert f"{step} ... OK" in out
    assert "scores: 7 wrong cells" in out and "output: 2 wrong cells" in out
    assert ("  row 1 (love), col 0 (I): claimed 3.21, expected 4.1475 (from your previous step), "
            "from the given inputs 4.148262") in out
    result = check_example(SEED_002)
    assert flagged(result) == SEED_002_FLAGGED
    assert {row for _, row, _ in flagged(result)} - {0} <= {1, 2}
    true = golden["seed_002_i_love_you"]
    for step in result.steps:
        for w in step.wrong:
            assert w.from_inputs == pytest.approx(true[step.step][w.row][w.col], abs=1e-6)


def test_seed_002_scaled_passes_on_the_inclusive_boundary():
    """The seed's scaled 2.08 is 4.15 / 2 = 2.075 rounded up: exactly half a unit away, and right."""
    result = check_example(SEED_002)
    assert next(s for s in result.steps if s.step == "scaled").ok
    assert within_half_unit(Decimal("2.08"), 4.15 / 2)


def test_seed_002_masked_flags_rows_2_and_3(capsys, golden):
    assert main(["check", str(SEED_002_MASKED), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    wrong = {(w["row"], w["col"]): w for s in report["steps"] for w in s["wrong"]}
    assert set(wrong) == {(2, 0), (2, 1), (2, 2), (3, 0), (3, 1), (3, 2), (3, 3)}
    true = golden["seed_002_i_love_you"]["masked_example"]["weights"]
    for (row, col), cell in wrong.items():
        assert cell["from_inputs"] == pytest.approx(true[row][col], abs=1e-6)


def test_the_golden_true_values_pass(golden):
    """The golden file's true values (6 decimals, a peer computation) as claims: all right."""
    steps = ("PE", "X", "Q", "K", "V", "scores", "scaled", "weights", "output")
    g2 = golden["seed_002_i_love_you"]
    given = {"embeddings": [g2["embedding_matrix"][i] for i in g2["token_ids"]], "positional": "sinusoidal",
             "W_Q": g2["W_Q"], "W_K": g2["W_K"], "W_V": g2["W_V"]}
    assert check_example({"tokens": ["I", "love", "you"], "given": given,
                          "claimed": {step: g2[step] for step in steps}}).ok
    g1 = golden["seed_001_india_is_great"]
    given = {"X": g1["X"], "W_Q": g1["W_Q"], "W_K": g1["W_K"], "W_V": g1["W_V"]}
    assert check_example({"tokens": g1["tokens"], "given": given,
                          "claimed": {step: g1[step] for step in steps[2:]}}).ok
    masked = g2["masked_example"]
    identity = np.eye(4).tolist()
    assert check_example({"tokens": ["<START>", "Je", "t'", "aime"], "d_k": 1, "mask": "causal",
                          "given": {"Q": masked["scores"], "K": identity, "V": identity},
               "claimed": {"weights": masked["weights"]}}).ok


# ----------------------------------------------------------------------------- the rounding rule


@pytest.mark.parametrize("claimed, value, right", [
    ("0.50", 0.505, True), ("0.50", 0.495, True), ("0.50", 0.5051, False), ("0.50", 0.506, False),
    ("0.5", 0.506, True), ("0.5", 0.55, True), ("0.5", 0.5501, False), ("3", 3.5, True), ("3", 2.5, True),
    ("3", 3.5001, False), ("1.191", 0.5 * (1.741 + 0.640), True), ("-0.416", -0.41615, True),
])
def test_half_a_unit_of_the_last_written_decimal(claimed, value, right):
    assert within_half_unit(Decimal(claimed), value) is right


def test_decimals_come_from_the_text_as_written(tmp_path):
    given = {"Q": [[0.505, 1.0]] * 3, "K": [[1, 0], [0, 1], [1, 1]], "V": [[1, 0], [0, 1], [1, 1]]}
    text = json.dumps(example(given, {"Q": [["@", 1.0]] * 3}))
    for written, code in (("0.50", 0), ("0.5", 0), ("0.51", 0), ("0.49", 1), ("0.500", 1)):
        path = write(tmp_path, text.replace('"@"', written))
        assert main(["check", str(path)]) == code, written


@pytest.mark.parametrize("decimals", [2, 3, 6])
def test_honest_rounding_by_hand_passes(decimals):
    """Each step computed from the previous *rounded* step, then rounded (peer: NumPy)."""
    chain = peer_chain(EMB, rounding=decimals)
    assert check_example(x_form({k: literal(m, decimals) for k, m in chain.items()})).ok


@pytest.mark.parametrize("decimals", [2, 4, 8])
def test_true_values_rounded_pass(decimals):
    chain = peer_chain(EMB)
    assert check_example(x_form({k: literal(m, decimals) for k, m in chain.items()})).ok


def test_a_mistake_in_q_is_not_blamed_on_later_steps(capsys, tmp_path):
    chain = peer_chain(EMB, rounding=3)
    chain["Q"][1, 0] += 0.2  # the mistake
    later = peer_chain(EMB, rounding=3)
    later["scores"] = np.round(chain["Q"] @ chain["K"].T, 3)  # carried on correctly from the wrong Q
    later["scaled"] = np.round(later["scores"] / np.sqrt(2), 3)
    later["weights"] = np.round(peer_softmax(later["scaled"], False), 3)
    later["output"] = np.round(later["weights"] @ later["V"], 3)
    claimed = {"Q": chain["Q"], **{k: later[k] for k in ("K", "V", "scores", "scaled", "weights", "output")}}
    result = check_example(x_form({k: literal(m, 3) for k, m in claimed.items()}))
    assert flagged(result) == {("Q", 1, 0)}
    path = write(tmp_path, x_form({k: literal(m, 3) for k, m in claimed.items()}))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "Q: 1 wrong cell\n  row 1 (b), col 0 (d0): claimed" in out
    assert "scores ... OK" in out and "output ... OK" in out


def test_scores_wrong_from_inputs_and_from_previous_step_are_both_shown():
    chain = peer_chain(EMB, rounding=2)
    chain["scores"][2, 1] += 0.5
    result = check_example(x_form({k: literal(chain[k], 2) for k in ("Q", "K", "scores")}))
    [cell] = next(s for s in result.steps if s.step == "scores").wrong
    assert (cell.row, cell.col) == (2, 1)
    assert cell.expected == pytest.approx((chain["Q"] @ chain["K"].T)[2, 1], abs=1e-12)
    assert cell.from_inputs == pytest.approx(((EMB @ W_Q) @ (EMB @ W_K).T)[2, 1], abs=1e-12)


# ----------------------------------------------------------------------------- mask, forms, d_k


def test_causal_mask(tmp_path):
    chain = peer_chain(EMB, causal=True)
    claimed = {k: literal(chain[k], 4) for k in ("weights", "output")}
    assert all(c == 0 for c in (claimed["weights"][0][1], claimed["weights"][0][2], claimed["weights"][1][2]))
    assert check_example(x_form(claimed, mask="causal")).ok
    # the same numbers are wrong without the mask, in every row but the last
    unmasked = check_example(x_form(claimed))
    assert {r for _, r, _ in flagged(unmasked)} == {0, 1}
    claimed["weights"][0][2] = Decimal("0.1000")  # a masked cell that is not 0
    assert ("weights", 0, 2) in flagged(check_example(x_form(claimed, mask="causal")))


def test_the_three_given_forms_agree():
    x = EMB + peer_pe(3, 4)
    chain = peer_chain(x)
    claims = {k: literal(m, 5) for k, m in chain.items()}
    weights = {"W_Q": W_Q.tolist(), "W_K": W_K.tolist(), "W_V": W_V.tolist()}
    forms = [
        {"embeddings": EMB.tolist(), "positional": "sinusoidal", **weights},
        {"embeddings": x.tolist(), "positional": "none", **weights},
        {"X": x.tolist(), **weights},
    ]
    for given in forms:
        result = check_example(example(given, {**claims, "X": literal(x, 5)}))
        assert result.ok and [s.step for s in result.steps][0] == "X"
    qkv = {"Q": chain["Q"].tolist(), "K": chain["K"].tolist(), "V": chain["V"].tolist()}
    result = check_example(example(qkv, {k: claims[k] for k in ("scores", "scaled", "weights", "output")}))
    assert result.ok and result.d_k == 2


def test_positional_encoding_to_eight_decimals():
    pe = peer_pe(3, 4)
    given = {"embeddings": EMB.tolist(), "W_Q": W_Q.tolist(), "W_K": W_K.tolist(), "W_V": W_V.tolist()}
    assert check_example(example(given, {"PE": literal(pe, 8)})).ok  # float32 PE would fail this
    wrong = literal(pe, 4)
    wrong[1][0] = Decimal("0.8414")  # sin(1) = 0.841471 -> 0.8415
    assert flagged(check_example(example(given, {"PE": wrong}))) == {("PE", 1, 0)}


def test_d_k_overrides_the_width_of_q():
    chain = peer_chain(EMB)
    scaled = chain["scores"] / np.sqrt(4)
    assert check_example(x_form({"scaled": literal(scaled, 6)}, d_k=4)).ok
    assert not check_example(x_form({"scaled": literal(scaled, 6)})).ok  # default d_k = 2


def test_json_schema(capsys):
    assert main(["check", str(SEED_002), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"ok", "steps"} and report["ok"] is False
    assert [s["step"] for s in report["steps"]] == ["PE", "X", "Q", "K", "V", "scores", "scaled", "weights",
                                                    "output"]
    for step in report["steps"]:
        assert set(step) == {"step", "ok", "wrong"} and step["ok"] is (not step["wrong"])
        for w in step["wrong"]:
            assert set(w) == {"row", "col", "claimed", "expected", "from_inputs"}
            assert isinstance(w["row"], int) and isinstance(w["claimed"], float)
    scores = report["steps"][5]["wrong"]
    assert scores[1] == {"row": 1, "col": 0, "claimed": 3.21, "expected": pytest.approx(4.1475),
                         "from_inputs": pytest.approx(4.148262, abs=1e-6)}
    assert main(["check", str(SEED_001), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_python_api_takes_an_object():
    chain = peer_chain(EMB)
    data = x_form({"weights": chain["weights"].round(3).tolist()})  # floats: decimals from repr
    result = check_example(data)
    assert result.ok and result.steps[0].step == "weights" and result.to_dict()["ok"] is True
    numpy_scalars = x_form({"V": [[np.float64(x) for x in row] for row in (EMB @ W_V).round(2)]})
    assert check_example(numpy_scalars).ok
    with pytest.raises(UserError, match="example: claimed is missing"):
        check_example(x_form({}))


# ----------------------------------------------------------------------------- unusable files

GOOD = x_form({"Q": literal(EMB @ W_Q, 3)})


def changed(path: str, value) -> dict:
    """GOOD with the value at a dotted path replaced (value None: removed)."""
    data = json.loads(dumps(GOOD), parse_float=Decimal)
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return data


BAD = [
    ("not-json", '{"tokens": ["a"],\n  "given": }', ":2:12: not JSON"),
    ("top-list", "[1, 2]", "not a JSON object"),
    ("no-given", changed("given", None), "given is missing"),
    ("no-form", changed("given.X", None), "exactly one of embeddings, X or Q"),
    ("two-forms", changed("given.Q", [[1]]), "exactly one of embeddings, X or Q (found both X and Q)"),
    ("no-w-v", changed("given.W_V", None), "given has X but no W_V"),
    ("w-q-rows", changed("given.W_Q", [[1, 2]] * 3), "given.W_Q has 3 rows but X has width 4"),
    ("claimed-shape", changed("claimed.scores", [[1, 2]] * 3), "claimed.scores is 3x2; expected 3x3"),
    ("text-cell", changed("given.X", [[1, 2, "abc", 4]] * 3), "given.X[0][2] is not a number"),
    ("bool-cell", changed("claimed.Q", [[True, 1]] * 3), "claimed.Q[0][0] is not a number"),
    ("null-cell", changed("claimed.Q", [[None, 1]] * 3), "claimed.Q[0][0] is not a number"),
    ("nan-cell", dumps(GOOD).replace("[[0.830", "[[NaN"), "claimed.Q[0][0] is not a number"),
    ("ragged", changed("given.X", [[1, 2, 3, 4], [1, 2], [1, 2, 3, 4]]), "row 1 has 2 numbers"),
    ("unknown-step", changed("claimed.attention", [[1]]), "unknown step 'attention'"),
    ("unknown-mask", changed("mask", "future"), 'mask is "future"'),
    ("tokens", changed("tokens", ["a", "b"]), "given.X has 3 rows but there are 2 tokens"),
    ("d-k", changed("d_k", -2), "d_k is -2"),
    ("pe-from-x", changed("claimed.PE", [[0] * 4] * 3), "claimed.PE cannot be checked"),
    ("empty-claims", changed("claimed", {}), "nothing to check"),
    ("top-key", changed("claims", {}), "unknown key 'claims'"),
]


@pytest.mark.parametrize("name, data, message", BAD, ids=[b[0] for b in BAD])
def test_unusable_file(tmp_path, capsys, name, data, message):
    path = write(tmp_path, data, f"{name}.json")
    assert main(["check", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    [line] = captured.err.strip().splitlines()
    assert str(path) in line and message in line


def test_missing_directory_and_binary_files(tmp_path, capsys):
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{}")
    for target, message in ((tmp_path / "none.json", "no such file"), (tmp_path, "is a directory"),
                            (tmp_path / "bin.json", "not UTF-8")):
        assert main(["check", str(target)]) == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert str(target) in line and message in line


@pytest.mark.slow
def test_console_script():
    script = Path(sys.executable).with_name("clearformer")
    done = subprocess.run([str(script), "check", str(SEED_002), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr == ""
    assert {(s["step"], w["row"], w["col"]) for s in json.loads(done.stdout)["steps"] for w in s["wrong"]} \
        == SEED_002_FLAGGED


# ----------------------------------------------------------------------------- input limits (issue 14)


def _check_cli(capsys, path: Path) -> tuple[int, str]:
    code = main(["check", str(path)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"tokens": ' + "[" * 50_000 + "]" * 50_000 + "}"])
def test_deeply_nested_json_is_unusable_not_a_traceback(tmp_path, capsys, text):
    path = tmp_path / "deep.json"
    path.write_text(text, encoding="utf-8")
    code, err = _check_cli(capsys, path)
    assert code == 2  # 2: unusable input; 1 means "found wrong cells"
    assert err.strip() == f"clearformer check: error: {path}: JSON nested too deeply (a worked example needs " \
                          "lists of lists)"


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path, capsys):
    from clearformer.limits import MAX_CHECK_FILE_BYTES

    path = tmp_path / "big.json"
    with open(path, "wb") as stream:
        stream.truncate(MAX_CHECK_FILE_BYTES + 1)  # sparse: no memory or disk spent on the test
    code, err = _check_cli(capsys, path)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{MAX_CHECK_FILE_BYTES + 1:,} bytes; a worked example is at most {MAX_CHECK_FILE_BYTES:,}" in err
