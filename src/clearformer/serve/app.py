"""The local web app: the walkthrough page, its static files, and a JSON API that explains a sentence.

    GET  /                 the page (the same front end as `clearformer explain --html`, plus the form)
    GET  /static/<file>    only the front end's own files, from a fixed list (no path is ever opened)
    GET  /claims/<file>    the figure and JSON of a `clearformer claims` run, read at start (serve/claim_results.py)
    GET  /api/info         the loaded model (or none) and its kind ("translation" or "lm"), the seed
                           examples, a notice
    POST /api/explain      {"sentence": "..."} (a translation model), {"prompt": "..."} (a language model:
                           the prompt and a few greedy tokens, as `lm explain`) or {"example": "i-love-you"}
                           -> the walkthrough JSON
    POST /api/whatif       {"sentence": "...", "ablate": [names], "beam": K} (or "prompt"): the same, rerun with
                           parts of the model switched off and with beam search (serve/whatif.py)
    POST /api/why          {"tool": "lens"|"patch"|"attribute", "sentence": ..., "corrupted": ..., "method": ...,
                           "beam": K}: the logit lens, activation patching or attribution (serve/why.py)
    POST /translate, GET /languages, POST /detect, GET /frontend/settings
                           LibreTranslate's API (serve/libretranslate.py): Weblate and libretranslatepy use the
                           model; requests that arrive together are decoded together (serve/batcher.py)

Every refusal is a 4xx JSON answer {"error": "one line"}; a bug would be a 500 with the same shape. Every
POST route reads its body with one parser and every answer has one bound (serve/requests.py).
Explanations run in a bounded thread pool (`pool.AnswerPool`: parallel, identical requests share one
computation, a full queue answers 503); `guard.HostOriginGuard` refuses foreign Host headers and
cross-origin writes; no answer holds a path of this machine (the model is named by its folder name).
"""

from __future__ import annotations

import asyncio
import gzip
import sys
import traceback

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware

from clearformer.explain.claim_links import claims_doc
from clearformer.explain.html import LIVE_SCRIPTS, STYLE, asset, render_page
from clearformer.generate.options import DecodingOptions
from clearformer.learn.page import page_sections
from clearformer.limits import SERVER_CACHE_BYTES, SERVER_LM_NEW_TOKENS, SERVER_QUEUE, SERVER_WORKERS
from clearformer.serve.batcher import Batching
from clearformer.serve.claim_results import MEDIA_TYPES as RESULT_TYPES
from clearformer.serve.claim_results import read_claim_results
from clearformer.serve.docs_page import render_markdown
from clearformer.serve.explainer import Explainer, LoadedModel, parse_request
from clearformer.serve.guard import HostOriginGuard
from clearformer.serve.libretranslate import add_routes as add_libretranslate_routes
from clearformer.serve.libretranslate import translation_service
from clearformer.serve.pool import AnswerPool, Busy
from clearformer.serve.requests import RequestError, read_body
from clearformer.serve.whatif import (
    AnswerKey,
    ExplainKey,
    WhatIfKey,
    WhyKey,
    check_whatif,
    compute,
    parse_whatif,
    whatif_info,
)
from clearformer.serve.why import check_why, parse_why

MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=SECURITY_HEADERS)


def compressed(answer: bytes) -> tuple[bytes, bytes]:
    """(answer, its gzip): compressed once, in the worker, not once per client that asks for it."""
    return answer, gzip.compress(answer, compresslevel=6, mtime=0)


def answer_response(answer: tuple[bytes, bytes], accept_encoding: str) -> Response:
    plain, packed = answer
    headers = dict(SECURITY_HEADERS, Vary="Accept-Encoding")
    if "gzip" in accept_encoding.lower():  # GZipMiddleware leaves a response with Content-Encoding alone
        return Response(packed, media_type="application/json", headers=dict(headers, **{"Content-Encoding": "gzip"}))
    return Response(plain, media_type="application/json", headers=headers)


