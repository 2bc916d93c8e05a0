"""Torch's thread count in tests: `one_thread`, the fixture of the folders whose models are tiny, and
`kept_thread_count`, for a fixture or a test that runs a command which sets the process-wide count itself.

One thread for tiny models: two threads wait for each other at every small product, seconds on a shared
machine (the quick CLI runs single-threaded for the same reason). A folder's conftest imports the fixture
(`from threads import one_thread`): pytest takes a fixture from a conftest's namespace, and an autouse one
then covers the whole folder. This module is not named conftest: pytest imports every folder's conftest as
`conftest`, so a shared helper needs a name of its own (see .ci/run).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager

import pytest

from clearformer.claims.common import thread_count  # the block with N torch threads, the count given back after


def kept_thread_count() -> AbstractContextManager[None]:
    """The block may set torch's thread count (a command's --threads): the caller gets its own back after."""
    return thread_count(None)


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Every test of the folder whose conftest imports this runs with one torch thread."""
    with thread_count(1):
        yield
