"""What the live page asks for, checked and computed: a seed example's or a sentence's walkthrough as JSON.

Requests are validated here (so the HTTP layer only maps `RequestError` to a 4xx answer). Running them
(a bounded worker pool, identical requests in flight computed once, recent answers kept) is the
server's job: `serve/pool.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from clearformer.errors import UserError
from clearformer.explain.html import to_json, walk_payload
from clearformer.limits import MAX_BODY_BYTES, MAX_SENTENCE_CHARS
from clearformer.tokenize import encode_source

CACHE_SIZE = 32  # answers the server keeps (serve/pool.py)
SHAPE = '{"sentence": "..."} or {"example": "..."}'

NO_MODEL_NOTICE = ("No trained model found, so only the seed examples are available. Train the toy model "
                   "with `clearformer train --preset toy-translate`, "
                   "then run `clearformer serve` again.")


class RequestError(Exception):
    """A request the server refuses: `status` is the 4xx code, the message says why in one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class LoadedModel:
    model: object
    tokenizer: object
    path: Path
    meta: dict


def parse_request(body: bytes) -> tuple[str, str]:
    """The JSON body {"sentence": "..."} or {"example": "..."} -> ("sentence" | "example", value)."""
    if len(body) > MAX_BODY_BYTES:
        raise RequestError(413, f"request body over {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise RequestError(400, f"request body must be JSON: {SHAPE}") from None
    if not isinstance(data, dict):
        raise RequestError(400, f"request body must be a JSON object: {SHAPE}")
    unknown = sorted(set(data) - {"sentence", "example"})
    if unknown:
        raise RequestError(400, f"unknown field(s) {', '.join(map(repr, unknown))}; send sentence or example")
    if len(data) != 1:
        raise RequestError(400, "send exactly one of sentence or example")
    (kind, value), = data.items()
    if not isinstance(value, str):
        raise RequestError(400, f"{kind} must be a string, not {type(value).__name__}")
    if not value.strip():
        raise RequestError(400, f"empty {kind}")
    if len(value) > MAX_SENTENCE_CHARS:
        raise RequestError(413, f"{kind} of {len(value)} characters; at most {MAX_SENTENCE_CHARS}")
    return kind, value.strip()


class Explainer:
    """Computes walkthrough JSON for the page: the seed examples and, with a model, any sentence."""

    def __init__(self, loaded: LoadedModel | None) -> None:
        from clearformer.explain.examples import EXAMPLES

        self.loaded = loaded
        self.examples = list(EXAMPLES)

    def info(self) -> dict:
        """What the page needs: the model (or None), the examples, and a notice when there is no model."""
        model = None
        if self.loaded is not None:
            config = self.loaded.model.config
            model = {"name": self.loaded.path.name, "d_model": config.d_model,
                     "n_heads": config.n_heads, "encoder_layers": config.n_encoder_layers,
                     "decoder_layers": config.n_decoder_layers, "max_len": config.max_len,
                     "vocab_size": len(self.loaded.tokenizer)}
        return {"live": True, "model": model, "examples": self.examples,
                "notice": None if model else NO_MODEL_NOTICE}

    def example_payload(self, name: str) -> dict:
        from clearformer.explain.examples import run_example

        if name not in self.examples:
            raise RequestError(404, f"unknown example {name!r}; choose one of: {', '.join(self.examples)}")
        return walk_payload(run_example(name)[0])

    def compute(self, kind: str, value: str) -> bytes:
        """The walkthrough JSON (UTF-8) of a parsed request; no lock, no cache (the server's pool has both)."""
        payload = self.example_payload(value) if kind == "example" else self._translate(value)
        return to_json(payload).encode("utf-8")

    def _translate(self, sentence: str) -> dict:
        from clearformer.explain.translation import explain_translation

        if self.loaded is None:
            raise RequestError(409, "no trained model is loaded: only the seed examples are available "
                                    "(train one with `clearformer train --preset toy-translate`)")
        model, tokenizer = self.loaded.model, self.loaded.tokenizer
        source_length = len(encode_source(tokenizer, sentence, model.config.source_eos))
        # A translation is rarely much longer than its source; the bound keeps an untrained model's
        # babbling (and its walkthrough, which grows with the square of the length) small.
        limit = max(1, min(model.config.max_len - 1, 2 * source_length + 8))
        try:
            return walk_payload(explain_translation(model, tokenizer, sentence, max_new_tokens=limit))
        except UserError as error:
            raise RequestError(400, str(error)) from None


def load(checkpoint: Path) -> LoadedModel:
    """A translation checkpoint for the server; a UserError (one line) if it is missing, damaged or an LM."""
    from clearformer.checkpoint import load_model

    model, tokenizer, meta = load_model(checkpoint)
    if model.config.n_encoder_layers == 0:
        raise UserError(f"{checkpoint}: a decoder-only language model; `clearformer serve` explains "
                        "translation (encoder-decoder) checkpoints")
    return LoadedModel(model, tokenizer, Path(checkpoint), meta)
