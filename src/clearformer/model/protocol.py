"""The model contracts: what the commands, the searches and the views may ask of a model built by
model/build.py (no probing with getattr/hasattr). Two kinds, told apart by `isinstance`:

    EncoderDecoder   the Transformer (transformer.py) and the GRU baseline (rnn.py):
                     encode(src) -> memory, src_mask;  decode(tgt, memory, src_mask, cache, position) -> states;
                     project(states) -> logits
    DecoderOnly      the language model (lm.py): (ids, cache, position) -> logits

Shapes: src_ids (batch, src_len), tgt_ids / ids (batch, len), states (batch, len, d_model), logits
(batch, len, vocab). Both carry their `config` and a decoding cache (`new_cache`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

from clearformer.config import ModelConfig


@runtime_checkable
class EncoderDecoder(Protocol):
    config: ModelConfig

    def encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor | None, src_mask: torch.Tensor,
               cache=None, position: int = 0) -> torch.Tensor: ...

    def project(self, hidden: torch.Tensor) -> torch.Tensor: ...

    def new_cache(self): ...

    def embedding_table(self, side: str) -> torch.Tensor | None: ...

    def num_parameters(self) -> int: ...


@runtime_checkable
class DecoderOnly(Protocol):
    config: ModelConfig

    def __call__(self, ids: torch.Tensor, cache=None, position: int = 0) -> torch.Tensor: ...

    def hidden(self, ids: torch.Tensor, cache=None, position: int = 0) -> torch.Tensor: ...

    def new_cache(self): ...

    def embedding_table(self, side: str) -> torch.Tensor | None: ...

    def num_parameters(self) -> int: ...


def is_encoder_decoder(model) -> bool:
    """Whether `model` translates (reads a source) rather than continues a text."""
    return isinstance(model, EncoderDecoder)
