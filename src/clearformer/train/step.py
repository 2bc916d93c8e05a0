"""The training forward pass as one module: (src, <bos> y, y <eos>) -> summed label-smoothed loss.

Two things make it cheaper than `loss(model(src, tgt_in), tgt_out)` while computing the same value:
  * the output projection and the softmax over the vocabulary (the widest matrices of the model)
    run only on the target positions that hold a label, not on padding;
  * dropout sits where the paper puts it (section 5.4): on each sublayer's output and on the
    embedding + position sums. Dropout on attention weights and inside the feed-forward network
    (later tensor2tensor additions) are options, off by default: on a CPU, drawing those random
    masks costs about as much as the matrix products they follow.

Wrapping the model in this module lets DistributedDataParallel see the whole computation in one
`forward`, as it requires.
"""

from __future__ import annotations

import torch
from torch import nn

from clearformer.model.layers import FeedForward
from clearformer.train.loss import label_smoothed_loss


def place_dropout(model: nn.Module, attention: float, feed_forward: float) -> None:
    """Set the dropout on attention weights and on the feed-forward hidden layer of every layer.

    The model's `config.dropout` stays the rate of the residual and embedding dropout. Dropout
    is a training-time choice: it changes nothing in a saved checkpoint or at inference.
    """
    for module in model.modules():
        if isinstance(module, FeedForward):
            module.dropout.p = feed_forward
        elif isinstance(getattr(module, "dropout", None), float):  # multi-head and latent attention
            module.dropout = attention


class TranslationLoss(nn.Module):
    """model + label-smoothed cross-entropy over the non-pad target positions."""

    def __init__(self, model: nn.Module, smoothing: float) -> None:
        super().__init__()
        self.model = model
        self.smoothing = smoothing

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """src (batch, src_len), tgt_in / tgt_out (batch, tgt_len) ->
        (summed smoothed loss, summed nll, number of labels)."""
        pad_id = self.model.config.pad_id
        memory, src_mask = self.model.encode(src)
        hidden = self.model.decode(tgt_in, memory, src_mask)  # (batch, tgt_len, d_model)
        labelled = tgt_out != pad_id
        logits = self.model.project(hidden[labelled])  # (labels, vocab): no row for padding
        return label_smoothed_loss(logits, tgt_out[labelled], pad_id, self.smoothing)
