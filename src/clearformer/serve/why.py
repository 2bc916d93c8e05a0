"""The page's "why did it say that" views: POST /api/why runs the logit lens, activation patching or attribution.

    {"tool": "lens", "sentence": "She does not love you"}                 (or "prompt" on a language model)
    {"tool": "patch", "sentence": "She does not love you", "corrupted": "She does not love me"}
    {"tool": "attribute", "sentence": "She does not love you", "method": "integrated-gradients"}
    -> the JSON of `clearformer lens`, `patch` or `attribute --format json` (`explain/why.py`); attribute also
       carries "attention", the cross-attention scores, so the page can show both side by side.

The body is read and parsed as every route's (serve/requests.py: at most MAX_BODY_BYTES, one parser) and checked
here before it is queued; the answer is computed in the server's pool within the one answer bound.
"""

from __future__ import annotations

from clearformer.errors import UserError
from clearformer.explain.attribution import METHODS
from clearformer.explain.html import to_json
from clearformer.explain.why import attribute_report, lens_report, patch_report, require_layers
from clearformer.serve.explainer import Explainer
from clearformer.serve.requests import Field, RequestError, exactly_one, parse_body

TOOLS = ("lens", "patch", "attribute")
FIELDS = {name: Field("text") for name in ("tool", "sentence", "prompt", "corrupted", "method")}
SERVER_STEPS = 32  # integrated gradients' points on the server: a page answer in about a second on the toy model
SHAPE = '{"tool": "lens"|"patch"|"attribute", "sentence": "...", "corrupted": "..." (patch), "method": ... (attribute)}'


def parse_why(body: bytes) -> tuple[str, str, str, str, str]:
    """The JSON body -> (tool, kind "sentence" or "prompt", text, corrupted or "", method or ""), parsed by the
    server's one request parser (serve/requests.py)."""
    data = parse_body(body, FIELDS, SHAPE)
    tool = data.get("tool")
    if tool not in TOOLS:
        raise RequestError(400, f"tool must be one of {', '.join(TOOLS)}")
    kind = exactly_one(data, ("sentence", "prompt"))
    corrupted = data.get("corrupted", "") if tool == "patch" else ""
    if tool == "patch" and not corrupted:
        raise RequestError(400, "patch needs corrupted: the same sentence with a word changed")
    method = data.get("method", METHODS[0]) if tool == "attribute" else ""
    if tool == "attribute" and method not in METHODS:
        raise RequestError(400, f"method must be one of {', '.join(METHODS)}")
    return tool, kind, data[kind], corrupted, method


def check_why(explainer: Explainer, tool: str, kind: str) -> None:
    """Refuse, before it is queued, what the loaded model cannot answer."""
    if explainer.loaded is None:
        raise RequestError(409, "no trained model is loaded: the lens, patching and attribution need one")
    explainer.check(kind)
    if kind == "prompt" and tool != "lens":
        raise RequestError(400, f"{tool} explains a translation; a language model has the lens only")
    try:
        require_layers(explainer.loaded.model, tool)  # the GRU baseline has no layers to read: 400, not 500
    except UserError as error:
        raise RequestError(400, str(error)) from None


def why_answer(explainer: Explainer, tool: str, kind: str, text: str, corrupted: str, method: str) -> bytes:
    check_why(explainer, tool, kind)
    model, tokenizer, facts = explainer.loaded.model, explainer.loaded.tokenizer, explainer.loaded.facts
    try:
        if tool == "lens":
            report = lens_report(model, tokenizer, text, explainer.lm_new_tokens, facts)
        elif tool == "patch":
            report = patch_report(model, tokenizer, text, corrupted, facts)
        else:
            report = attribute_report(model, tokenizer, text, method, SERVER_STEPS, facts=facts)
            report["attention"] = (report["scores"] if method == "attention" else
                                   attribute_report(model, tokenizer, text, "attention", facts=facts)["scores"])
    except UserError as error:
        raise RequestError(400, str(error)) from None
    return to_json({"tool": tool, **report}).encode("utf-8")
