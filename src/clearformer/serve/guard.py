"""Who may talk to the local server: the Host header (against DNS rebinding) and the Origin of writes.

A page on another site can make the browser send requests to 127.0.0.1 in two ways, and both are
refused here, before any route runs:

- DNS rebinding: the other site's name is re-pointed at 127.0.0.1, so its page's requests arrive
  with `Host: evil.example` and read the answers as same-origin. Only localhost names
  (localhost, 127.0.0.1, ::1), the address the server is bound to and, when it is bound to every
  interface (0.0.0.0, ::), IP literals are accepted as Host: a rebinding attack needs a name.
- Cross-origin POSTs ("simple" requests such as text/plain need no CORS preflight): a request
  whose `Origin` is not this server's own scheme://host:port is refused. Requests without Origin
  (curl, scripts) are not from a page, and are let through.
"""

from __future__ import annotations

import ipaddress
import json
from urllib.parse import urlsplit

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def split_host(host: str) -> tuple[str, int | None] | None:
    """'127.0.0.1:8000' -> ('127.0.0.1', 8000), '[::1]' -> ('::1', None); None when malformed."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return None
        name, rest = host[1:end], host[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    elif host.count(":") == 1:
        name, port_text = host.split(":")
    elif ":" in host:  # a bare IPv6 address
        name, port_text = host, None
    else:
        name, port_text = host, None
    if port_text is not None and not (port_text.isdigit() and len(port_text) <= 5):
        return None
    return name.removesuffix("."), int(port_text) if port_text is not None else None


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostOriginGuard:
    """ASGI middleware: 400 for a Host that is not allowed, 403 for a write from another origin."""

    def __init__(self, app, bound_host: str = "127.0.0.1") -> None:
        self.app = app
        bound = bound_host.strip("[]").lower()
        self.names = LOCAL_NAMES | ({bound} if bound not in WILDCARDS else set())
        self.any_ip = bound in WILDCARDS

    def host_allowed(self, host: str) -> bool:
        parts = split_host(host)
        return parts is not None and (parts[0] in self.names or (self.any_ip and is_ip_literal(parts[0])))

    @staticmethod
    def same_origin(origin: str, host: str) -> bool:
        """Whether `origin` (http://name:port) is the server named by `host` (name:port)."""
        try:
            parts = urlsplit(origin)
            origin_port = parts.port or 80
        except ValueError:
            return False
        target = split_host(host)
        if parts.scheme != "http" or not parts.hostname or target is None:
            return False
        return (parts.hostname.removesuffix("."), origin_port) == (target[0], target[1] or 80)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {}
        for key, value in scope.get("headers", []):
            headers.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
        host = headers.get("host", "")
        if not self.host_allowed(host):
            await _refuse(send, 400, "Host header not allowed: use http://localhost or the address the server "
                                     "listens on")
            return
        origin = headers.get("origin")
        if scope["method"] not in SAFE_METHODS and origin is not None and not self.same_origin(origin, host):
            await _refuse(send, 403, "cross-origin request refused: send it from the page this server serves")
            return
        await self.app(scope, receive, send)


async def _refuse(send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode("utf-8")
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"x-content-type-options", b"nosniff")]})
    await send({"type": "http.response.body", "body": body})