def create_app(loaded: LoadedModel | None, bound_host: str = "127.0.0.1", workers: int = SERVER_WORKERS,
               queue: int = SERVER_QUEUE, lm_new_tokens: int = SERVER_LM_NEW_TOKENS, claims_dir=None,
               decoding: DecodingOptions | None = None, batching: Batching | None = None) -> FastAPI:
    """The app for a loaded translation model or language model, or for the seed examples only (`loaded` None).

    `bound_host` is the address the server listens on (accepted as Host besides the localhost names);
    `workers` explanations run at once and `queue` more may wait, beyond that a request gets 503;
    a language model generates `lm_new_tokens` tokens per explanation.
    `claims_dir`: a folder of `clearformer claims` results, linked from their steps when present.
    `decoding`: the rules a sentence is translated with (as `translate` takes them; default: its defaults).
    `batching`: the LibreTranslate API's languages and batch queue (default: the run's languages, its defaults).
    """
    explainer = Explainer(loaded, lm_new_tokens, decoding)
    pool = AnswerPool(lambda key: compressed(compute(explainer, key)), workers, queue, SERVER_CACHE_BYTES)
    # The front end's files are read once, into memory: the static route can only ever answer these.
    files = {name: asset(name).encode("utf-8") for name in (STYLE, *LIVE_SCRIPTS)}
    results, results_index = read_claim_results(claims_dir)
    # the model's name, never where it lives on this machine
    doc = claims_doc()
    claims_text = doc.read_bytes() if doc else None  # read once: the route never opens a path
    claims_page = render_markdown(claims_text.decode("utf-8"), "clearformer: the tutorials' claims, measured",
                                  doc.parent).encode("utf-8") if claims_text else None  # serve/docs_page.py
    info = {**explainer.info(), "claims": results_index, "whatif": whatif_info(explainer),
            "docs": "docs/claims.html" if claims_text else None}
    page = render_page({"config": info, "walk": explainer.example_payload(explainer.examples[0])},
                       live=True, inline=False, sections=page_sections()).encode("utf-8")

    app = FastAPI(title="clearformer", docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(GZipMiddleware, minimum_size=4096)
    app.add_middleware(HostOriginGuard, bound_host=bound_host)  # added last: runs first
    app.state.explainer = explainer
    app.state.pool = pool
    app.state.translation = translation_service(loaded, decoding, batching or Batching())
    add_libretranslate_routes(app, app.state.translation, SECURITY_HEADERS)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> JSONResponse:
        return _error(error.status_code, str(error.detail))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        return _error(400, "malformed request")

    @app.exception_handler(RequestError)
    async def refused(request: Request, error: RequestError) -> JSONResponse:
        return _error(error.status, error.message)

    @app.exception_handler(Busy)
    async def busy(request: Request, error: Busy) -> JSONResponse:
        response = _error(503, str(error))
        response.headers["Retry-After"] = "1"
        return response

    @app.exception_handler(Exception)
    async def bug(request: Request, error: Exception) -> JSONResponse:
        # The details go to the server's terminal, not to the client (they may hold paths).
        traceback.print_exception(error, file=sys.stderr)
        return _error(500, f"internal error ({type(error).__name__})")

    @app.get("/", response_class=HTMLResponse)
    async def index() -> Response:
        return Response(page, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)

    @app.get("/static/{name}")
    async def static(name: str) -> Response:
        if name not in files:
            return _error(404, "no such file")
        media_type = MEDIA_TYPES[name[name.rindex("."):]]
        return Response(files[name], media_type=media_type, headers=SECURITY_HEADERS)

    @app.get("/claims/{name}")
    async def claim_result(name: str) -> Response:
        if name not in results:
            return _error(404, "no such result (run `clearformer claims N --quick`, then restart the server)")
        return Response(results[name], media_type=RESULT_TYPES[name[name.rindex("."):]], headers=SECURITY_HEADERS)

    @app.get("/docs/claims.md")
    async def claims_docs() -> Response:
        if claims_text is None:
            return _error(404, "docs/claims.md is not installed with clearformer")
        return Response(claims_text, media_type="text/markdown; charset=utf-8", headers=SECURITY_HEADERS)

    @app.get("/docs/claims.html")
    async def claims_docs_page() -> Response:
        if claims_page is None:
            return _error(404, "docs/claims.md is not installed with clearformer")
        return Response(claims_page, media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS)

    @app.get("/api/info")
    async def api_info() -> JSONResponse:
        return JSONResponse(info, headers=SECURITY_HEADERS)

    async def answer(request: Request, key: AnswerKey) -> Response:
        # The pool computes every answer within the one bound (serve/requests.py, whatif.compute).
        # shield: a client that hangs up must not cancel the computation others may be waiting for.
        result = await asyncio.shield(asyncio.wrap_future(pool.submit(key)))
        return answer_response(result, request.headers.get("accept-encoding", ""))

    @app.post("/api/explain")
    async def api_explain(request: Request) -> Response:
        kind, value = parse_request(await read_body(request))
        explainer.check(kind)  # a sentence for a language model (or a prompt for a translator): 400, not queued
        # Off the event loop: reading the source masks placeholders (a user's pattern may take its bound).
        await asyncio.to_thread(explainer.estimate, kind, value)  # surely over the answer bound: 413 first
        return await answer(request, ExplainKey(kind, value))

    @app.post("/api/whatif")
    async def api_whatif(request: Request) -> Response:
        kind, text, ablate, beam = parse_whatif(await read_body(request))
        check_whatif(explainer, kind, ablate)  # unknown names: 400 before anything is queued
        await asyncio.to_thread(explainer.estimate, kind, text, beam)
        return await answer(request, WhatIfKey(kind, text, tuple(ablate), beam))

    @app.post("/api/why")
    async def api_why(request: Request) -> Response:
        tool, kind, text, corrupted, method, beam = parse_why(await read_body(request))
        check_why(explainer, tool, kind)  # no model, or a tool the model has not: 4xx before anything is queued
        await asyncio.to_thread(explainer.estimate, kind, text, beam)  # surely over the answer bound: 413 first
        return await answer(request, WhyKey(tool, kind, text, corrupted, method, beam))

    return app
