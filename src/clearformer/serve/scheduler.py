"""Runs explanations off the event loop: a bounded worker pool, a bounded queue, identical requests coalesced.

An explanation is CPU work (about half a second for the toy model), so the server
- runs at most `workers` explanations at once, each in a worker thread (the event loop keeps answering);
- lets at most `queue` more wait for a worker, and answers 503 (`Busy`) beyond that, instead of letting
  a burst pile up without bound;
- computes a request identical to one in flight only once: every caller awaits the same result (an
  explanation is deterministic for a model, an input and its options, so they would all get the same
  bytes). The last `cache_size` results are kept and answered at once, without a worker.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class Busy(Exception):
    """Every worker is busy and the queue is full: the caller should answer 503 and retry later."""


class ExplainScheduler:
    """`await scheduler.run(key, compute)`: compute() in a worker thread, once per distinct in-flight key."""

    def __init__(self, workers: int | None = None, queue: int = 16, max_waiting: int = 256,
                 cache_size: int = 32) -> None:
        self.workers = workers or max(1, os.cpu_count() or 1)
        self.queue = queue
        self.max_waiting = max_waiting  # callers awaiting a coalesced result: each is only a coroutine
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="clearformer-explain")
        self._in_flight: dict[str, asyncio.Future] = {}
        self._waiting = 0
        self.cache_size = cache_size
        self._done: OrderedDict[str, Any] = OrderedDict()  # only touched on the event loop's thread

    async def run(self, key: str, compute: Callable[[], Any]) -> Any:
        if key in self._done:
            self._done.move_to_end(key)
            return self._done[key]
        future = self._in_flight.get(key)
        if future is None:
            if len(self._in_flight) >= self.workers + self.queue:
                raise Busy(f"busy: {len(self._in_flight)} explanations running or queued; retry shortly")
            future = asyncio.get_running_loop().run_in_executor(self._executor, compute)
            self._in_flight[key] = future
            future.add_done_callback(lambda done: self._finished(key, done))
        elif self._waiting >= self.max_waiting:
            raise Busy(f"busy: {self._waiting} requests waiting; retry shortly")
        self._waiting += 1
        try:
            # shield: one caller disconnecting must not cancel the computation the others await
            return await asyncio.shield(future)
        finally:
            self._waiting -= 1

    def _finished(self, key: str, done: asyncio.Future) -> None:
        self._in_flight.pop(key, None)
        if not done.cancelled() and done.exception() is None:
            self._done[key] = done.result()
            while len(self._done) > self.cache_size:
                self._done.popitem(last=False)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
