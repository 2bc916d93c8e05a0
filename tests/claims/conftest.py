"""One torch thread for the claims' tests: their models are small, and on a shared machine two threads
wait for each other at every small product (the quick CLI runs single-threaded for the same reason)."""

from __future__ import annotations

import pytest

from clearformer.claims.common import thread_count


@pytest.fixture(autouse=True)
def _one_thread():
    with thread_count(1):
        yield
