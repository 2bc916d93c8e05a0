"""One torch thread for the claims' tests: their models are small (tests/threads.py)."""

from __future__ import annotations

from threads import one_thread  # noqa: F401  (autouse: the whole folder)
