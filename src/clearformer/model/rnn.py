"""The baseline the Transformer replaced: a GRU encoder-decoder with attention.

    src ids -> embed -> bidirectional GRU -> memory (one annotation per source word)
    tgt ids -> embed -> GRU, started from tanh(W_init mean(memory))        (one step per word)
            -> Luong "general" attention over memory: a_t = softmax(h_t W_a memory^T)
            -> attentional state  h~_t = tanh(W_c [c_t ; h_t]),  c_t = a_t memory
            -> output projection -> logits

Bahdanau et al. (2015) encode with a bidirectional RNN; Luong et al. (2015) score with
h_t W_a m_s and combine context and state through W_c. Without Luong's "input feeding" the decoder
GRU does not read the previous attentional state, so teacher forcing runs it over the whole target
in one `nn.GRU` call - which still loops over the positions one after another inside: n sequential
steps where the Transformer's layers take one. That is what `clearformer claims 1` measures.

The model has the Transformer's interface (`encode`, `decode`, `project`, `forward`, `new_cache`
with its own `RecurrentCache`, `config`), so the project's trainer (`clearformer train --arch rnn`),
the searches of generate/ and the recorder drive it. The recorder sees the alignment as
`decoder.cross_attention.weights`, (batch, 1, tgt_len, src_len): one "head", which `explain` shows
as it shows the Transformer's cross-attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from clearformer.config import ConfigError, ModelConfig
from clearformer.model.attention import masked_softmax, padding_mask
from clearformer.model.embedding import TokenEmbedding
from clearformer.model.transformer import OutputProjection
from clearformer.record import trace
from clearformer.record.points import EmitsPoints


@dataclass
class RecurrentCache:
    """What the GRU decoder carries from one step to the next: state (batch, layers, d_model) after the
    last token, and the encoder's annotations memory (batch, src_len, d_model), kept at the first step.

    `reorder(index)` keeps rows `index` in that order; `source=False` leaves the memory in place (it
    depends only on a row's source: for a reorder within rows of one source), as `DecoderCache` does.
    """

    state: torch.Tensor | None = None
    memory: torch.Tensor | None = None

    def keep_memory(self, memory: torch.Tensor | None) -> torch.Tensor:
        """The memory kept at the first step (`memory` itself, then)."""
        if self.memory is None:
            self.memory = memory
        return self.memory

    def reorder(self, index: torch.Tensor, source: bool = True) -> None:
        if self.state is not None:
            self.state = self.state.index_select(0, index)
        if source and self.memory is not None:
            self.memory = self.memory.index_select(0, index)


class GRUEncoder(EmitsPoints, nn.Module):
    """Bidirectional GRU: each direction has d_model / 2 units, so an annotation is d_model wide."""

    POINTS = ("output",)  # the hook points it emits (record/points.py)

    def __init__(self, vocab_size: int, d_model: int, layers: int, dropout: float, pad_id: int) -> None:
        super().__init__()
        if d_model % 2:
            raise ConfigError(f"architecture='rnn' needs an even d_model (the bidirectional encoder's two halves), "
                              f"not {d_model}")
        self.embed = TokenEmbedding(vocab_size, d_model, scale=False, pad_id=pad_id)
        self.dropout = nn.Dropout(dropout)
        self.gru = nn.GRU(d_model, d_model // 2, num_layers=layers, batch_first=True, bidirectional=True,
                          dropout=dropout if layers > 1 else 0.0)

    def forward(self, src_ids: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """src_ids (batch, src_len), real (batch, src_len) bool -> memory (batch, src_len, d_model).

        Packing the padded batch makes the backward direction start at each sentence's last real
        word instead of at its padding; padded positions come back as zeros.
        """
        x = self.dropout(self.embed(src_ids))
        lengths = real.sum(dim=1).clamp(min=1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.gru(packed)
        memory, _ = pad_packed_sequence(out, batch_first=True, total_length=src_ids.shape[1])
        memory = trace.emit(self, "output", memory)
        return memory


class LuongAttention(EmitsPoints, nn.Module):
    """score(h_t, m_s) = h_t W_a m_s^T ("general"); h~_t = tanh(W_c [c_t ; h_t])."""

    POINTS = ("weights",)

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.w_a = nn.Linear(d_model, d_model, bias=False)
        self.w_c = nn.Linear(2 * d_model, d_model)

    def forward(self, states: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """states (batch, tgt_len, d_model), memory (batch, src_len, d_model), src_mask (batch, 1, 1, src_len)
        -> attentional states (batch, tgt_len, d_model)."""
        scores = self.w_a(states) @ memory.transpose(1, 2)  # (batch, tgt_len, src_len)
        weights = masked_softmax(scores, src_mask[:, 0])
        weights = trace.emit(self, "weights", weights[:, None])[:, 0]  # (batch, 1, tgt_len, src_len): one head
        context = weights @ memory  # (batch, tgt_len, d_model)
        return torch.tanh(self.w_c(torch.cat([context, states], dim=-1)))


class GRUDecoder(EmitsPoints, nn.Module):
    """GRU over the (shifted-right) target, Luong attention over the encoder's annotations."""

    POINTS = ("states", "output")

    def __init__(self, vocab_size: int, d_model: int, layers: int, dropout: float, pad_id: int) -> None:
        super().__init__()
        self.layers = layers
        self.embed = TokenEmbedding(vocab_size, d_model, scale=False, pad_id=pad_id)
        self.dropout = nn.Dropout(dropout)
        self.init_state = nn.Linear(d_model, d_model)
        self.gru = nn.GRU(d_model, d_model, num_layers=layers, batch_first=True,
                          dropout=dropout if layers > 1 else 0.0)
        self.cross_attention = LuongAttention(d_model)

    def first_state(self, memory: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """h_0 = tanh(W_init mean of the real annotations), every layer alike: (batch, layers, d_model)."""
        real = src_mask[:, 0, 0, :, None].to(memory.dtype)  # (batch, src_len, 1)
        mean = (memory * real).sum(dim=1) / real.sum(dim=1).clamp(min=1.0)
        return torch.tanh(self.init_state(mean))[:, None].expand(-1, self.layers, -1).contiguous()

    def forward(self, tgt_ids: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """tgt_ids (batch, tgt_len), state (batch, layers, d_model) before the first of them
        -> attentional states (batch, tgt_len, d_model), state after the last."""
        x = self.dropout(self.embed(tgt_ids))
        states, last = self.gru(x, state.transpose(0, 1).contiguous())  # one step per target position
        states = trace.emit(self, "states", states)
        hidden = self.dropout(self.cross_attention(states, memory, src_mask))
        hidden = trace.emit(self, "output", hidden)
        return hidden, last.transpose(0, 1)


class RNNSeq2Seq(nn.Module):
    """GRU encoder-decoder with attention, built from a `ModelConfig`.

    Read from the config: src/tgt_vocab_size, d_model (embedding and state width),
    n_encoder_layers / n_decoder_layers (stacked GRU layers), dropout, pad_id, max_len,
    tie_embeddings ("decoder": output projection = target embedding; "all": also the source's).
    Heads, d_ff, positions and norms do not apply: a recurrence knows the order by construction
    (config.RNN_FIELDS lists what is read). The config says architecture="rnn", so that a saved
    checkpoint loads back as this class (model/build.py's build_model).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.architecture != "rnn":
            raise ValueError(f"RNNSeq2Seq needs a config with architecture='rnn', not {config.architecture!r}")
        if config.n_encoder_layers < 1 or config.n_decoder_layers < 1:
            raise ConfigError("architecture='rnn' needs at least one encoder and one decoder layer")
        self.config = c = config
        self.encoder = GRUEncoder(c.src_vocab_size, c.d_model, c.n_encoder_layers, c.dropout, c.pad_id)
        self.decoder = GRUDecoder(c.tgt_vocab_size, c.d_model, c.n_decoder_layers, c.dropout, c.pad_id)
        self.output = OutputProjection(c.d_model, c.tgt_vocab_size)
        if c.tie_embeddings == "all":
            self.decoder.embed.weight = self.encoder.embed.weight
        if c.tie_embeddings in ("decoder", "all"):
            self.output.linear.weight = self.decoder.embed.weight
        trace.name_modules(self)

    def encode(self, src_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src_ids (batch, src_len) -> memory (batch, src_len, d_model), src_mask (batch, 1, 1, src_len)."""
        src_mask = padding_mask(src_ids, self.config.pad_id)
        return self.encoder(src_ids, src_mask[:, 0, 0]), src_mask

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor | None, src_mask: torch.Tensor,
               cache: RecurrentCache | None = None, position: int = 0) -> torch.Tensor:
        """tgt_ids (batch, tgt_len), memory (batch, src_len, d_model), src_mask (batch, 1, 1, src_len)
        -> attentional states (batch, tgt_len, d_model).

        With a `cache` (from `new_cache`) tgt_ids holds only the new tokens: the GRU state continues
        from the cache's, and the memory kept there at the first step is read (memory may then be
        None); `position` is not needed (the state carries it).
        """
        if cache is not None:
            memory = cache.keep_memory(memory)
        state = None if cache is None else cache.state
        if state is None:
            state = self.decoder.first_state(memory, src_mask)
        hidden, last = self.decoder(tgt_ids, memory, src_mask, state)
        if cache is not None:
            cache.state = last.contiguous()
        return hidden

    def project(self, hidden: torch.Tensor) -> torch.Tensor:
        """(batch, tgt_len, d_model) -> logits (batch, tgt_len, tgt_vocab)."""
        return self.output(hidden)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: src_ids (batch, src_len), tgt_ids (batch, tgt_len) -> logits (batch, tgt_len, vocab)."""
        memory, src_mask = self.encode(src_ids)
        return self.project(self.decode(tgt_ids, memory, src_mask))

    def new_cache(self) -> RecurrentCache:
        """An empty decoding cache: the GRU state and the encoder's annotations (`RecurrentCache`)."""
        return RecurrentCache()

    # -- what the commands ask of any model ------------------------------------------------------

    def embedding_table(self, side: str) -> torch.Tensor | None:
        """The (vocab, d_model) token embeddings of the "source" (encoder) or the "target" (decoder) side."""
        return (self.encoder if side == "source" else self.decoder).embed.weight

    def num_parameters(self) -> int:
        """Trainable parameters, each shared (tied) matrix counted once."""
        return sum(p.numel() for p in self.parameters())
