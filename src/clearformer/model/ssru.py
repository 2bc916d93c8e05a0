"""The Simpler Simple Recurrent Unit (SSRU): a decoder layer's recurrence, where the paper has masked self-attention.

Kim et al., "From Research to Production and Back: Ludicrously Fast Neural Machine Translation"
(WNGT 2019), replace each decoder layer's self-attention by a recurrence with no matrix on the state:

    f_t = sigmoid(x_t W_f + b_f)                 the forget gate      (batch, d_model)
    c_t = f_t * c_{t-1} + (1 - f_t) * (x_t W)     the cell             (batch, d_model), c_{-1} = 0
    h_t = ReLU(c_t)                               the output

W has no bias. It is the decoder layer's autoregressive sublayer (the one that reads the earlier outputs:
`ModelConfig.autoregressive_layer="ssru"`), built in the layer's `recurrence` slot, not its
`self_attention` one, which stays empty: it attends to nothing. The layer around it is the
Transformer's (model/layers.py): Add & Norm after it, then cross-attention and the feed-forward
network. Marian calls it `dec-cell: ssru` (`transformer-decoder-autoreg: rnn`); Firefox Translations'
"tiny" students decode with it. A decoding
step reads one vector per row, the previous cell (`RecurrentCache`, model/cache.py), instead of every
earlier key and value: the cost of a step does not grow with the output.

Time runs in a loop (the recurrence is sequential: each cell needs the one before); both inputs'
products are computed for all positions at once. Under a recorder each call records `candidate` (x W),
`forget_gate`, `cell` and `relu_cell` (the output), each (batch, t, d_model), as
`decoder.layers.N.recurrence.cell` and so on; while decoding, one call per step (t = 1), as every other
step of the decoder.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.cache import RecurrentCache
from clearformer.record import trace
from clearformer.record.points import EmitsPoints

# A run saved when the SSRU sat in the decoder layer's `self_attention` slot names its tensors
# decoder.layers.N.self_attention.w / .w_f; no attention has a `w` or `w_f` (theirs are w_q, w_k, w_v, w_o).
OLD_SLOT = re.compile(r"^((?:.+\.)?decoder\.layers\.\d+\.)self_attention\.(w|w_f)\.")


def recurrence_names(tensors: dict) -> dict:
    """A saved state dict with the SSRU's tensors under today's names (`...recurrence.w`, `...recurrence.w_f`):
    runs imported before the recurrence had its own slot still load (store/checkpoint.py reads through this)."""
    return {OLD_SLOT.sub(r"\1recurrence.\2.", name): tensor for name, tensor in tensors.items()}


class SSRU(EmitsPoints, nn.Module):
    """The SSRU, called as the decoder's self-attention modules are (model/variants.py), so the layer runs
    either as its autoregressive sublayer."""

    POINTS = ("candidate", "forget_gate", "cell", "relu_cell")  # the hook points it emits (record/points.py)

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d = config.d_model
        self.w = nn.Linear(d, d, bias=False)  # x W: the candidate cell
        self.w_f = nn.Linear(d, d)  # x W_f + b_f: the forget gate's pre-activation

    def new_cache(self) -> RecurrentCache:
        """An empty cache: the cell starts at zero (`model/cache.py`)."""
        return RecurrentCache()

    def forward(self, query: torch.Tensor, memory: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                cache: RecurrentCache | None = None, position: int = 0) -> torch.Tensor:
        """query (batch, q_len, d_model) -> (batch, q_len, d_model).

        `mask` is ignored: a recurrence sees only the past by construction. With a `cache` the cell
        continues from the previous call's last cell (`position` > 0) and the new last cell is stored.
        """
        if memory is not None:
            raise ValueError("the SSRU is a recurrence over the decoder's own outputs: it reads no memory")
        candidate = trace.emit(self, "candidate", self.w(query))
        gate = trace.emit(self, "forget_gate", torch.sigmoid(self.w_f(query)))
        previous = None if cache is None else cache.cell
        if previous is None:
            previous = torch.zeros_like(candidate[:, 0])
        cells = []
        for t in range(query.shape[1]):
            previous = gate[:, t] * previous + (1 - gate[:, t]) * candidate[:, t]
            cells.append(previous)
        cell = trace.emit(self, "cell", torch.stack(cells, dim=1))
        if cache is not None:
            cache.store(cell[:, -1])
        return trace.emit(self, "relu_cell", torch.relu(cell))
