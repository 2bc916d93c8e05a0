"""Slow clients are let go (serve/deadline.py, serve/requests.py): a connection that never finishes its headers is
closed, a body that stops coming is answered 408, and the server goes on answering everyone else. A real uvicorn
server on loopback, deadlines of a second, so the test takes seconds."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import uvicorn

from clearformer.serve import requests as server_requests
from clearformer.serve.app import create_app
from clearformer.serve.deadline import server_config

HELD = 200  # connections holding half a request line (issue 49: 1,100 of them ran out of file descriptors)


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(server_requests, "REQUEST_BODY_SECONDS", 1.0)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = uvicorn.Server(server_config(create_app(None), "127.0.0.1", port, header_seconds=1.0))
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not running.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield port
    running.should_exit = True
    thread.join(30)


def closed_by_server(connection: socket.socket, within: float) -> bool:
    connection.settimeout(within)
    try:
        return connection.recv(1024) == b""
    except (TimeoutError, ConnectionResetError):
        return False


def languages_status(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /languages HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        return connection.recv(64).split(b"\r\n")[0]


def test_connections_that_never_finish_their_headers_are_closed(server):
    held = [socket.create_connection(("127.0.0.1", server), timeout=10) for _ in range(HELD)]
    try:
        for connection in held:
            connection.sendall(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        assert languages_status(server) == b"HTTP/1.1 200 OK"  # answered while they hang
        assert all(closed_by_server(connection, within=10) for connection in held)
    finally:
        for connection in held:
            connection.close()
    assert languages_status(server) == b"HTTP/1.1 200 OK"


def test_a_body_that_stops_coming_is_408_and_an_idle_connection_is_closed(server):
    with socket.create_connection(("127.0.0.1", server), timeout=10) as connection:
        connection.sendall(b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           b"Content-Length: 100\r\n\r\n{\"q\": \"Save")
        answer = b""
        while not answer.endswith(b"}"):
            answer += connection.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 1 s" in answer
    with socket.create_connection(("127.0.0.1", server), timeout=10) as idle:  # connected, silent
        assert closed_by_server(idle, within=10)
