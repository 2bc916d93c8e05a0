"""The page's what-if experiments: POST /api/whatif reruns a sentence (or a language model's prompt) with parts
of the model switched off, and with beam search.

    {"sentence": "I love you", "ablate": ["decoder.layers.0.cross_attention.head.2"], "beam": 4}
    {"prompt": "The dog", "ablate": ["decoder.layers.1.self_attention.head.0.uniform"]}
    -> the walkthrough JSON of the rerun (every step), with `ablated`, `original` (the translation without
       the interventions), `beam` (the search tree when beam > 1) and `sentence`

The names are checked against the loaded model (`clearformer.record.interventions`) before the request is queued:
an unknown one is a 400 that lists the valid ones. The model itself is never changed (an intervention lives
in the worker's context only), so concurrent requests with other interventions cannot see each other's.
"""

from __future__ import annotations

import json

from clearformer.errors import UserError
from clearformer.explain.html import to_json, walk_payload
from clearformer.explain.lm import explain_text
from clearformer.explain.search import explain_search
from clearformer.generate.source import check_source
from clearformer.limits import MAX_BODY_BYTES, MAX_SENTENCE_CHARS
from clearformer.record.interventions import parse_interventions, valid_interventions
from clearformer.record.trace import Interventions
from clearformer.serve.explainer import Explainer, RequestError
from clearformer.serve.why import why_answer

MAX_PAGE_BEAM = 8  # the widest tree the page draws
MAX_ABLATED = 64
FIELDS = ("sentence", "prompt", "ablate", "beam")
SHAPE = '{"sentence": "...", "ablate": ["name", ...], "beam": K} (or "prompt" for a language model)'


def parse_whatif(body: bytes) -> tuple[str, str, tuple[str, ...], int]:
    """The JSON body -> (kind "sentence" or "prompt", its text, the intervention names, the beam)."""
    if len(body) > MAX_BODY_BYTES:
        raise RequestError(413, f"request body over {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise RequestError(400, f"request body must be JSON: {SHAPE}") from None
    if not isinstance(data, dict):
        raise RequestError(400, f"request body must be a JSON object: {SHAPE}")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RequestError(400, f"unknown field(s) {', '.join(map(repr, unknown))}; send {SHAPE}")
    kinds = [k for k in ("sentence", "prompt") if k in data]
    if len(kinds) != 1:
        raise RequestError(400, "send exactly one of sentence or prompt")
    kind, text = kinds[0], data[kinds[0]]
    if not isinstance(text, str) or not text.strip():
        raise RequestError(400, f"{kind} must be a non-empty string")
    if len(text) > MAX_SENTENCE_CHARS:
        raise RequestError(413, f"{kind} of {len(text)} characters; at most {MAX_SENTENCE_CHARS}")
    ablate = data.get("ablate", [])
    if not isinstance(ablate, list) or not all(isinstance(n, str) for n in ablate) or len(ablate) > MAX_ABLATED:
        raise RequestError(400, f"ablate must be a list of at most {MAX_ABLATED} names (strings)")
    beam = data.get("beam", 1)
    if isinstance(beam, bool) or not isinstance(beam, int) or not 1 <= beam <= MAX_PAGE_BEAM:
        raise RequestError(400, f"beam must be a whole number from 1 to {MAX_PAGE_BEAM}")
    if kind == "prompt" and beam != 1:
        raise RequestError(400, "a language model's prompt is continued greedily: send beam 1")
    return kind, text.strip(), tuple(sorted(set(n.strip() for n in ablate))), beam


def check_whatif(explainer: Explainer, kind: str, ablate: tuple[str, ...]) -> None:
    """Refuse, before it is queued, a request the loaded model cannot run (a RequestError)."""
    if explainer.loaded is None:
        raise RequestError(409, "no trained model is loaded: what-if experiments need one")
    explainer.check(kind)
    try:
        parse_interventions(explainer.loaded.model, ablate)
    except UserError as error:
        raise RequestError(400, str(error).replace("--ablate ", "", 1)) from None


def whatif_answer(explainer: Explainer, kind: str, text: str, ablate: tuple[str, ...], beam: int) -> bytes:
    """The rerun's walkthrough JSON (UTF-8)."""
    check_whatif(explainer, kind, ablate)
    model, tokenizer = explainer.loaded.model, explainer.loaded.tokenizer
    changes = Interventions(parse_interventions(model, ablate))
    try:
        if kind == "prompt":
            with changes:
                walk = explain_text(model, tokenizer, text, explainer.lm_new_tokens)
            payload = dict(walk_payload(walk), ablated=list(ablate), sentence=text)
        else:
            source_length = len(check_source(tokenizer, text, model.config.max_len))
            limit = max(1, min(model.config.max_len - 1, 2 * source_length + 8))  # as /api/explain bounds it
            options = explainer.decoding.but(beam=beam, max_new=limit)
            payload = walk_payload(explain_search(model, tokenizer, text, options, interventions=changes))
    except UserError as error:
        raise RequestError(400, str(error)) from None
    return to_json(payload).encode("utf-8")


def compute(explainer: Explainer, key: tuple) -> bytes:
    """The server pool's computation: a what-if key ("whatif", kind, text, names, beam), a why key ("why", tool,
    kind, text, corrupted, method; serve/why.py) or an /api/explain one."""
    if key[0] == "whatif":
        return whatif_answer(explainer, *key[1:])
    if key[0] == "why":
        return why_answer(explainer, *key[1:])
    return explainer.compute(*key)


def whatif_info(explainer: Explainer) -> dict:
    """For the page: every intervention name the loaded model allows (none without a model)."""
    model = explainer.loaded.model if explainer.loaded is not None else None
    return {"names": list(valid_interventions(model)) if model is not None else [], "max_beam": MAX_PAGE_BEAM}
