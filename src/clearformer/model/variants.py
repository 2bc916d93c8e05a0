"""The attention variants a decoder layer can get: ModelConfig.attention -> the module that implements it.

    "mha"  MultiHeadAttention (model/attention.py): the paper's, and GQA / MQA through n_kv_heads
    "mla"  MultiHeadLatentAttention (model/latent.py): DeepSeek-V2's latent key/value cache

A new variant is a name in config.ATTENTIONS (with a dataclass for its own sizes), its module (built
from the config, with MultiHeadAttention's call signature), and one entry in SELF_ATTENTION here.
The encoder's self-attention and the cross-attention stay the paper's (model/layers.py). A decoder
layer that reads its earlier outputs by a recurrence instead (config.autoregressive_layer="ssru",
model/ssru.py) has no self-attention at all: model/layers.py builds the SSRU in its place.
"""

from __future__ import annotations

from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.attention import MultiHeadAttention
from clearformer.model.latent import MultiHeadLatentAttention

SELF_ATTENTION: dict[str, type[nn.Module]] = {"mha": MultiHeadAttention, "mla": MultiHeadLatentAttention}


def build_self_attention(config: ModelConfig) -> nn.Module:
    """The masked self-attention of one decoder layer, as config.attention names it."""
    return SELF_ATTENTION[config.attention](config)
