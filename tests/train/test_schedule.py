"""The paper's learning-rate schedule, lr = d^-0.5 * min(step^-0.5, step * warmup^-1.5), at known points."""

import math

import pytest

from clearformer.train.schedule import noam_lr, peak_lr


def test_first_step_is_linear_warmup():
    assert noam_lr(1, 512, 4000) == pytest.approx(512**-0.5 * 4000**-1.5)


def test_values_by_hand():
    # During warmup: d^-0.5 * step * warmup^-1.5.
    assert noam_lr(1000, 512, 4000) == pytest.approx(0.044194173824159216 * 1000 / 252982.21281347034)
    # After warmup: d^-0.5 * step^-0.5.
    assert noam_lr(16000, 512, 4000) == pytest.approx(512**-0.5 / 126.49110640673517)
    assert noam_lr(10, 64, 100, factor=2.0) == pytest.approx(2 * 0.125 * 10 / 1000)


def test_peak_at_warmup_and_shape():
    d, warmup = 256, 400
    rates = [noam_lr(step, d, warmup) for step in range(1, 2000)]
    assert max(rates) == pytest.approx(peak_lr(d, warmup)) == pytest.approx((d * warmup) ** -0.5)
    assert rates.index(max(rates)) == warmup - 1
    assert all(a < b for a, b in zip(rates[: warmup - 1], rates[1:warmup], strict=True))
    assert all(a > b for a, b in zip(rates[warmup - 1:-1], rates[warmup:], strict=True))
    # Inverse square root decay: quadrupling the step halves the rate.
    assert noam_lr(4 * 1600, d, warmup) == pytest.approx(noam_lr(1600, d, warmup) / 2)
    assert math.isclose(noam_lr(warmup, d, warmup), warmup**-0.5 * d**-0.5)


def test_bad_arguments():
    with pytest.raises(ValueError):
        noam_lr(0, 512, 4000)
    with pytest.raises(ValueError):
        noam_lr(1, 512, 0)
