"""The learning-rate schedule of the paper (section 5.3):

    lr(step) = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

It rises linearly for the first `warmup` steps, peaks at step = warmup with
factor * (d_model * warmup)^-0.5, then decays with the inverse square root of the step.
Steps count optimizer updates from 1.
"""

from __future__ import annotations


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The learning rate for optimizer update number `step` (1, 2, ...)."""
    if step < 1:
        raise ValueError("the schedule counts steps from 1")
    if warmup < 1:
        raise ValueError("warmup must be at least 1 step")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def peak_lr(d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The highest learning rate of the schedule, reached at step = warmup."""
    return noam_lr(warmup, d_model, warmup, factor)
