"""LibreTranslate's HTTP API, answered by the served model: what Weblate and `libretranslatepy` speak.

    POST /translate           q (a string, or a list of them), source (a code or "auto"), target, format
                              ("text" or "html"), api_key (accepted, ignored: the server is local), alternatives
                              -> {"translatedText": "..."} (a list for a list q; with source "auto" also
                              "detectedLanguage"); JSON or a form (libretranslatepy sends a form, Weblate JSON)
    GET  /languages           [{"code": "en", "name": "English", "targets": ["fr"]}, {"code": "fr", ...}]: the run's
                              languages (clearformer.languages: its corpus's manifest, or serve --languages)
    POST /detect              [{"language": <the run's source>, "confidence": 100.0}]: one model, one source
                              language; nothing is detected
    GET  /frontend/settings   the few settings LibreTranslate's own page reads (limits, languages)

Errors have LibreTranslate's shape and codes: {"error": "..."} with 400 (a bad request, a language the
model does not translate, a text the model cannot read), 403 (the host guard: serve/guard.py), 429 (the
translation queue is full: retry), 500 (a bug). A body is read with the bound every route has
(serve/requests.py: 413 over MAX_TRANSLATE_BODY_BYTES for /translate, a page of strings; over MAX_BODY_BYTES
for /detect); a request holds at most MAX_TRANSLATE_TEXTS texts of at most MAX_SENTENCE_CHARS characters each.

Every text goes through the one input path (`prepare_sources`), line by line; sentences of requests that
arrive together are decoded together (serve/batcher.py). format=html: every tag, comment and entity is
masked as a placeholder before the model and restored after, exactly (catalog/formats.py repairs a run
that does not mask placeholders), so the markup comes back as it was.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from urllib.parse import parse_qsl

from fastapi import Request
from fastapi.responses import JSONResponse

from clearformer.catalog.formats import repair_placeholders
from clearformer.errors import UserError
from clearformer.generate.options import DecodingOptions
from clearformer.generate.result import Note, Translation
from clearformer.generate.source import Pieces, prepare_sources
from clearformer.generate.translator import Translator, join_pieces
from clearformer.languages import Languages, name_of, run_languages
from clearformer.limits import MAX_SENTENCE_CHARS, MAX_TRANSLATE_BODY_BYTES, MAX_TRANSLATE_TEXTS, has_surrogates
from clearformer.serve.batcher import Batching, BatchQueue
from clearformer.serve.pool import Busy
from clearformer.serve.requests import RequestError, read_body
from clearformer.tokenize.placeholders import Masked, mask, mask_target, restore

MAX_ALTERNATIVES = 16
FIELDS = ("q", "source", "target", "format", "api_key", "alternatives")
# Markup a format=html text keeps exactly: a tag (any name), a comment, an entity.
MARKUP = r"<!--.*?-->|</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>|&(?:[A-Za-z]+|#\d+|#x[0-9A-Fa-f]+);"


@dataclass(frozen=True)
class TranslateRequest:
    """A checked POST /translate: the texts, whether q was one string, the languages, html or text."""

    texts: tuple[str, ...]
    single: bool
    source: str
    target: str
    html: bool
    detected: bool  # source was "auto"
    alternatives: int = 0


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def request_fields(body: bytes, content_type: str) -> dict:
    """A JSON object or a form (application/x-www-form-urlencoded) -> its fields; 400 for anything else."""
    kind = content_type.split(";")[0].strip().lower()
    try:
        text = body.decode("utf-8")
        if kind == "application/x-www-form-urlencoded":
            pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text), max_num_fields=len(FIELDS))
            fields = dict(pairs)
            if len(fields) != len(pairs):
                raise RequestError(400, "Invalid request: a field is given twice")
            return fields
        data = json.loads(text, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RequestError(400, "Invalid request: send a JSON object or a form with q, source and target") from None
    if not isinstance(data, dict):
        raise RequestError(400, "Invalid request: send a JSON object with q, source and target")
    return data


def check_translate(fields: dict, languages: Languages | None) -> TranslateRequest:
    """The fields of POST /translate, checked (400 names the first problem, as LibreTranslate words it)."""
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise RequestError(400, f"Invalid request: unknown field {unknown[0][:100]!r}; send {', '.join(FIELDS)}")
    for name in ("q", "source", "target"):
        if name not in fields:
            raise RequestError(400, f"Invalid request: missing {name} parameter")
    q = fields["q"]
    single = isinstance(q, str)
    texts = [q] if single else q
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise RequestError(400, "Invalid request: q must be a string or a list of strings")
    if len(texts) > MAX_TRANSLATE_TEXTS:
        raise RequestError(400, f"Invalid request: {len(texts)} texts in q; at most {MAX_TRANSLATE_TEXTS}")
    for index, text in enumerate(texts):
        if len(text) > MAX_SENTENCE_CHARS:
            raise RequestError(400, f"Invalid request: request ({len(text)}) exceeds text limit ({MAX_SENTENCE_CHARS})"
                                    + ("" if single else f" in q[{index}]"))
        if has_surrogates(text):
            raise RequestError(400, "Invalid request: q is not valid Unicode text (a lone surrogate)")
    source, target, form = fields["source"], fields["target"], fields.get("format", "text")
    if not all(isinstance(value, str) for value in (source, target, form)):
        raise RequestError(400, "Invalid request: source, target and format must be strings")
    if fields.get("api_key") is not None and not isinstance(fields["api_key"], str):
        raise RequestError(400, "Invalid request: api_key must be a string")
    if form not in ("text", "html"):
        raise RequestError(400, f"Invalid request: format {form[:20]!r} is not text or html")
    alternatives = fields.get("alternatives", 0)
    if isinstance(alternatives, str) and alternatives.isdigit() and len(alternatives) < 4:
        alternatives = int(alternatives)
    if isinstance(alternatives, bool) or not isinstance(alternatives, int) or not 0 <= alternatives <= MAX_ALTERNATIVES:
        raise RequestError(400, f"Invalid request: alternatives must be a whole number from 0 to {MAX_ALTERNATIVES}")
    if languages is None:
        raise RequestError(400, "this model's run records no languages: start `clearformer serve --languages SRC:TGT`")
    detected = source == "auto"
    if not detected and source != languages.source:
        raise RequestError(400, f"{source[:20]} is not supported: this model translates {languages.source} to "
                                f"{languages.target}")
    if target != languages.target:
        raise RequestError(400, f"{target[:20]} is not supported: this model translates {languages.source} to "
                                f"{languages.target}")
    return TranslateRequest(tuple(texts), single, languages.source, target, form == "html", detected, alternatives)


@dataclass
class _Line:
    owner: int  # the text it belongs to
    lead: str
    trail: str
    masked: Masked | None = None  # html: the markup masked; None for a blank line
    job: int = -1


class TranslationService:
    """The served model behind the LibreTranslate routes: texts -> translations through the batch queue."""

    def __init__(self, translator: Translator, languages: Languages | None, decoding: DecodingOptions | None = None,
                 max_batch: int = 32, wait_s: float = 0.005, capacity: int = 512) -> None:
        self.translator, self.languages = translator, languages
        self.model, self.tokenizer = translator.model, translator.tokenizer
        self.decoding = (decoding or DecodingOptions()).but(batch_size=max_batch).check()
        self.masks = bool(self.tokenizer.mask_placeholders)
        self.queue = BatchQueue(self._decode, max_batch, wait_s, capacity)

    def _decode(self, sources: list[tuple[list[int], Masked]]) -> list[Translation]:
        """Sources of several requests (ids, as masked) -> their translations, placeholders restored, with what
        the post-check found (generate/checks.py)."""
        pieces = Pieces.whole([ids for ids, _ in sources], [masked for _, masked in sources])
        pieces.texts = [restore(masked, masked.text) for _, masked in sources]  # what the checks compare with
        return self.translator.translate(pieces, self.decoding)

    def lines(self, request: TranslateRequest) -> tuple[list[_Line], list[str]]:
        """Each text cut into lines (blank lines and the spaces around a line kept), and the model's inputs."""
        lines, inputs = [], []
        for owner, text in enumerate(request.texts):
            for raw in text.split("\n"):
                core = raw.strip()
                lead, trail = raw[: len(raw) - len(raw.lstrip())], raw[len(raw.rstrip()):]
                if not core:
                    lines.append(_Line(owner, raw, ""))
                    continue
                masked = mask(core, (MARKUP,)) if request.html else Masked(core)
                lines.append(_Line(owner, lead, trail, masked, len(inputs)))
                inputs.append(masked.text if self.masks else core)
        return lines, inputs

    async def translate(self, request: TranslateRequest) -> list[Translation]:
        """The translations of the request's texts (a 400 for a text the model cannot read, 429 when full),
        each with the notes of its lines (generate/checks.py)."""
        try:
            # Off the event loop: masking runs a tokenizer's placeholder patterns (time-bounded: tokenize/placeholders)
            lines, inputs = await asyncio.to_thread(self.lines, request)
        except UserError as error:  # html with more tags than a masking model has reserved tokens
            raise RequestError(400, str(error)) from None
        labels = [f"q[{line.owner}]" if not request.single else "q" for line in lines if line.masked is not None]
        owners = [line.owner for line in lines if line.masked is not None]  # model input -> the text it is of
        try:
            pieces = await asyncio.to_thread(prepare_sources, self.tokenizer, inputs, self.model.config.max_len,
                                             self.decoding.split, where=lambda index: labels[index])
        except UserError as error:
            raise RequestError(400, str(error)) from None
        # shield: a client that hangs up leaves its sentences to finish in their batch (others wait on it).
        try:
            future = self.queue.submit(list(zip(pieces.sources, pieces.masks, strict=True)))
        except Busy as error:  # LibreTranslate's "slow down"
            raise RequestError(429, str(error)) from None
        outputs = await asyncio.shield(asyncio.wrap_future(future))
        translated = join_pieces([output.text for output in outputs], pieces.owners, pieces.count)  # restored
        notes: list[list[Note]] = [[] for _ in request.texts]
        for output, job in zip(outputs, pieces.owners, strict=True):
            notes[owners[job]] += output.notes
        texts: list[list[str]] = [[] for _ in request.texts]
        for line in lines:
            if line.masked is None:
                texts[line.owner].append(line.lead)
                continue
            text = translated[line.job]
            if request.html:
                if not self.masks:
                    text = mask_target(text, line.masked.originals, (MARKUP,))
                text = restore(line.masked, repair_placeholders(text, line.masked.originals, ())[0])
            texts[line.owner].append(line.lead + text + line.trail)
        return [Translation("\n".join(parts), tuple(dict.fromkeys(found)))
                for parts, found in zip(texts, notes, strict=True)]

    def languages_answer(self) -> list[dict]:
        if self.languages is None:
            return []
        source, target = self.languages.source, self.languages.target
        return [{"code": source, "name": name_of(source), "targets": [target]},
                {"code": target, "name": name_of(target), "targets": []}]

    def detect_answer(self) -> list[dict]:
        if self.languages is None:
            raise RequestError(400, "this model's run records no languages: start `clearformer serve --languages "
                                    "SRC:TGT`")
        return [{"confidence": 100.0, "language": self.languages.source}]

    def settings_answer(self) -> dict:
        languages = self.languages_answer()
        return {"charLimit": MAX_SENTENCE_CHARS, "frontendTimeout": 500, "apiKeys": False, "keyRequired": False,
                "suggestions": False, "filesTranslation": False, "supportedFilesFormat": [],
                "language": {"source": {k: languages[0][k] for k in ("code", "name")} if languages else None,
                             "target": {k: languages[1][k] for k in ("code", "name")} if languages else None}}


