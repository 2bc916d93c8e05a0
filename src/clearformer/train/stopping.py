"""SIGTERM and Ctrl-C during training: the step in progress finishes, a checkpoint is written, then the run
stops with one line saying how to continue (docs/reliability.md, "Exit codes").

Job schedulers, `docker stop` and `kill` send SIGTERM first (and SIGKILL some seconds later): a run that
dies where it stands loses everything since its last checkpoint. While the loop runs, both signals only
set a flag, which the loop reads between steps (train/loop.py `Trainer.should_stop`); under torchrun a
signal any process receives stops every process at the same step (train/distributed.py `stop_flags`).
A second Ctrl-C interrupts at once (exit 130, the checkpoint not written), as an impatient user expects.
"""

from __future__ import annotations

import signal
import threading

SIGNAL_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "Ctrl-C"}


class StopSignals:
    """`with StopSignals() as stop:` ... `stop.signal` is the first SIGTERM/SIGINT received (None before)."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[int, object] = {}

    def _received(self, signum, frame) -> None:
        if self.signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: at once
        if self.signal is None:
            self.signal = signum

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNAL_NAMES:
                self._previous[signum] = signal.signal(signum, self._received)
        return self

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    @property
    def name(self) -> str:
        return SIGNAL_NAMES.get(self.signal, f"signal {self.signal}")

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signal or 0)


def resume_advice(command: str, run_dir, step: int, checkpoint) -> str:
    """The line a stopped run ends with."""
    if checkpoint is None:
        return (f"stopped before its first step; nothing to resume: start it again with "
                f"`clearformer {command} --out {run_dir}`")
    return (f"stopped at step {step}; checkpoint {checkpoint}; continue with "
            f"`clearformer {command} --out {run_dir} --resume`")
