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

import torch

from clearformer.generate.brevity import BrevityPenalty
from clearformer.generate.constraints import DecodingRules
from clearformer.generate.options import DecodingOptions, SearchTokens, search_tokens
from clearformer.generate.state import Decoded, DecoderState, max_new_tokens
from clearformer.record import trace


def search_setup(model, src_ids: torch.Tensor, options: DecodingOptions | None,
                 tokens: SearchTokens | None) -> tuple[DecodingOptions, SearchTokens, torch.Tensor]:
    """The options (default: `DecodingOptions()`), the token facts (default: `search_tokens(model)`)
    and each sentence's length limit (batch,) for a search over src_ids (batch, src_len)."""
    options = DecodingOptions() if options is None else options
    tokens = search_tokens(model) if tokens is None else tokens
    limits = max_new_tokens(src_ids, tokens.pad_id, options.max_extra, model.config.max_len, options.max_new)
    return options, tokens, limits


@torch.inference_mode()
def greedy_decode(model, src_ids: torch.Tensor, options: DecodingOptions | None = None,
                  tokens: SearchTokens | None = None) -> Decoded:
    """Translate a padded batch of source ids greedily.

    src_ids (batch, src_len), padded with <pad> -> `Decoded` with tokens (batch, steps). From
    `options`: each sentence may generate up to its source length + `max_extra` tokens (capped by
    the model's max_len; `max_new` replaces that limit); <eos> is forbidden before `min_length`
    tokens; `use_cache=False` recomputes the whole prefix every step (same tokens, slower);
    `with_scores` sums the log-probabilities (a pass over the vocabulary per step; else scores stay
    0); `brevity`: the weight of the penalty on ending shorter than the length ratio expects
    (`generate/brevity.py`; 0 = none). `tokens`: <bos>, <eos>, the placeholder pieces (each copied
    from the source exactly as often as it occurs there, `generate/constraints.py`), the length ratio.
    """
    options, tokens, limits = search_setup(model, src_ids, options, tokens)
    pad_id, eos_id, min_length = tokens.pad_id, tokens.eos_id, options.min_length
    recorder = trace.active()
    if recorder is not None:
        recorder.step = None
    memory, src_mask = model.encode(src_ids)
    batch = src_ids.shape[0]
    steps = int(limits.max())
    output = torch.full((batch, steps), pad_id, dtype=torch.long, device=src_ids.device)
    lengths = limits.clone()
    scores = torch.zeros(batch, dtype=torch.float32, device=src_ids.device)
    alive = torch.arange(batch, device=src_ids.device)  # original index of every row still decoding
    state = DecoderState(model, memory, src_mask, tokens.bos_id, options.use_cache, options.compile)
    constraint = DecodingRules.for_batch(src_ids, tokens, limits)
    short = BrevityPenalty.for_batch(src_ids, tokens, options.brevity)
    for t in range(steps):
        if recorder is not None:
            recorder.step = t
        logits = state.logits()
        if t < min_length:
            logits[:, eos_id] = float("-inf")
        if short is not None:
            logits[:, eos_id] += short.bonus(t, alive).to(logits.dtype)
        # log p(chosen) = logit - logsumexp(logits): one pass less than a full log_softmax. Taken before
        # the rules mask tokens (they forbid, they do not renormalise), as beam search does.
        normaliser = torch.logsumexp(logits, dim=-1) if options.with_scores else None
        if constraint is not None:
            logits = constraint.mask(logits, t)
        chosen = logits.argmax(dim=-1)
        if constraint is not None:
            constraint.chose(chosen)
        if normaliser is not None:
            best = logits.gather(1, chosen[:, None])[:, 0]
            scores.index_add_(0, alive, (best - normaliser).float())
        output[alive, t] = chosen
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
    return Decoded(output, lengths, scores, eos_id)
