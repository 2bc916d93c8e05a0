"""`python tests/slowed_cli.py SECONDS COMMAND ...`: clearformer's command line with SECONDS of sleep after every
training step, for the tests that strike a run while it trains (kill -9, SIGTERM, a second writer, a held lock).

The product's training loop has no delay of its own: this child process wraps the trainer's step from outside
(`slowed_command` builds its command line)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve()


def slowed_command(seconds: float, *args: str) -> list[str]:
    """The argv of `clearformer ARGS...` slowed down by `seconds` after every training step."""
    return [sys.executable, str(SCRIPT), str(seconds), *map(str, args)]


def slow_down(seconds: float) -> None:
    from clearformer.train.loop import Trainer

    step = Trainer.train_step

    def slowed_step(self):
        result = step(self)
        time.sleep(seconds)
        return result

    Trainer.train_step = slowed_step


if __name__ == "__main__":
    slow_down(float(sys.argv[1]))
    from clearformer.cli import main

    sys.argv[1:] = sys.argv[2:]  # the command line clearformer sees (a run folder's lock names its holder by it)
    sys.exit(main())
