"""Slow clients are let go: a request's headers and its body each have a deadline.

uvicorn closes a keep-alive connection idle between requests (`timeout_keep_alive`), but a connection that
sends half a request line and then nothing holds its socket for good: 1,100 such clients held for 60 s ran the
server out of file descriptors (issue 49). So:

- `DeadlineProtocol` (uvicorn's own HTTP protocol, as `http="auto"` picks it, with one timer): the headers of
  a request must arrive within `REQUEST_HEADER_SECONDS` of the connection, or of its first byte after an
  answer; otherwise the connection is closed. A request whose headers arrived is the app's from then on;
- `read_body` (serve/requests.py) reads the body within `REQUEST_BODY_SECONDS` and answers 408 otherwise.

    server = uvicorn.Server(server_config(app, host, port))
"""

from __future__ import annotations

import asyncio

from uvicorn import Config
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from clearformer.limits import REQUEST_HEADER_SECONDS

KEEP_ALIVE_SECONDS = 5  # uvicorn's default, said here: an idle connection between requests is closed after it


def deadline_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol whose connections are closed when a request's headers take over `seconds`."""

    class DeadlineProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        header_deadline: asyncio.TimerHandle | None = None

        def _waiting_for_headers(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self.header_deadline is None and self._waiting_for_headers():
                self.header_deadline = self.loop.call_later(seconds, self._expire)

        def _expire(self) -> None:
            self.header_deadline = None
            if self._waiting_for_headers() and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            self._arm()  # the first byte of a request after an answer starts its clock
            super().data_received(data)
            if not self._waiting_for_headers() and self.header_deadline is not None:
                self.header_deadline.cancel()  # the headers are in: the app has the request now
                self.header_deadline = None

        def connection_lost(self, exc) -> None:
            if self.header_deadline is not None:
                self.header_deadline.cancel()
                self.header_deadline = None
            super().connection_lost(exc)

    return DeadlineProtocol


def server_config(app, host: str, port: int, header_seconds: float = REQUEST_HEADER_SECONDS) -> Config:
    """uvicorn's configuration for `clearformer serve`: quiet, and slow clients let go (see the module docstring)."""
    return Config(app, host=host, port=port, log_level="warning", access_log=False,
                  http=deadline_protocol(header_seconds), timeout_keep_alive=KEEP_ALIVE_SECONDS)
