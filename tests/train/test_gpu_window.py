"""benchmarks/gpu_window.sh: the GPU window's exact path, `--device cpu --tiny`, run on the CPU (the profiler,
the training rows, the compiled stage and the decoding stage), so a GPU lease is never spent on a crash:
every stage ends without FAILED and leaves its files, within what the device tool brings back (at most
8 files), and `merge` puts its sections into a BENCHMARKS.md."""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def window(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("window")
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable,
           # a loaded 2-core CI machine is far slower than the GPU the real limits are set for
           "GPU_WINDOW_LIMITS": "checks=600 profile=600 train=600 decode=600 compiled=600"}
    result = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_window.sh"), "--device", "cpu", "--tiny"],
                            env=env, capture_output=True, text=True, timeout=2400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


@pytest.mark.timeout(2400)
def test_every_stage_runs_and_leaves_its_files(window):
    names = sorted(p.name for p in window.iterdir())
    assert names == ["profile.txt", "results.jsonl", "sections.md", "summary.txt", "trace.json.gz", "window.log"]
    summary = (window / "summary.txt").read_text()
    assert "FAILED" not in summary, summary
    for stage in ("checks", "profile", "train", "decode", "compiled"):
        assert f"[{stage}] stage done" in summary, summary
    results = [json.loads(line) for line in (window / "results.jsonl").read_text().splitlines()]
    rows = {(r["model"], r["mode"]) for r in results if "model" in r}
    # MFU is below 1 on a GPU; on a 2-core CI machine the peak is measured while the other test worker may be
    # busy and the rows run while it may be idle, so only a positive, finite figure is asserted there.
    assert len(rows) == 4 and all(r["tokens_per_s"] > 0 and 0 < r["mfu"] < math.inf for r in results if "mfu" in r)
    assert sum("compile_s" in r for r in results) == 2  # one compile per fixed shape of --tiny
    assert {r["equal_batches"] for r in results if "equal_batches" in r} == {"1/1"}  # the static cache's tokens
    profile = (window / "profile.txt").read_text()
    assert "Top kernels" in profile and "aten::" in profile
    assert json.loads(gzip.decompress((window / "trace.json.gz").read_bytes()))["traceEvents"]


@pytest.mark.timeout(2400)
def test_merge_puts_the_sections_into_benchmarks_md(window, tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT))
    from benchmarks import gpu_window, report

    target = tmp_path / "BENCHMARKS.md"
    target.write_text(report.HEADER)
    monkeypatch.setattr(report, "BENCHMARKS", target)
    gpu_window.merge(window / "sections.md")
    text = target.read_text()
    for name in ("gpu_window_train_cpu", "gpu_window_decode_cpu", "gpu_window_train_compiled_cpu"):
        assert text.count(f"<!-- begin {name} -->") == 1
    assert "- Machine:" in text and "| clearformer, fixed shapes + fused loss | compiled |" in text
