"""`build_model(config)`: the one place a config becomes a model.

    architecture "rnn"        -> RNNSeq2Seq (model/rnn.py), the GRU baseline
    no encoder layers         -> LanguageModel (model/lm.py), decoder-only
    otherwise                 -> Transformer (model/transformer.py), the paper's encoder-decoder

Checkpoints, training, imports and the claims all build their models here; which attention each
decoder layer gets is model/variants.py's choice.
"""

from __future__ import annotations

from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.lm import LanguageModel
from clearformer.model.rnn import RNNSeq2Seq
from clearformer.model.transformer import Transformer


def build_model(config: ModelConfig) -> nn.Module:
    """The model a config describes: the Transformer, the decoder-only LanguageModel or the GRU baseline."""
    if config.architecture == "rnn":
        return RNNSeq2Seq(config)
    if config.n_encoder_layers == 0:
        return LanguageModel(config)
    return Transformer(config)
