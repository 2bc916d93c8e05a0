"""Label-smoothed cross-entropy (paper section 5.4, epsilon_ls = 0.1).

For a label y among K classes the target distribution puts 1 - eps on y and spreads eps evenly
over all K classes (y included), the convention of `torch.nn.functional.cross_entropy(...,
label_smoothing=eps)`:

    loss = (1 - eps) * (-log p_y) + eps * mean_k(-log p_k)

Padding positions (label = pad_id) contribute nothing. The functions return *sums* over tokens
together with the token count, so that batches split over accumulation steps or processes can be
normalised by the token count of the whole step.
"""

from __future__ import annotations

import torch


def label_smoothed_loss(logits: torch.Tensor, labels: torch.Tensor, pad_id: int,
                        smoothing: float = 0.1) -> tuple[torch.Tensor, torch.Tensor, int]:
    """logits (batch, tgt_len, vocab), labels (batch, tgt_len) ->
    (summed smoothed loss, summed negative log-likelihood, number of non-pad labels).

    The nll sum is the unsmoothed loss (what perplexity is computed from).
    """
    loss, nll = label_smoothed_sums(logits, labels, pad_id, smoothing)
    return loss, nll, int((labels != pad_id).sum().item())


def label_smoothed_sums(logits: torch.Tensor, labels: torch.Tensor, pad_id: int,
                        smoothing: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """(summed smoothed loss, summed nll) of `label_smoothed_loss`, without counting the labels:
    counting asks the device for a number, which makes the host wait for the GPU (the training
    step knows its label count from the batch on the host instead)."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), not {smoothing}")
    log_probs = torch.log_softmax(logits.float(), dim=-1)  # (batch, tgt_len, vocab)
    # Gather and mask instead of selecting the non-pad rows: no copy of the (tokens, vocab) table.
    real = (labels != pad_id).to(log_probs.dtype)
    safe_labels = labels.clamp(min=0, max=log_probs.shape[-1] - 1)
    nll = -log_probs.gather(-1, safe_labels[..., None])[..., 0] * real
    uniform = -log_probs.mean(dim=-1) * real
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    return loss.sum(), nll.sum().detach()


def fused_label_smoothed_sums(logits: torch.Tensor, labels: torch.Tensor, pad_id: int,
                              smoothing: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """`label_smoothed_sums` through torch's fused cross_entropy (same convention: eps spread over all
    K classes, the label included), on the logits in their own dtype (bf16 under autocast: no fp32
    copy of the (tokens, vocab) logits is made here; the kernel keeps its own fp32 log-softmax, as
    autocast runs it in fp32). The nll sum is a second, gradient-free pass. Equal to
    `label_smoothed_sums` within float rounding (tests/train/test_shapes.py)."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"label smoothing must be in [0, 1), not {smoothing}")
    flat, targets = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    loss = torch.nn.functional.cross_entropy(flat, targets, ignore_index=pad_id, reduction="sum",
                                             label_smoothing=smoothing)
    with torch.no_grad():
        nll = torch.nn.functional.cross_entropy(flat, targets, ignore_index=pad_id, reduction="sum")
    return loss.float(), nll.float()
