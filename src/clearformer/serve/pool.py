"""Answers computed in a bounded thread pool: identical requests share one computation, full means 503.

An explanation is CPU work (the model runs in torch, which releases the GIL), deterministic for a
given model, request kind and input, so the server

- runs distinct requests in parallel, `workers` at a time, in a thread pool (no global lock);
- lets at most `queue` more distinct requests wait for a worker; one more is refused at once with
  `Busy` (the app answers 503 with Retry-After) instead of growing a queue without bound;
- joins a request to the computation already running for the same key (coalescing: 50 readers of one
  sentence cost one explanation), and keeps the most recent finished answers up to `cache_bytes` bytes in all (an LRU).

The bookkeeping is guarded by one lock that is never held while computing; the futures are
`concurrent.futures` ones, so it works across event loops (uvicorn's, or TestClient's).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial


class Busy(Exception):
    """Every worker is busy and the queue is full: the client should retry later."""


def answer_bytes(answer) -> int:
    """The bytes an answer holds: a bytes object, or a tuple of them (plain and compressed)."""
    return sum(len(part) for part in answer) if isinstance(answer, tuple) else len(answer)


class AnswerPool:
    """`submit(key)` -> a Future of `compute(key)`, shared with every identical request in flight."""

    def __init__(self, compute: Callable[[Hashable], bytes], workers: int, queue: int, cache_bytes: int) -> None:
        if workers < 1 or queue < 0 or cache_bytes < 0:
            raise ValueError(f"workers >= 1, queue >= 0, cache_bytes >= 0 (got {workers}, {queue}, {cache_bytes})")
        self._compute = compute
        self._capacity = workers + queue  # distinct computations running or waiting
        self._cache_bytes = cache_bytes  # the answers kept, counted in bytes: one answer can be megabytes
        self._cached_bytes = 0
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="clearformer-explain")
        self._lock = threading.RLock()  # reentrant: a done callback may run inside submit()
        self._in_flight: dict[Hashable, Future] = {}
        self._done: OrderedDict[Hashable, bytes] = OrderedDict()

    def submit(self, key: Hashable) -> Future:
        """The shared Future of `key`'s answer; raises Busy when `key` is new and the pool is full."""
        with self._lock:
            if key in self._done:
                self._done.move_to_end(key)
                finished: Future = Future()
                finished.set_result(self._done[key])
                return finished
            future = self._in_flight.get(key)
            if future is None:
                if len(self._in_flight) >= self._capacity:
                    raise Busy(f"busy: {len(self._in_flight)} explanations running or waiting; retry shortly")
                future = self._executor.submit(self._compute, key)
                self._in_flight[key] = future
                future.add_done_callback(partial(self._finished, key))
            return future

    def in_flight(self) -> int:
        with self._lock:
            return len(self._in_flight)

    def _finished(self, key: Hashable, future: Future) -> None:
        with self._lock:
            self._in_flight.pop(key, None)
            if future.cancelled() or future.exception() is not None or key in self._done:
                return
            answer = future.result()
            size = answer_bytes(answer)
            if size > self._cache_bytes:
                return  # larger than the whole cache: answered, not kept
            self._done[key] = answer
            self._cached_bytes += size
            while self._cached_bytes > self._cache_bytes:
                _, evicted = self._done.popitem(last=False)
                self._cached_bytes -= answer_bytes(evicted)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
