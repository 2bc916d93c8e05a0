"""LibreTranslate's HTTP API, answered by the served model: what Weblate and `libretranslatepy` speak.

    POST /translate           q (a string, or a list of them), source (a code or "auto"), target, format
                              ("text" or "html"), api_key (accepted, ignored: the server is local), alternatives
                              -> {"translatedText": "..."} (a list for a list q; with source "auto" also
                              "detectedLanguage"; with alternatives=N "alternatives", the beam's distinct n-best;
                              "notes" where a text could not be translated; with confidence=true, clearformer's
                              "confidence" in [0, 1] per text, which clients ignore); JSON or a form
                              (libretranslatepy sends a form, Weblate JSON)
    GET  /languages           [{"code": "en", "name": "English", "targets": ["pt"]}, {"code": "pt", ...}]: the run's
                              languages (clearformer.languages: what the import or the corpus recorded, or
                              serve --languages)
    POST /detect              [{"language": "pt", "confidence": 99.2}, ...]: a real language identifier
                              (serve/detect.py: py3langid), or 501 where it is not installed
    GET  /frontend/settings   the few settings LibreTranslate's own page reads (limits, languages)

What Weblate 5.x sends (weblate/machinery/libretranslate.py and base.py, 5.14.3; replayed byte for byte in
tests/catalog/test_weblate_client.py): POST JSON {"api_key": KEY, "q": [up to 20 strings], "source": "en",
"target": "pt-BR"}, each placeholder of a string replaced by `[X{offset}X]` first (put back after by a regular
expression that allows spaces before "X]"), a language code tried as `pt_BR` -> `pt-BR` -> `pt` against
/languages. So: codes match as BCP 47 with that fallback (`Languages.matches`: `pt`, `pt-BR`, `pt_BR` reach a
model of `pt`); `[X15X]` and DeepL's `<x id="3"/>` are placeholders the model copies exactly
(tokenize/placeholders.py). A string of a list the model cannot read (every word unknown, too long) does not
fail the others: its translatedText is "" and "notes" (a list beside translatedText, one list of lines per
string) says why. LibreTranslate itself fails the whole list (its /translate aborts on the first error) and
Weblate discards a failed batch whole, so one bad string would cost the other 19; "" is what Weblate's
batch_translate records as no suggestion, and a client that reads only translatedText loses nothing else.
A single q the model cannot read is a 400, as before.

Errors have LibreTranslate's shape and codes: {"error": "..."} with 400 (a bad request, a language the
model does not translate, a text the model cannot read), 403 (the host guard: serve/guard.py), 429 (the
translation queue is full: retry), 501 (/detect without py3langid), 500 (a bug). A body is read with the bound
every route has (serve/requests.py: 413 over MAX_TRANSLATE_BODY_BYTES for /translate, a page of strings; over
MAX_BODY_BYTES for /detect), in at most BODY_SECONDS (a client that stops sending is answered 408 and let go);
a request holds at most MAX_TRANSLATE_TEXTS texts of at most MAX_SENTENCE_CHARS characters each.

Every text goes through the one input path (`prepare_sources`), line by line; sentences of requests that
arrive together are decoded together (serve/batcher.py). format=html: serve/markup.py reads the markup with
html.parser, the model translates the words between the tags, and each inline tag goes back where the model's
own alignment puts its words; block tags, comments and references stay as they were.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import parse_qsl

from fastapi import Request
from fastapi.responses import JSONResponse

from clearformer.errors import UserError
from clearformer.generate.glossary import TermBatch, sentence_end_ids, term_batch
from clearformer.generate.nbest import translate_nbest
from clearformer.generate.options import DecodingOptions
from clearformer.generate.source import Pieces
from clearformer.generate.translator import Translator, join_pieces
from clearformer.glossary import Glossary
from clearformer.languages import Languages, name_of, run_languages
from clearformer.limits import MAX_SENTENCE_CHARS, MAX_TRANSLATE_BODY_BYTES, MAX_TRANSLATE_TEXTS, has_surrogates
from clearformer.serve import detect as detection
from clearformer.serve.batcher import Batching, BatchQueue
from clearformer.serve.glossary_field import glossary_field, missing_terms
from clearformer.serve.markup import Run, parse_html, place_tags, word_links
from clearformer.serve.pool import Busy
from clearformer.serve.requests import RequestError, read_body
from clearformer.tokenize import Masked

MAX_ALTERNATIVES = 16
FIELDS = ("q", "source", "target", "format", "api_key", "alternatives", "glossary", "confidence")


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
    unreadable: dict[int, str] = field(default_factory=dict)  # a text of a list refused on sight (its text ""): why
    glossary: Glossary | None = None  # the project's terms (serve/glossary_field.py)
    confidence: bool = False  # answer each text's confidence too (clearformer's field: clients ignore it)


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
    unreadable = {}  # a text of a list no model can take: noted in the answer, the others translated
    for index, text in enumerate(texts):
        problem = None
        if len(text) > MAX_SENTENCE_CHARS:
            problem = f"request ({len(text)}) exceeds text limit ({MAX_SENTENCE_CHARS})"
        elif has_surrogates(text):
            problem = "not valid Unicode text (a lone surrogate)"
        if problem is not None and single:
            raise RequestError(400, f"Invalid request: q: {problem}")
        if problem is not None:
            unreadable[index] = f"q[{index}]: {problem}"
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
    confidence = {"true": True, "false": False}.get(fields.get("confidence"), fields.get("confidence", False))
    if not isinstance(confidence, bool):
        raise RequestError(400, "Invalid request: confidence must be true or false")
    if confidence and alternatives:
        raise RequestError(400, "Invalid request: confidence is given for the translation, not with alternatives")
    if languages is None:
        raise RequestError(400, "this model's run records no languages: start `clearformer serve --languages SRC:TGT`")
    detected = source == "auto"
    if not detected and not languages.matches(source, "source"):
        raise RequestError(400, f"{source[:20]} is not supported: this model translates {languages.source} to "
                                f"{languages.target}")
    if not languages.matches(target, "target"):
        raise RequestError(400, f"{target[:20]} is not supported: this model translates {languages.source} to "
                                f"{languages.target}")
    return TranslateRequest(tuple("" if i in unreadable else text for i, text in enumerate(texts)), single,
                            languages.source, languages.target, form == "html", detected, alternatives, unreadable,
                            glossary_field(fields.get("glossary")), confidence)


@dataclass
class _Segment:
    """A stretch of one text the model translates as one: a line (format=text) or a run of words between block
    tags (format=html, `run` holds its inline tags); `pieces` once read, `error` when it could not be."""

    owner: int  # the text it belongs to
    sentence: str
    run: Run | None = None
    pieces: Pieces | None = None
    error: str | None = None


@dataclass
class _Text:
    """One text as it is put back together: `parts`, each a string kept as it was or a segment's index."""

    parts: list[str | int] = field(default_factory=list)


