"""What the why tools (`lens`, `patch`, `attribute`, POST /api/why) ask of a model: a stack of residual layers.

The logit lens reads each decoder layer's output, activation patching copies layer and head outputs,
attribution follows the gradient through the token embeddings into those layers. The Transformer
(transformer.py) and the decoder-only language model (lm.py) are built of such layers and implement
`LayeredModel`; the GRU baseline (rnn.py: a recurrence, no residual stream, no heads) does not. The tools
ask with `isinstance(model, LayeredModel)` (a `typing.Protocol`), never by probing attribute names.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import nn


@runtime_checkable
class LayeredModel(Protocol):
    def decoder_layers(self) -> nn.ModuleList:
        """The decoder's layers, in order: what the logit lens reads after each."""
        ...


ARCHITECTURE_NAMES = {"rnn": "the GRU baseline (train --arch rnn), a recurrence without layers to read"}


def model_kind(model) -> str:
    """A model named as a user knows it: by its config's architecture."""
    architecture = model.config.architecture
    return ARCHITECTURE_NAMES.get(architecture, f"a model of architecture {architecture!r}")
