"""The decoder-only (GPT-style) language model: the Transformer's decoder without cross-attention.

    ids -> embed (+ positions) -> N x [masked self-attention, feed-forward] -> output projection
        -> logits (one score per vocabulary token for the NEXT token at every position)

Every position may look only at itself and earlier positions (the causal mask), so one forward
pass trains next-token prediction at all positions at once. The self-attention is chosen by the
config: MHA, GQA (n_kv_heads), MQA (n_kv_heads=1) or MLA (attention="mla").
"""

from __future__ import annotations

import torch
from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.attention import causal_mask
from clearformer.model.cache import DecoderCache
from clearformer.model.embedding import InputEmbedding
from clearformer.model.latent import MultiHeadLatentAttention
from clearformer.model.layers import Decoder
from clearformer.model.transformer import OutputProjection
from clearformer.record import trace


class LanguageModel(nn.Module):
    """A causal language model built from one `ModelConfig` with n_encoder_layers == 0.

    Vocabulary size is config.tgt_vocab_size. Trace names: `embed.*`, `decoder.layers.<i>.*`,
    `output.*`.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.embed = InputEmbedding.from_config(c, c.tgt_vocab_size)
        self.decoder = Decoder(c, cross_attention=False)  # self-attention as config.attention says
        self.output = OutputProjection(c.d_model, c.tgt_vocab_size)
        if c.tie_embeddings != "none":
            self.output.linear.weight = self.embed.tokens.weight
        trace.name_modules(self)

    def hidden(self, ids: torch.Tensor, cache: DecoderCache | None = None, position: int = 0) -> torch.Tensor:
        """ids (batch, seq) -> final states (batch, seq, d_model).

        With a `cache` (from `new_cache`), ids are only the new tokens, the first at absolute
        `position`; earlier keys/values (or MLA latents) come from the cache.
        """
        seq = ids.shape[1]
        mask = causal_mask(seq, position + seq if cache is not None else seq, ids.device)
        return self.decoder(self.embed(ids, offset=position), None, mask, None, cache, position)

    def forward(self, ids: torch.Tensor, cache: DecoderCache | None = None, position: int = 0) -> torch.Tensor:
        """ids (batch, seq) -> logits (batch, seq, vocab): row t scores the token at t + 1."""
        return self.output(self.hidden(ids, cache, position))

    def new_cache(self) -> DecoderCache:
        """An empty decoding cache (`model/cache.py`): the layers' self-attention caches, filled while decoding."""
        return self.decoder.new_cache()

    def set_mla_path(self, absorb: bool) -> None:
        """MLA layers: True = absorbed (attend in latent space), False = naive; the same numbers."""
        for module in self.modules():
            if isinstance(module, MultiHeadLatentAttention):
                module.absorb = bool(absorb)

    def embedding_table(self, side: str) -> torch.Tensor | None:
        """The (vocab, d_model) token embeddings: "target" (the one vocabulary); None for "source" (no encoder)."""
        return self.embed.tokens.weight if side == "target" else None

    def decoder_layers(self) -> nn.ModuleList:
        """The decoder's layers, in order (model/layered.py: what the why tools read)."""
        return self.decoder.layers

    def num_parameters(self) -> int:
        """Trainable parameters, a tied matrix counted once."""
        return sum(p.numel() for p in self.parameters())