@dataclass(frozen=True)
class _Job:
    """One sentence in the batch queue: its ids as the model reads them, how it was masked, the alternatives its
    request asked for, and (format=html) the sentence to align its translation with."""

    ids: list[int]
    masked: Masked
    alternatives: int = 0
    align: str | None = None
    plan: tuple = ()  # the glossary terms it owes (generate/glossary.py `TermPieces`)
    confidence: bool = False  # its request asked for the confidence (clearformer/quality/)


@dataclass(frozen=True)
class _Done:
    """A job's translation, its alternatives (best first), and per candidate the word links (format=html)."""

    text: str
    alternatives: tuple[str, ...] = ()
    links: tuple[tuple[tuple[int, int], ...], ...] = ()
    notes: tuple[str, ...] = ()  # what the translator's checks found (generate/result.py `Note`)
    confidence: float | None = None


@dataclass(frozen=True)
class TextAnswer:
    """What the API says about one text: its translation, its alternatives, and the lines a reader must see."""

    text: str
    alternatives: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    confidence: float | None = None  # its least confident sentence's: the one a reviewer must read


def split_text(text: str, html: bool, masks: bool = True) -> tuple[_Text, list[_Segment]]:
    """A text -> how it is put back, and its segments (blank lines and the spaces around a line kept); `masks`:
    the model masks placeholders, so html references to symbols stay spelled (serve/markup.py)."""
    layout, segments = _Text(), []
    if html:
        document = parse_html(text, keep_references=masks)
        for part in document.parts:
            if isinstance(part, str):
                layout.parts.append(part)
                continue
            layout.parts.append(len(segments))
            segments.append(_Segment(-1, document.runs[part].sentence, document.runs[part]))
        return layout, segments
    for number, raw in enumerate(text.split("\n")):
        if number:
            layout.parts.append("\n")
        core = raw.strip()
        if not core:
            layout.parts.append(raw)
            continue
        layout.parts += [raw[: len(raw) - len(raw.lstrip())], len(segments), raw[len(raw.rstrip()):]]
        segments.append(_Segment(-1, core))
    return layout, segments


