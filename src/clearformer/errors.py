"""The one error type a user can cause; the CLI prints it as one line and exits non-zero."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (a file, a sentence, a checkpoint, an option).

    The message names the problem, and the file and line where there is one; `exit_code` is what
    the command returns (2 = unusable input, by convention; 1 = ran but found something wrong).
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Stopped(Exception):
    """A command stopped cleanly on a signal (SIGTERM, Ctrl-C) after saving its work: the CLI prints the
    message (how to continue) as one line and exits with `exit_code` (128 + the signal: 143, 130)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
