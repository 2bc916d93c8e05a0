"""The page's "why did it say that" views: POST /api/why runs the logit lens, activation patching or attribution.

    {"tool": "lens", "sentence": "She does not love you"}                 (or "prompt" on a language model)
    {"tool": "patch", "sentence": "She does not love you", "corrupted": "She does not love me"}
    {"tool": "attribute", "sentence": "She does not love you", "method": "integrated-gradients"}
    -> the JSON of `clearformer lens`, `patch` or `attribute --format json` (`explain/why.py`); attribute also
       carries "attention", the cross-attention scores, so the page can show both side by side.

The body is read as /api/explain's (`app.bounded_body`: at most MAX_BODY_BYTES) and checked here before it is
queued; the answer is computed in the server's bounded pool, as every explanation is.
"""

from __future__ import annotations

import json

from clearformer.errors import UserError
from clearformer.explain.attribution import METHODS
from clearformer.explain.html import to_json
from clearformer.explain.why import attribute_report, lens_report, patch_report
from clearformer.limits import MAX_BODY_BYTES, MAX_SENTENCE_CHARS
from clearformer.serve.explainer import Explainer, RequestError

TOOLS = ("lens", "patch", "attribute")
FIELDS = ("tool", "sentence", "prompt", "corrupted", "method")
SERVER_STEPS = 32  # integrated gradients' points on the server: a page answer in about a second on the toy model
SHAPE = '{"tool": "lens"|"patch"|"attribute", "sentence": "...", "corrupted": "..." (patch), "method": ... (attribute)}'


def text_field(data: dict, name: str) -> str:
    text = data[name]
    if not isinstance(text, str) or not text.strip():
        raise RequestError(400, f"{name} must be a non-empty string")
    if len(text) > MAX_SENTENCE_CHARS:
        raise RequestError(413, f"{name} of {len(text)} characters; at most {MAX_SENTENCE_CHARS}")
    return text.strip()


def parse_why(body: bytes) -> tuple[str, str, str, str, str]:
    """The JSON body -> (tool, kind "sentence" or "prompt", text, corrupted or "", method or "")."""
    if len(body) > MAX_BODY_BYTES:
        raise RequestError(413, f"request body over {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RequestError(400, f"request body must be JSON: {SHAPE}") from None
    if not isinstance(data, dict):
        raise RequestError(400, f"request body must be a JSON object: {SHAPE}")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RequestError(400, f"unknown field(s) {', '.join(map(repr, unknown))}; send {SHAPE}")
    tool = data.get("tool")
    if tool not in TOOLS:
        raise RequestError(400, f"tool must be one of {', '.join(TOOLS)}")
    kinds = [k for k in ("sentence", "prompt") if k in data]
    if len(kinds) != 1:
        raise RequestError(400, "send exactly one of sentence or prompt")
    kind, text = kinds[0], text_field(data, kinds[0])
    corrupted = text_field(data, "corrupted") if tool == "patch" and "corrupted" in data else ""
    if tool == "patch" and not corrupted:
        raise RequestError(400, "patch needs corrupted: the same sentence with a word changed")
    method = data.get("method", METHODS[0]) if tool == "attribute" else ""
    if tool == "attribute" and method not in METHODS:
        raise RequestError(400, f"method must be one of {', '.join(METHODS)}")
    return tool, kind, text, corrupted, method


def check_why(explainer: Explainer, tool: str, kind: str) -> None:
    """Refuse, before it is queued, what the loaded model cannot answer."""
    if explainer.loaded is None:
        raise RequestError(409, "no trained model is loaded: the lens, patching and attribution need one")
    explainer.check(kind)
    if kind == "prompt" and tool != "lens":
        raise RequestError(400, f"{tool} explains a translation; a language model has the lens only")


def why_answer(explainer: Explainer, tool: str, kind: str, text: str, corrupted: str, method: str) -> bytes:
    check_why(explainer, tool, kind)
    model, tokenizer = explainer.loaded.model, explainer.loaded.tokenizer
    try:
        if tool == "lens":
            report = lens_report(model, tokenizer, text, explainer.lm_new_tokens)
        elif tool == "patch":
            report = patch_report(model, tokenizer, text, corrupted)
        else:
            report = attribute_report(model, tokenizer, text, method, SERVER_STEPS)
            report["attention"] = (report["scores"] if method == "attention" else
                                   attribute_report(model, tokenizer, text, "attention")["scores"])
    except UserError as error:
        raise RequestError(400, str(error)) from None
    return to_json({"tool": tool, **report}).encode("utf-8")
