"""The page's what-if experiments: POST /api/whatif reruns a sentence (or a language model's prompt) with parts
of the model switched off, and with beam search.

    {"sentence": "I love you", "ablate": ["decoder.layers.0.cross_attention.head.2"], "beam": 4}
    {"prompt": "The dog", "ablate": ["decoder.layers.1.self_attention.head.0.uniform"]}
    -> the walkthrough JSON of the rerun (every step), with `ablated`, `original` (the translation without
       the interventions), `beam` (the search tree when beam > 1) and `sentence`

The names are checked against the loaded model (`clearformer.explain.interventions`) before the request is queued:
an unknown one is a 400 that lists the valid ones. The model itself is never changed (an intervention lives
in the worker's context only), so concurrent requests with other interventions cannot see each other's.
"""

from __future__ import annotations

from dataclasses import dataclass

from clearformer.errors import UserError
from clearformer.explain.html import to_json, walk_payload
from clearformer.explain.interventions import parse_interventions, valid_interventions
from clearformer.explain.lm import explain_text
from clearformer.explain.search import explain_search
from clearformer.record.trace import Interventions
from clearformer.serve.explainer import Explainer, page_limit
from clearformer.serve.requests import Field, RequestError, answer_budget, bounded_answer, exactly_one, parse_body
from clearformer.serve.why import why_answer

MAX_PAGE_BEAM = 8  # the widest tree the page draws
FIELDS = ("sentence", "prompt", "ablate", "beam")
SHAPE = '{"sentence": "...", "ablate": ["name", ...], "beam": K} (or "prompt" for a language model)'


WHATIF_FIELDS = {"sentence": Field("text"), "prompt": Field("text"), "ablate": Field("names"),
                 "beam": Field("integer", 1, MAX_PAGE_BEAM)}


def parse_whatif(body: bytes) -> tuple[str, str, tuple[str, ...], int]:
    """The JSON body -> (kind "sentence" or "prompt", its text, the intervention names, the beam)."""
    data = parse_body(body, WHATIF_FIELDS, SHAPE)
    kind = exactly_one(data, ("sentence", "prompt"))
    beam = data.get("beam", 1)
    if kind == "prompt" and beam != 1:
        raise RequestError(400, "a language model's prompt is continued greedily: send beam 1")
    return kind, data[kind], data.get("ablate", ()), beam


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
            options = explainer.decoding.but(beam=beam)
            payload = walk_payload(explain_search(model, tokenizer, text, options, interventions=changes,
                                                  max_new=page_limit(model),  # as /api/explain bounds it
                                                  facts=explainer.loaded.facts))
    except UserError as error:
        raise RequestError(400, str(error)) from None
    return to_json(payload).encode("utf-8")


@dataclass(frozen=True)
class ExplainKey:
    """POST /api/explain: a walkthrough of `value`, a "sentence", a "prompt" or an "example" (`kind`)."""

    kind: str
    value: str

    @property
    def what(self) -> str:  # the name its answer's bound goes by (serve/requests.py)
        return self.kind

    def answer(self, explainer: Explainer) -> bytes:
        return explainer.compute(self.kind, self.value)


@dataclass(frozen=True)
class WhatIfKey:
    """POST /api/whatif: `text` (a "sentence" or a "prompt") rerun with the interventions `ablate`, beam `beam`."""

    kind: str
    text: str
    ablate: tuple[str, ...]
    beam: int

    @property
    def what(self) -> str:
        return "whatif"

    def answer(self, explainer: Explainer) -> bytes:
        return whatif_answer(explainer, self.kind, self.text, self.ablate, self.beam)


@dataclass(frozen=True)
class WhyKey:
    """POST /api/why: `tool` on `text` (a "sentence" or a "prompt"), against `corrupted`, by `method` (serve/why.py)."""

    tool: str
    kind: str
    text: str
    corrupted: str
    method: str

    @property
    def what(self) -> str:
        return "why"

    def answer(self, explainer: Explainer) -> bytes:
        return why_answer(explainer, self.tool, self.kind, self.text, self.corrupted, self.method)


AnswerKey = ExplainKey | WhatIfKey | WhyKey  # what the server's pool computes and coalesces (serve/pool.py)


def compute(explainer: Explainer, key: AnswerKey) -> bytes:
    """The server pool's computation of one key (equal keys are computed once: frozen records compare by value),
    within the one bound every answer has (serve/requests.py)."""
    with answer_budget(key.what):
        answer = key.answer(explainer)
    return bounded_answer(answer, key.what)


def whatif_info(explainer: Explainer) -> dict:
    """For the page: every intervention name the loaded model allows (none without a model)."""
    model = explainer.loaded.model if explainer.loaded is not None else None
    return {"names": list(valid_interventions(model)) if model is not None else [], "max_beam": MAX_PAGE_BEAM}
