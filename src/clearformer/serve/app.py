"""The local web app: the walkthrough page, its static files, and a JSON API that explains a sentence.

    GET  /                 the page (the same front end as `clearformer explain --html`, plus the form)
    GET  /static/<file>    only the front end's own files, from a fixed list (no path is ever opened)
    GET  /api/info         the loaded model (or none), the seed examples, a notice
    POST /api/explain      {"sentence": "..."} or {"example": "i-love-you"} -> the walkthrough JSON

Every refusal is a 4xx JSON answer {"error": "one line"}; a bug would be a 500 with the same shape.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware

from clearformer.explain.html import LIVE_SCRIPTS, STYLE, asset, render_page
from clearformer.serve.explainer import MAX_BODY_BYTES, Explainer, LoadedModel, RequestError, parse_request

MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=SECURITY_HEADERS)


def create_app(loaded: LoadedModel | None) -> FastAPI:
    """The app for a loaded translation model, or for the seed examples only (`loaded` None)."""
    explainer = Explainer(loaded)
    # The front end's files are read once, into memory: the static route can only ever answer these.
    files = {name: asset(name).encode("utf-8") for name in (STYLE, *LIVE_SCRIPTS)}
    info = explainer.info()
    page = render_page({"config": info, "walk": explainer.example_payload(explainer.examples[0])},
                       live=True, inline=False).encode("utf-8")

    app = FastAPI(title="clearformer", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(GZipMiddleware, minimum_size=4096)
    app.state.explainer = explainer

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
        answer = await run_in_threadpool(explainer.explain, kind, value)
        return Response(answer, media_type="application/json", headers=SECURITY_HEADERS)

    return app
