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
from clearformer.model.cache import DecoderCache, kv_cache_bytes_per_token
from clearformer.model.embedding import InputEmbedding
from clearformer.model.layers import Decoder, Encoder
from clearformer.record import trace


class OutputProjection(nn.Module):
    """Decoder states -> one score (logit) per target token: logits = h W^T + b.

    With tied embeddings W is the target embedding table itself (paper section 3.4).
    """

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


def translation_flops(config, src: torch.Tensor, tgt_out: torch.Tensor) -> float:
    """Training FLOPs (forward + backward) of the real tokens of one encoder-decoder batch:
    encoder weights per source token, decoder and output weights per target token, attention products."""
    d, f, vocab = config.d_model, config.d_ff, config.tgt_vocab_size
    src_len = (src != config.pad_id).sum(1).double()
    tgt_len = (tgt_out != config.pad_id).sum(1).double()
    encoder = config.n_encoder_layers * (4 * d * d + 2 * d * f) * src_len.sum()
    decoder = config.n_decoder_layers * (8 * d * d + 2 * d * f) * tgt_len.sum() + d * vocab * tgt_len.sum()
    # QK^T and weights x V: 2 products of (len_q x len_k x d) per layer.
    attention = 2 * d * (config.n_encoder_layers * (src_len**2).sum()
                         + config.n_decoder_layers * ((tgt_len**2).sum() + (tgt_len * src_len).sum()))
    return float(3 * 2 * (encoder + decoder + attention))


def summary(config: ModelConfig) -> str:
    """One line of the sizes and switches of a Transformer config (`clearformer info`)."""
    return (f"d_model={config.d_model}, heads={config.n_heads}, layers={config.n_encoder_layers}+"
            f"{config.n_decoder_layers}, d_ff={config.d_ff}, dropout={config.dropout}, vocab={config.tgt_vocab_size}, "
            f"tied embeddings={config.tie_embeddings}, positions={config.positional}, "
            f"{'pre' if config.norm_first else 'post'}-norm")


class Transformer(nn.Module):
    """The model of "Attention Is All You Need", built from one `ModelConfig`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = c = config
        self.src_embed = InputEmbedding.from_config(c, c.src_vocab_size)
        self.tgt_embed = InputEmbedding.from_config(c, c.tgt_vocab_size)
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

    # -- what the commands ask of any model (the GRU baseline answers them too) -------------------

    def embedding_table(self, side: str) -> torch.Tensor | None:
        """The (vocab, d_model) token embeddings of the "source" or the "target" side."""
        return (self.src_embed if side == "source" else self.tgt_embed).tokens.weight

    def training_flops(self, src: torch.Tensor, tgt_out: torch.Tensor) -> float:
        """Training FLOPs of the real tokens of one batch (`translation_flops`; train/mfu.py's MFU)."""
        return translation_flops(self.config, src, tgt_out)

    def decoder_layers(self) -> nn.ModuleList:
        """The decoder's layers, in order (model/layered.py: what the why tools read)."""
        return self.decoder.layers

    def summary(self) -> str:
        """One line for `clearformer info`."""
        return summary(self.config)

    def kv_cache_bytes(self) -> dict | None:
        """The decoding cache's bytes per token by formula (`model/cache.py`)."""
        return kv_cache_bytes_per_token(self.config)

    def num_parameters(self) -> int:
        """Trainable parameters, each shared (tied) matrix counted once."""
        return sum(p.numel() for p in self.parameters())