class TranslationService:
    """The served model behind the LibreTranslate routes: texts -> translations through the batch queue."""

    def __init__(self, translator: Translator, languages: Languages | None, decoding: DecodingOptions | None = None,
                 max_batch: int = 32, wait_s: float = 0.005, capacity: int = 4096, run: Path | None = None) -> None:
        self.translator, self.languages, self.run = translator, languages, run
        self.rater = None  # the run's confidence estimator (clearformer/quality/), read on the first request for it
        self.model, self.tokenizer = translator.model, translator.tokenizer
        self.decoding = (decoding or DecodingOptions()).but(batch_size=max_batch).check()
        self.queue = BatchQueue(self._decode, max_batch, wait_s, capacity)
        self.sentence_ends: tuple[int, ...] | None = None  # for glossaries: read from the vocabulary once

    def _decode(self, jobs: list[_Job]) -> list[_Done]:
        """Jobs of several requests -> their translations (placeholders restored), alternatives and links."""
        texts: list[tuple[list[str], tuple[str, ...], float | None]] = [([], (), None) for _ in jobs]
        for count, rated in sorted({(job.alternatives, job.confidence) for job in jobs}):
            chosen = [i for i, job in enumerate(jobs) if (job.alternatives, job.confidence) == (count, rated)]
            pieces = Pieces.whole([jobs[i].ids for i in chosen], [jobs[i].masked for i in chosen])
            if count:  # the beam's n-best over the model's own search (generate/nbest.py)
                found = [(ranked, (), None) for ranked in
                         translate_nbest(self.model, self.tokenizer, pieces, self.decoding, count,
                                         self.translator.facts)]
            else:  # the one translator every front calls (generate/translator.py), with the terms each job owes
                plans = tuple(jobs[i].plan for i in chosen)
                terms = TermBatch(plans, self.sentence_ends or ()) if any(plans) else None
                results = self.translator.translate(pieces, self.decoding, glossary=terms,
                                                    confidence=self.confidence_rater() if rated else None)
                found = [([result.text], tuple(note.detail for note in result.notes), result.confidence)
                         for result in results]
            for i, candidates in zip(chosen, found, strict=True):
                texts[i] = candidates
        done = []
        for job, (candidates, notes, confidence) in zip(jobs, texts, strict=True):
            links = tuple(tuple(word_links(self.model, self.tokenizer, job.align, text)) for text in candidates) \
                if job.align is not None else ()
            done.append(_Done(candidates[0], tuple(candidates[1:]), links, notes, confidence))
        return done

    def confidence_rater(self):
        """The run's confidence estimator, read once (its fitted weights, else the unsupervised score, said once on
        the server's stderr: clearformer/quality/fronts.py)."""
        if self.rater is None:
            from clearformer.quality.fronts import rater

            self.rater = rater(self.run, lambda line: print(f"clearformer serve: {line}", file=sys.stderr))
        return self.rater

    def read(self, request: TranslateRequest) -> tuple[list[_Text], list[_Segment]]:
        """Every text cut into its segments, each read by the one input path (a segment the model cannot read
        gets its `error`, one line naming it)."""
        layouts, segments = [], []
        for owner, text in enumerate(request.texts):
            layout, own = split_text(text, request.html, bool(self.tokenizer.mask_placeholders))
            layouts.append(_Text([part + len(segments) if isinstance(part, int) else part for part in layout.parts]))
            for segment in own:
                segment.owner = owner
                label = "q" if request.single else f"q[{owner}]"
                try:  # the one input path (Translator.read: generate/source.py `prepare_sources`)
                    segment.pieces = self.translator.read([segment.sentence], self.decoding.split,
                                                          where=lambda _, label=label: label)
                except UserError as error:
                    segment.error = str(error)
            segments += own
        return layouts, segments

    async def translate(self, request: TranslateRequest) -> list[TextAnswer]:
        """The answers for the request's texts (a 400 for a single text the model cannot read, 429 when full)."""
        # Off the event loop: masking runs a tokenizer's placeholder patterns (time-bounded: tokenize/placeholders)
        layouts, segments = await asyncio.to_thread(self.read, request)
        failed = {segment.owner: segment.error for segment in reversed(segments) if segment.error is not None}
        failed.update(request.unreadable)
        if request.single and failed:
            raise RequestError(400, failed[0])
        jobs, where = [], []  # where: (segment, piece) of each job
        for number, segment in enumerate(segments):
            if segment.owner in failed:
                continue
            for piece, (ids, masked) in enumerate(zip(segment.pieces.sources, segment.pieces.masks, strict=True)):
                jobs.append(_Job(ids, masked, request.alternatives,
                                 segment.pieces.texts[piece] if segment.run is not None else None,
                                 confidence=request.confidence))
                where.append((number, piece))
        if request.glossary is not None:
            texts = [segments[number].pieces.texts[piece] for number, piece in where]
            plans = await self.term_plans(request.glossary, texts)
            jobs = [replace(job, plan=plan) for job, plan in zip(jobs, plans, strict=True)]
        outputs = await self.decoded(jobs)
        results: dict[int, list[_Done]] = {}
        for (number, _), output in zip(where, outputs, strict=True):
            results.setdefault(number, []).append(output)
        answers = [self._answer(owner, layouts[owner], segments, results, failed, request)
                   for owner in range(len(request.texts))]
        if request.glossary is None:
            return answers
        return [replace(answer, notes=answer.notes + missing_terms(request.glossary, text, answer.text))
                for text, answer in zip(request.texts, answers, strict=True)]

    async def decoded(self, jobs: list[_Job]) -> list[_Done]:
        """Jobs through the batch queue (429 when full)."""
        try:
            future = self.queue.submit(jobs)
        except Busy as error:  # LibreTranslate's "slow down"
            raise RequestError(429, str(error)) from None
        # shield: a client that hangs up leaves its sentences to finish in their batch (others wait on it).
        return await asyncio.shield(asyncio.wrap_future(future))

    async def term_plans(self, glossary: Glossary, texts: list[str]) -> list[tuple]:
        """The glossary terms each text owes (generate/glossary.py), the model's own renderings of the terms
        decoded through the queue like any text."""
        if self.sentence_ends is None:
            self.sentence_ends = await asyncio.to_thread(sentence_end_ids, self.tokenizer)
        wanted: list[str] = []
        term_batch(self.tokenizer, glossary, texts, lambda sources: wanted.extend(sources) or [""] * len(sources))
        if not wanted:
            return [()] * len(texts)
        alone = self.translator.read(wanted, False, check=False)
        done = await self.decoded([_Job(ids, masked) for ids, masked in zip(alone.sources, alone.masks, strict=True)])
        renderings = [output.text for output in done]
        terms = term_batch(self.tokenizer, glossary, texts, lambda _: renderings)
        return list(terms.plans) if terms is not None else [()] * len(texts)

    def _answer(self, owner: int, layout: _Text, segments: list[_Segment], results: dict[int, list[_Done]],
                failed: dict[int, str], request: TranslateRequest) -> TextAnswer:
        """One text put back together: each segment's pieces joined, tags placed (html); its alternatives differ
        from the translation in one segment each."""
        if owner in failed:
            return TextAnswer("", (), (f"not translated: {failed[owner]}",))
        numbers = [part for part in layout.parts if isinstance(part, int)]
        best = {number: self._segment_text(segments[number], results[number], 0) for number in numbers}
        alternatives = []
        for number in numbers:
            for rank in range(1, 1 + max(len(done.alternatives) for done in results[number])):
                other = self._segment_text(segments[number], results[number], rank)
                alternatives.append(self._render(layout, {**best, number: other}))
        text = self._render(layout, best)
        notes = tuple(dict.fromkeys(note for number in numbers for done in results[number] for note in done.notes))
        rated = [done.confidence for number in numbers for done in results[number] if done.confidence is not None]
        return TextAnswer(text, tuple(dict.fromkeys(a for a in alternatives if a != text))[: request.alternatives],
                          notes, min(rated) if rated else None)

    @staticmethod
    def _segment_text(segment: _Segment, done: list[_Done], rank: int) -> str:
        """A segment's translation (rank 0) or its rank-th alternative: each piece's candidate of that rank (its
        best where it has fewer), joined; format=html: its tags placed by the pieces' word links."""
        candidates = [(item.text, *item.alternatives) for item in done]
        chosen = [options[rank] if rank < len(options) else options[0] for options in candidates]
        text = join_pieces(chosen, [0] * len(chosen), 1)[0]
        if segment.run is None:
            return text
        links, source_words, target_words = [], 0, 0
        for item, options, piece_text, translated in zip(done, candidates, segment.pieces.texts, chosen, strict=True):
            piece_links = item.links[options.index(translated)] if item.links else ()
            links += [(i + source_words, j + target_words) for i, j in piece_links]
            source_words += len(piece_text.split())
            target_words += len(translated.split())
        return place_tags(segment.run, text, links)

    @staticmethod
    def _render(layout: _Text, texts: dict[int, str]) -> str:
        return "".join(part if isinstance(part, str) else texts[part] for part in layout.parts)

    def languages_answer(self) -> list[dict]:
        if self.languages is None:
            return []
        source, target = self.languages.source, self.languages.target
        return [{"code": source, "name": name_of(source), "targets": [target]},
                {"code": target, "name": name_of(target), "targets": []}]

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
    languages = batching.languages or run_languages(loaded.meta, loaded.path)
    return TranslationService(loaded.translator, languages, decoding, batching.max_batch, batching.wait_s,
                              batching.capacity, loaded.path)


