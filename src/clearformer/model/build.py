"""The factories: which attention module a layer gets, and which model a config builds.

    build_self_attention(config)  the decoder's self-attention: "mha" -> MultiHeadAttention (MHA, GQA
                                  and MQA through n_kv_heads), "mla" -> MultiHeadLatentAttention
    build_model(config)           architecture "rnn" -> RNNSeq2Seq (model/rnn.py); no encoder layers
                                  -> LanguageModel (model/lm.py); else the Transformer (model/transformer.py)

A new attention variant is a name in config.ATTENTIONS (with its sizes' dataclass), its module, and
one entry in SELF_ATTENTION here. The encoder's self-attention and the cross-attention stay the
paper's multi-head attention (model/layers.py builds them).
"""

from __future__ import annotations

from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.attention import MultiHeadAttention
from clearformer.model.latent import MultiHeadLatentAttention

# attention name (ModelConfig.attention) -> the module class, built from the config
SELF_ATTENTION: dict[str, type[nn.Module]] = {"mha": MultiHeadAttention, "mla": MultiHeadLatentAttention}


def build_self_attention(config: ModelConfig) -> nn.Module:
    """The masked self-attention of one decoder layer, as config.attention names it."""
    return SELF_ATTENTION[config.attention](config)


def build_model(config: ModelConfig) -> nn.Module:
    """The model a config describes: the Transformer, the decoder-only LanguageModel or the GRU baseline."""
    # Imported here: the models' layers import build_self_attention from this module.
    from clearformer.model.lm import LanguageModel
    from clearformer.model.rnn import RNNSeq2Seq
    from clearformer.model.transformer import Transformer

    if config.architecture == "rnn":
        return RNNSeq2Seq(config)
    if config.n_encoder_layers == 0:
        return LanguageModel(config)
    return Transformer(config)