def translation_service(loaded, decoding: DecodingOptions | None, batching: Batching) -> TranslationService | None:
    """The service for a loaded translation model (None for a language model, or no model)."""
    if loaded is None or loaded.kind != "translation":
        return None
    languages = batching.languages or run_languages(loaded.meta)
    return TranslationService(loaded.translator, languages, decoding, batching.max_batch, batching.wait_s,
                              batching.capacity)


def translate_answer(request: TranslateRequest, results: list[Translation]) -> dict:
    """LibreTranslate's answer: translatedText (a string for a string q), detectedLanguage for source auto,
    alternatives when asked (none: the server gives one translation); "clearformerNotes", a field clients
    ignore, when a check found something (generate/checks.py): each text's notes as lines, as q is shaped."""
    translations = [result.text for result in results]
    answer: dict = {"translatedText": translations[0] if request.single else translations}
    if any(result.notes for result in results):
        notes = [[note.detail for note in result.notes] for result in results]
        answer["clearformerNotes"] = notes[0] if request.single else notes
    if request.detected:
        detected = {"confidence": 100.0, "language": request.source}
        answer["detectedLanguage"] = detected if request.single else [detected] * len(translations)
    if request.alternatives:
        answer["alternatives"] = [] if request.single else [[] for _ in translations]
    return answer


def add_routes(app, service: TranslationService | None, security_headers: dict) -> None:
    """The LibreTranslate routes on the server's app (`service` None: no translation model is served, and each
    route says so with a 400)."""
    def served() -> TranslationService:
        if service is None:
            raise RequestError(400, "this server holds no translation model (a language model, or --seeds-only)")
        return service

    def answer(data) -> JSONResponse:
        return JSONResponse(data, headers=security_headers)

    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:
        body = await read_body(request, MAX_TRANSLATE_BODY_BYTES)
        checked = check_translate(request_fields(body, request.headers.get("content-type", "")),
                                  served().languages)
        return answer(translate_answer(checked, await served().translate(checked)))

    @app.get("/languages")
    async def languages() -> JSONResponse:
        return answer(service.languages_answer() if service is not None else [])

    @app.post("/detect")
    async def detect(request: Request) -> JSONResponse:
        fields = request_fields(await read_body(request), request.headers.get("content-type", ""))
        if not isinstance(fields.get("q"), str):
            raise RequestError(400, "Invalid request: missing q parameter")
        return answer(served().detect_answer())

    @app.get("/frontend/settings")
    async def settings() -> JSONResponse:
        return answer(served().settings_answer())
