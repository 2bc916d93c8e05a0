"""What the live page asks for, checked and computed: a seed example's, a sentence's or a prompt's walkthrough.

A translation model explains {"sentence": ...} (`explain_translation`, as `clearformer explain`); a language
model explains {"prompt": ...}, continued by a few greedy tokens (`lm.explain.explain_text`, as
`clearformer lm explain`); the seed examples are always there.

Requests are validated here, by the parser every route shares (serve/requests.py), so the HTTP layer
only maps `RequestError` to a 4xx answer. Running them
(a bounded worker pool, identical requests in flight computed once, recent answers kept) is the
server's job: `serve/pool.py`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from clearformer.errors import UserError
from clearformer.explain.examples import EXAMPLES, run_example
from clearformer.explain.html import to_json, walk_payload
from clearformer.explain.lm import explain_text
from clearformer.explain.search import explain_search
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.layout import for_decoding
from clearformer.generate.options import DecodingOptions
from clearformer.generate.source import prepare_sources
from clearformer.generate.translator import PyTorchTranslator
from clearformer.limits import (
    SERVER_LM_NEW_TOKENS,
)
from clearformer.load import load_decoding_facts, load_model
from clearformer.serve.requests import (
    Field,
    RequestError,
    answer_estimate,
    bounded_answer,
    check_estimate,
    exactly_one,
    parse_body,
)

SHAPE = '{"sentence": "..."}, {"prompt": "..."} or {"example": "..."}'
FIELDS = ("sentence", "prompt", "example")

NO_MODEL_NOTICE = ("No trained model is loaded (--seeds-only), so only the seed examples are available. Without "
                   "--seeds-only, `clearformer serve` loads your latest run (train one with `clearformer train "
                   "--preset toy-translate`), or else the lessons' toy model, trained once on first use.")


@dataclass
class LoadedModel:
    model: object
    tokenizer: object
    path: Path
    meta: dict
    facts: DecodingFacts = NO_FACTS  # the run's decoding facts (decoding.json: generate/facts.py)

    @property
    def kind(self) -> str:
        """"lm" for a decoder-only language model, "translation" for an encoder-decoder."""
        return "lm" if self.model.config.n_encoder_layers == 0 else "translation"

    @functools.cached_property
    def translator(self) -> PyTorchTranslator:
        """The one translator (generate/translator.py) the LibreTranslate API calls: opened once, on this model, as
        every command opens it (`PyTorchTranslator.open`: the shortlist's slice where the run has one)."""
        return PyTorchTranslator.open(self.model, self.tokenizer, self.path, facts=self.facts)


REQUEST_FIELDS = {name: Field("text") for name in FIELDS}


def parse_request(body: bytes) -> tuple[str, str]:
    """The JSON body {"sentence": "..."}, {"prompt": "..."} or {"example": "..."} -> (its field, value)."""
    data = parse_body(body, REQUEST_FIELDS, SHAPE)
    kind = exactly_one(data, FIELDS)
    return kind, data[kind]


class Explainer:
    """Computes walkthrough JSON for the page: the seed examples and, with a model, any sentence (or prompt)."""

    def __init__(self, loaded: LoadedModel | None, lm_new_tokens: int = SERVER_LM_NEW_TOKENS,
                 decoding: DecodingOptions | None = None) -> None:
        self.loaded = loaded
        self.examples = list(EXAMPLES)
        self.lm_new_tokens = lm_new_tokens
        self.decoding = (decoding or DecodingOptions()).check()  # how a sentence is translated

    def info(self) -> dict:
        """What the page needs: the model (or None) and its kind, the examples, a notice when there is no model."""
        model = None
        if self.loaded is not None:
            config = self.loaded.model.config
            model = {"name": self.loaded.path.name, "kind": self.loaded.kind, "d_model": config.d_model,
                     "n_heads": config.n_heads, "encoder_layers": config.n_encoder_layers,
                     "decoder_layers": config.n_decoder_layers, "max_len": config.max_len,
                     "vocab_size": len(self.loaded.tokenizer)}
            if self.loaded.kind == "lm":
                model.update(attention=config.attention, positional=config.positional,
                             max_new_tokens=self.lm_new_tokens)
        return {"live": True, "model": model, "examples": self.examples,
                "notice": None if model else NO_MODEL_NOTICE}

    def check(self, kind: str) -> None:
        """Refuse, before it is queued, a request the loaded model cannot answer (a RequestError)."""
        wanted = {"lm": "prompt", "translation": "sentence"}.get(self.loaded.kind if self.loaded else "", "")
        if kind in ("sentence", "prompt") and wanted and kind != wanted:
            what = "a language model" if wanted == "prompt" else "a translation model"
            raise RequestError(400, f'this server holds {what}: send {{"{wanted}": "..."}}, not {kind}')

    def example_payload(self, name: str) -> dict:
        if name not in self.examples:
            raise RequestError(404, f"unknown example {name!r}; choose one of: {', '.join(self.examples)}")
        return walk_payload(run_example(name)[0])

    def compute(self, kind: str, value: str) -> bytes:
        """The walkthrough JSON (UTF-8) of a parsed request; no lock, no cache (the server's pool has both)."""
        self.check(kind)
        if kind == "example":
            payload = self.example_payload(value)
        elif kind == "prompt":
            payload = self._continue(value)
        else:
            payload = self._translate(value)
        return bounded_answer(to_json(payload).encode("utf-8"), kind)

    def estimate(self, kind: str, text: str, beam: int = 1) -> None:
        """Refuse (413), before any work, a request whose answer is surely over the bound
        (serve/requests.py: layers x tokens x d_model, and the beam); a 400 for a source the model refuses."""
        if self.loaded is None or kind not in ("sentence", "prompt"):
            return
        model, tokenizer = self.loaded.model, self.loaded.tokenizer
        try:
            if kind == "sentence":  # the one input path: a paragraph's pieces, each checked; one is shown
                pieces = prepare_sources(tokenizer, [text], model.config.max_len, allow_empty=False)
                tokens = min(len(ids) for ids in pieces.sources)
            else:
                tokens = len(tokenizer.encode(text)) + self.lm_new_tokens
        except UserError as error:
            raise RequestError(400, str(error)) from None
        check_estimate(answer_estimate(model.config, tokens, beam), kind)

    def _continue(self, prompt: str) -> dict:
        """A language model continuing `prompt` by `lm_new_tokens` greedy tokens: `lm explain`'s walkthrough."""
        if self.loaded is None:
            raise RequestError(409, "no trained model is loaded: only the seed examples are available "
                                    "(train a language model with `clearformer lm train`)")
        try:
            return walk_payload(explain_text(self.loaded.model, self.loaded.tokenizer, prompt, self.lm_new_tokens))
        except UserError as error:
            raise RequestError(400, str(error)) from None

    def _translate(self, sentence: str) -> dict:
        """`explain`'s walkthrough of `sentence`, read as `translate` reads it (a paragraph: its first sentence
        shown, the whole translated: `explain_search`)."""
        if self.loaded is None:
            raise RequestError(409, "no trained model is loaded: only the seed examples are available "
                                    "(train one with `clearformer train --preset toy-translate`)")
        model, tokenizer = self.loaded.model, self.loaded.tokenizer
        try:
            walk = explain_search(model, tokenizer, sentence, self.decoding, max_new=page_limit(model),
                                  facts=self.loaded.facts)
        except UserError as error:
            raise RequestError(400, str(error)) from None
        return walk_payload(walk)


def page_limit(model):
    """The tokens a walkthrough on the page may generate, from its source's length: a translation is rarely much
    longer than its source; the bound keeps an untrained model's babbling (and its walkthrough, which grows with
    the square of the length) small."""
    return lambda source_length: max(1, min(model.config.max_len - 1, 2 * source_length + 8))


def load(checkpoint: Path) -> LoadedModel:
    """A translation or language-model checkpoint for the server; a UserError (one line) if it is missing or
    damaged. An MLA language model shows its up-projected keys and values (`lm explain`'s default path)."""
    model, tokenizer, meta = load_model(checkpoint)
    # Decoded as the commands decode it (generate/layout.py), once, here: the page and the API share it.
    loaded = LoadedModel(for_decoding(model), tokenizer, Path(checkpoint), meta,
                         load_decoding_facts(checkpoint, tokenizer))
    if loaded.kind == "lm":
        loaded.model.set_mla_path(False)
    return loaded