async def detected_languages(request: TranslateRequest) -> list[dict] | None:
    """Source "auto": the language each text is in (serve/detect.py), None where detection is not installed."""
    if not request.detected or not await asyncio.to_thread(detection.available):
        return None
    return [(await asyncio.to_thread(detection.detect, text))[0] for text in request.texts]


def translate_answer(request: TranslateRequest, answers: list[TextAnswer], detected: list[dict] | None = None) -> dict:
    """LibreTranslate's answer: translatedText (a string for a string q), detectedLanguage for source auto,
    alternatives when asked, notes where a text has some (one list of lines per text)."""
    def shaped(values: list):
        return values[0] if request.single else values

    answer: dict = {"translatedText": shaped([item.text for item in answers])}
    if detected is not None:
        answer["detectedLanguage"] = shaped(detected)
    if request.alternatives:
        answer["alternatives"] = shaped([list(item.alternatives) for item in answers])
    if any(item.notes for item in answers):
        answer["notes"] = shaped([list(item.notes) for item in answers])
    if request.confidence:  # clearformer's field (clients ignore it): in [0, 1], null for a text not translated
        answer["confidence"] = shaped([None if item.confidence is None else round(item.confidence, 4)
                                       for item in answers])
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
        answers = await served().translate(checked)
        return answer(translate_answer(checked, answers, await detected_languages(checked)))

    @app.get("/languages")
    async def languages() -> JSONResponse:
        return answer(service.languages_answer() if service is not None else [])

    @app.post("/detect")
    async def detect(request: Request) -> JSONResponse:
        fields = request_fields(await read_body(request), request.headers.get("content-type", ""))
        if not isinstance(fields.get("q"), str):
            raise RequestError(400, "Invalid request: missing q parameter")
        return answer(await asyncio.to_thread(detection.detect, fields["q"]))

    @app.get("/frontend/settings")
    async def settings() -> JSONResponse:
        return answer(served().settings_answer())
