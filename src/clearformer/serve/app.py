"""The local web app: the walkthrough page, its static files, and a JSON API that explains a sentence.

    GET  /                 the page (the same front end as `clearformer explain --html`, plus the form)
    GET  /static/<file>    only the front end's own files, from a fixed list (no path is ever opened)
    GET  /api/info         the loaded model (or none), the seed examples, a notice
    POST /api/explain      {"sentence": "..."} or {"example": "i-love-you"} -> the walkthrough JSON

Every refusal is a 4xx JSON answer {"error": "one line"}; a bug would be a 500 with the same shape.

Guards: a request whose `Host` is not a localhost name or the address the server listens on is refused
(421: a page on another site reaching the server through DNS rebinding); a POST whose `Origin` is another
site is refused (403: a cross-site form or text/plain fetch); explanations run on a bounded worker pool
(`scheduler.py`) and a full queue answers 503 with Retry-After; no response holds an absolute path.
"""

from __future__ import annotations

import gzip
import ipaddress
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware

from clearformer.explain.html import LIVE_SCRIPTS, STYLE, asset, render_page
from clearformer.serve.explainer import MAX_BODY_BYTES, Explainer, LoadedModel, RequestError, parse_request
from clearformer.serve.scheduler import Busy, ExplainScheduler

MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=SECURITY_HEADERS)


def both_encodings(answer: bytes) -> tuple[bytes, bytes]:
    """The answer as is and gzip-compressed (level 6: a walkthrough compresses ~10x, in a few ms)."""
    return answer, gzip.compress(answer, compresslevel=6, mtime=0)


def on_loopback(request: Request) -> bool:
    try:
        return request.client is not None and ipaddress.ip_address(request.client.host).is_loopback
    except ValueError:
        return False


LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def host_name(authority: str) -> str:
    """'localhost:8000' -> 'localhost', '[::1]:8000' -> '::1' (lower case; '' if unparsable)."""
    try:
        return (urlsplit(f"//{authority}").hostname or "").lower()
    except ValueError:
        return ""


def host_allowed(name: str, bound: str) -> bool:
    """A localhost name, the bound address, or (bound to all interfaces) any IP literal: never a domain name.

    DNS rebinding needs a domain name that resolves to this machine; an IP literal or localhost cannot be one.
    """
    if name in LOCAL_NAMES or name == bound.lower():
        return True
    if bound in WILDCARDS:
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            return False
    return False


def refusal(headers: Headers, method: str, bound_host: str) -> JSONResponse | None:
    """The 421/403 answer for a request from another site (by Host, or by Origin on a POST), else None."""
    if not host_allowed(host_name(headers.get("host", "")), bound_host):
        return _error(421, "unexpected Host header: open the page as http://localhost:PORT/")
    origin = headers.get("origin")
    if method not in ("GET", "HEAD") and origin is not None:
        parts = urlsplit(origin) if origin != "null" else None
        if parts is None or parts.scheme != "http" or not host_allowed(parts.hostname or "", bound_host):
            return _error(403, "cross-origin request refused")
    return None


class SameOriginOnly:
    """ASGI middleware (no body buffering, unlike @app.middleware) refusing requests from other sites."""

    def __init__(self, app, bound_host: str) -> None:
        self.app = app
        self.bound_host = bound_host

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            answer = refusal(Headers(scope=scope), scope["method"], self.bound_host)
            if answer is not None:
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(loaded: LoadedModel | None, bound_host: str = "127.0.0.1", workers: int | None = None,
               queue: int = 16) -> FastAPI:
    """The app for a loaded translation model, or for the seed examples only (`loaded` None).

    `bound_host` is the address the server listens on (accepted in `Host`); `workers` explanations run
    at once (default: one per CPU core) and `queue` more may wait before requests are answered 503.
    """
    explainer = Explainer(loaded)
    scheduler = ExplainScheduler(workers, queue)
    # The front end's files are read once, into memory: the static route can only ever answer these.
    files = {name: asset(name).encode("utf-8") for name in (STYLE, *LIVE_SCRIPTS)}
    info = explainer.info()
    page = render_page({"config": info, "walk": explainer.example_payload(explainer.examples[0])},
                       live=True, inline=False).encode("utf-8")

    app = FastAPI(title="clearformer", docs_url=None, redoc_url=None, openapi_url=None)
    # JSON answers are left out: /api/explain compresses its own (once per result), the others are small.
    app.add_middleware(GZipMiddleware, minimum_size=4096,
                       exclude_content_types=(*DEFAULT_EXCLUDED_CONTENT_TYPES, "application/json"))
    app.state.explainer = explainer
    app.state.scheduler = scheduler

    app.add_middleware(SameOriginOnly, bound_host=bound_host)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> JSONResponse:
        return _error(error.status_code, str(error.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        return _error(400, "malformed request")

    @app.exception_handler(RequestError)
    async def refused(request: Request, error: RequestError) -> JSONResponse:
        return _error(error.status, error.message)

    @app.exception_handler(Exception)
    async def bug(request: Request, error: Exception) -> JSONResponse:
        return _error(500, f"internal error: {type(error).__name__}: {error}")

    @app.get("/", response_class=HTMLResponse)
    async def index() -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)

    @app.get("/static/{name}")
    async def static(name: str) -> Response:
        if name not in files:
            return _error(404, "no such file")
        media_type = MEDIA_TYPES[name[name.rindex("."):]]
        return Response(files[name], media_type=media_type, headers=SECURITY_HEADERS)

    @app.get("/api/info")
    async def api_info() -> JSONResponse:
        return JSONResponse(info, headers=SECURITY_HEADERS)

    @app.post("/api/explain")
    async def api_explain(request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
            return _error(413, f"request body over {MAX_BODY_BYTES} bytes")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return _error(413, f"request body over {MAX_BODY_BYTES} bytes")
        kind, value = parse_request(body)
        try:
            plain, compressed = await scheduler.run(f"{kind}:{value}", lambda: both_encodings(
                explainer.explain(kind, value)))
        except Busy as busy:
            response = _error(503, str(busy))
            response.headers["Retry-After"] = "1"
            return response
        if "gzip" in request.headers.get("accept-encoding", "") and not on_loopback(request):
            # Compressed once in the worker, not once per answer on the event loop. Over loopback the
            # answer goes as is: there compressing and decompressing costs more than sending the bytes.
            headers = {**SECURITY_HEADERS, "Content-Encoding": "gzip", "Vary": "Accept-Encoding"}
            return Response(compressed, media_type="application/json", headers=headers)
        return Response(plain, media_type="application/json", headers=SECURITY_HEADERS)

    return app
