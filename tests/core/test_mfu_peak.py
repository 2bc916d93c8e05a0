"""The stored matmul peak only ever rises: a measurement taken on a busy machine cannot lower it."""

from __future__ import annotations

import json

from clearformer.train import mfu


def test_peak_keeps_the_best_measurement(tmp_path, monkeypatch):
    monkeypatch.setenv("CLEARFORMER_CACHE", str(tmp_path / "clearformer"))
    rates = iter([50e9, 150e9, 90e9])
    monkeypatch.setattr(mfu, "measure_matmul_peak", lambda **kwargs: next(rates))
    assert mfu.matmul_peak() == 50e9
    assert mfu.matmul_peak() == 150e9
    assert mfu.matmul_peak() == 150e9  # the busy 90 GFLOP/s reading does not replace it
    stored = json.loads((tmp_path / "clearformer" / "matmul_peak.json").read_text())
    assert list(stored.values()) == [150e9]
    assert mfu.matmul_peak(refresh=False) == 150e9  # no new measurement: the iterator is spent


def test_measured_peak_is_a_positive_rate():
    rate = mfu.measure_matmul_peak(size=256, repeats=2)
    assert 1e6 < rate < 1e15


def test_measuring_leaves_the_global_random_state_alone():
    """A run that measures the peak (the first of a process) and one that reads the stored value must
    draw the same dropout masks, or a resumed run would not continue a straight one bit for bit."""
    import torch

    torch.manual_seed(7)
    before = torch.get_rng_state()
    mfu.measure_matmul_peak(size=64, repeats=1)
    assert torch.equal(torch.get_rng_state(), before)
