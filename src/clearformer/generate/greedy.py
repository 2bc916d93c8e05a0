"""Greedy autoregressive decoding: at each step take the most probable next token, until <eos>.

    <bos> -> y1 = argmax p(. | <bos>, x) -> y2 = argmax p(. | <bos> y1, x) -> ... -> <eos>

Batched over sentences: a sentence that produced <eos> (or reached its length limit) leaves the
batch, so finished sentences cost nothing at later steps.

Tracing (the explain view): with a `trace.Recorder` active, the encoder pass is recorded with
`recorder.step = None`, and the decoder pass that chooses generated token t (t = 0, 1, 2, ...)
with `recorder.step = t`; at each step the chosen ids are recorded as `generate.chosen`,
a (batch,) tensor in the original sentence order (<pad> for sentences already finished).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from clearformer import trace
from clearformer.generate.brevity import BrevityPenalty, BrevityRule
from clearformer.generate.constraints import PlaceholderConstraint
from clearformer.generate.state import Decoded, DecoderState, max_new_tokens

DEFAULT_BOS_ID = 2  # the WordTokenizer's order: <pad> <unk> <bos> <eos>
DEFAULT_EOS_ID = 3


@torch.inference_mode()
def greedy_decode(model, src_ids: torch.Tensor, bos_id: int = DEFAULT_BOS_ID, eos_id: int = DEFAULT_EOS_ID,
                  max_extra: int = 50, min_length: int = 0, max_new: int | None = None,
                  use_cache: bool = True, with_scores: bool = True,
                  placeholder_ids: Sequence[int] | None = None, brevity: BrevityRule | None = None) -> Decoded:
    """Translate a padded batch of source ids greedily.

    src_ids (batch, src_len), padded with config.pad_id -> `Decoded` with tokens (batch, steps).
    Each sentence may generate up to its source length + `max_extra` tokens (capped by the model's
    max_len; `max_new` replaces that limit). <eos> is forbidden before `min_length` tokens.
    `use_cache=False` recomputes the whole prefix every step (same tokens, slower).
    `with_scores=False` skips the log-probabilities (a pass over the vocabulary per step): scores
    are then left at 0. `placeholder_ids`: the tokenizer's placeholder pieces, each to be copied
    from the source exactly as often as it occurs there (`generate/constraints.py`). `brevity`: the
    penalty on ending shorter than the tokenizer's length ratio expects
    (`BrevityRule.for_tokenizer`, `generate/brevity.py`; None = none).
    """
    pad_id = model.config.pad_id
    recorder = trace.active()
    if recorder is not None:
        recorder.step = None
    memory, src_mask = model.encode(src_ids)
    batch = src_ids.shape[0]
    limits = max_new_tokens(src_ids, pad_id, max_extra, model.config.max_len, max_new)
    steps = int(limits.max())
    tokens = torch.full((batch, steps), pad_id, dtype=torch.long, device=src_ids.device)
    lengths = limits.clone()
    scores = torch.zeros(batch, dtype=torch.float32, device=src_ids.device)
    alive = torch.arange(batch, device=src_ids.device)  # original index of every row still decoding
    state = DecoderState(model, memory, src_mask, bos_id, use_cache)
    constraint = PlaceholderConstraint.for_batch(src_ids, placeholder_ids, eos_id, limits)
    short = BrevityPenalty.for_batch(model, src_ids, brevity)
    for t in range(steps):
        if recorder is not None:
            recorder.step = t
        logits = state.logits()
        if t < min_length:
            logits[:, eos_id] = float("-inf")
        if short is not None:
            logits[:, eos_id] += short.bonus(t, alive).to(logits.dtype)
        if constraint is not None:
            logits = constraint.mask(logits, t)
        chosen = logits.argmax(dim=-1)
        if constraint is not None:
            constraint.chose(chosen)
        if with_scores:
            # log p(chosen) = logit - logsumexp(logits): one pass less than a full log_softmax.
            best = logits.gather(1, chosen[:, None])[:, 0]
            scores.index_add_(0, alive, (best - torch.logsumexp(logits, dim=-1)).float())
        tokens[alive, t] = chosen
        if recorder is not None:
            full = torch.full((batch,), pad_id, dtype=torch.long, device=chosen.device)
            full[alive] = chosen
            trace.emit("generate", "chosen", full)
        ended = (chosen == eos_id) | (limits[alive] <= t + 1)
        if bool(ended.any()):
            lengths[alive[ended]] = t + 1
            keep = (~ended).nonzero()[:, 0]
            if keep.numel() == 0:
                break
            alive = alive[keep]
            state.append(chosen)
            state.select(keep, sentences=keep)
            if constraint is not None:
                constraint.select(keep)
        else:
            state.append(chosen)
    return Decoded(tokens, lengths, scores, eos_id)
