"""The encoder-decoder Transformer that joins the pieces, in the order data flows through it:

    src ids -> embed + positions -> encoder -> memory
    tgt ids -> embed + positions -> decoder (masked self-attention, cross-attention to memory)
            -> output projection -> logits  (softmax -> probabilities: the loss's, the search's, a view's)
"""

from __future__ import annotations

import torch
from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.attention import causal_mask, padding_mask
from clearformer.model.cache import DecoderCache
from clearformer.model.embedding import InputEmbedding
from clearformer.model.layers import Decoder, Encoder
from clearformer.record import trace
from clearformer.record.points import EmitsPoints


class OutputProjection(EmitsPoints, nn.Module):
    """Decoder states -> one score (logit) per target token: logits = h W^T + b.

    With tied embeddings W is the target embedding table itself (paper section 3.4).
    """

    POINTS = ("logits",)

    def __init__(self, d_model: int, vocab_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(d_model, vocab_size)
        nn.init.normal_(self.linear.weight, std=d_model**-0.5)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden (batch, tgt_len, d_model) -> logits (batch, tgt_len, vocab)."""
        logits = self.linear(hidden)
        logits = trace.emit(self, "logits", logits)  # a view shows softmax(logits) itself (explain/walkthrough.py)
        return logits

    def logits_of(self, hidden: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The logits of the target tokens `ids` (k,) only: hidden W[ids]^T + b[ids], (batch, tgt_len, k). What a
        lexical shortlist asks of the output layer (Marian computes only its candidates' rows); the search's
        slice of the projection (generate/shortlist.py) calls it."""
        bias = None if self.linear.bias is None else self.linear.bias.index_select(0, ids)
        return nn.functional.linear(hidden, self.linear.weight.index_select(0, ids), bias)


class Transformer(nn.Module):
    """The model of "Attention Is All You Need", built from one `ModelConfig`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_embed = InputEmbedding.from_config(c, c.src_vocab_size)
        self.tgt_embed = InputEmbedding.from_config(c, c.tgt_vocab_size, zero_start=c.zero_start)
        self.encoder = Encoder(c)
        self.decoder = Decoder(c)  # its self-attention as config.attention says (model/variants.py)
        self.output = OutputProjection(c.d_model, c.tgt_vocab_size)
        if c.tie_embeddings == "all":
            self.tgt_embed.tokens.weight = self.src_embed.tokens.weight
        if c.tie_embeddings in ("decoder", "all"):
            self.output.linear.weight = self.tgt_embed.tokens.weight
        trace.name_modules(self)

    # -- the data path, one step at a time --------------------------------------------------------

    def encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src_ids (batch, src_len) -> memory (batch, src_len, d_model), src_mask (batch, 1, 1, src_len)."""
        src_mask = padding_mask(src_ids, self.config.pad_id)
        memory = self.encoder(self.src_embed(src_ids), src_mask)
        return memory, src_mask

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor | None, src_mask: torch.Tensor,
               cache: DecoderCache | None = None, position: int = 0) -> torch.Tensor:
        """tgt_ids (batch, tgt_len) decoder input (shifted right), memory (batch, src_len, d_model)
        and src_mask (batch, 1, 1, src_len) from `encode` -> decoder states (batch, tgt_len, d_model).

        With a `cache` (from `new_cache`), tgt_ids holds only the new tokens, starting at absolute
        position `position`; the self-attention keys and values of earlier positions and the
        cross-attention keys and values of the source (after the first step memory may be None)
        come from the cache.
        """
        tgt_len = tgt_ids.shape[1]
        k_len = position + tgt_len if cache is not None else tgt_len
        self_mask = causal_mask(tgt_len, k_len, tgt_ids.device)
        # Target padding only ever follows the real tokens, so the causal mask already keeps real
        # queries off it; the padded query rows are ignored by the loss.
        x = self.tgt_embed(tgt_ids, offset=position)
        return self.decoder(x, memory, self_mask, src_mask, cache, position)

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        """decoder states (batch, tgt_len, d_model) -> logits (batch, tgt_len, tgt_vocab)."""
        return self.output(hidden)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: src_ids (batch, src_len), tgt_ids (batch, tgt_len) -> logits (batch, tgt_len, vocab)."""
        memory, src_mask = self.encode(src_ids)
        return self.project(self.decode(tgt_ids, memory, src_mask))

    def new_cache(self) -> DecoderCache:
        """An empty decoding cache (`model/cache.py`), filled by `decode` during incremental decoding."""
        return self.decoder.new_cache()

    # -- what the commands ask of any model (model/protocol.py; the GRU baseline answers them too) --

    def embedding_table(self, side: str) -> torch.Tensor | None:
        """The (vocab, d_model) token embeddings of the "source" or the "target" side."""
        return (self.src_embed if side == "source" else self.tgt_embed).tokens.weight

    def decoder_layers(self) -> nn.ModuleList:
        """The decoder's layers, in order (model/layered.py: what the why tools read)."""
        return self.decoder.layers

    def num_parameters(self) -> int:
        """Trainable parameters, each shared (tied) matrix counted once."""
        return sum(p.numel() for p in self.parameters())
