"""Requests that arrive together are decoded together: a bounded queue, a maximum batch, a few ms of wait.

Decoding one short sentence on a CPU spends most of its time in per-step overhead (a dozen small
matrix products per token, whatever the batch), so 64 clients each decoded alone wait in line for 64
decodes, while one batch of 64 costs little more than one (BENCHMARKS.md, "Catalogues and the
LibreTranslate API"). `BatchQueue`:

- `submit(sources)` queues one request's sentences (lists of source ids) and returns a Future of their
  translations; it raises `Busy` at once when sentences are waiting and this request's would bring them over
  `capacity` (the server answers 429), so the queue never grows without bound. A request is admitted whole:
  one with more sentences than `capacity` is taken when nothing waits (a valid page of strings is never
  refused for its size alone: at most one such request waits beyond `capacity`);
- one worker thread takes the waiting requests in arrival order, whole, up to `max_batch` sentences (a
  request larger than that alone), once `max_batch` are there or `wait_s` after the oldest arrived,
  and decodes them with one call of `decode` (which batches by length: generate/translate.py);
- a failure of `decode` fails the Futures of that batch only.

`max_batch=1` decodes each request alone: the peer the benchmark compares against.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from clearformer.languages import Languages
from clearformer.serve.pool import Busy


@dataclass(frozen=True)
class Batching:
    """The LibreTranslate API's settings (`serve --languages --batch --batch-wait --batch-queue`): the languages
    (None: the run's), the most sentences decoded together, how long the first waits for others, and how
    many may wait before a request gets 429."""

    languages: Languages | None = None  # None: the run's
    max_batch: int = 32
    wait_s: float = 0.005
    capacity: int = 4096  # sentences: 204 of Weblate's pages of 20 (a 429 stops Weblate asking for 30 min)


@dataclass
class _Request:
    sources: list  # one item per sentence, as the decode function takes them (ids, with how they were masked)
    future: Future = field(default_factory=Future)
    arrived: float = field(default_factory=time.monotonic)


class BatchQueue:
    """`submit(sources)` -> Future[list[str]]; see the module docstring."""

    def __init__(self, decode: Callable[[list], Sequence[str]], max_batch: int, wait_s: float,
                 capacity: int) -> None:
        if max_batch < 1 or wait_s < 0 or capacity < 1:
            raise ValueError(f"max_batch >= 1, wait_s >= 0, capacity >= 1 (got {max_batch}, {wait_s}, {capacity})")
        self._decode = decode
        self.max_batch, self.wait_s, self.capacity = max_batch, wait_s, capacity
        self._waiting: deque[_Request] = deque()
        self._queued = 0  # sentences waiting (not yet taken by the worker)
        self._condition = threading.Condition()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name="clearformer-batcher", daemon=True)
        self._worker.start()

    def submit(self, sources: list) -> Future:
        request = _Request(sources)
        if not sources:
            request.future.set_result([])
            return request.future
        with self._condition:
            if self._closed:
                raise Busy("the server is shutting down")
            if self._queued and self._queued + len(sources) > self.capacity:
                raise Busy(f"busy: {self._queued} sentences waiting to be translated; retry shortly")
            self._waiting.append(request)
            self._queued += len(sources)
            self._condition.notify()
        return request.future

    def waiting(self) -> int:
        with self._condition:
            return self._queued

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify()

    def _take(self) -> list[_Request] | None:
        """The next batch, waiting for it as the rules say; None once closed."""
        with self._condition:
            while True:
                if self._closed:
                    return None
                if self._waiting:
                    due = self._waiting[0].arrived + self.wait_s
                    now = time.monotonic()
                    if self._queued >= self.max_batch or now >= due:
                        break
                    self._condition.wait(due - now)
                else:
                    self._condition.wait()
            batch, count = [], 0
            while self._waiting and (not batch or count + len(self._waiting[0].sources) <= self.max_batch):
                request = self._waiting.popleft()
                batch.append(request)
                count += len(request.sources)
            self._queued -= count
            return batch

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            sources = [ids for request in batch for ids in request.sources]
            try:
                outputs = list(self._decode(sources))
            except BaseException as error:  # noqa: BLE001 - handed to the waiting requests, the worker goes on
                for request in batch:
                    if request.future.set_running_or_notify_cancel():
                        request.future.set_exception(error)
                continue
            start = 0
            for request in batch:
                if request.future.set_running_or_notify_cancel():  # False: cancelled while waiting
                    request.future.set_result(outputs[start: start + len(request.sources)])
                start += len(request.sources)
