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

from clearformer.generate.graphs import GraphStep
from clearformer.generate.options import DecodingOptions, SearchTokens
from clearformer.generate.state import Decoded, start_search
from clearformer.record import trace


@torch.inference_mode()
def greedy_decode(model, src_ids: torch.Tensor, options: DecodingOptions | None = None,
                  tokens: SearchTokens | None = None, graph: GraphStep | None = None) -> Decoded:
    """Translate a padded batch of source ids greedily.

    src_ids (batch, src_len), padded with <pad> -> `Decoded` with tokens (batch, steps). From
    `options`: each sentence may generate up to its source length + `max_extra` tokens (capped by
    the model's max_len; `max_new` replaces that limit); `use_cache=False` recomputes the whole prefix
    every step (same tokens, slower); `with_scores` sums the log-probabilities (a pass over the
    vocabulary per step; else scores stay 0); the decoding rules (generate/rules.py): <eos> forbidden
    before `min_length` tokens, `brevity` (the weight of the penalty on ending shorter than the length
    ratio expects, `generate/brevity.py`; 0 = none), the repeat bound and the placeholder pieces (each
    copied from the source exactly as often as it occurs there, `generate/constraints.py`), as `tokens`
    says (<bos>, <eos>, the placeholder pieces, the length ratio). `graph`: the static step the translator
    built once for this model (generate/graphs.py), used where `options.compile` asks for it.
    """
    search = start_search(model, src_ids, options, tokens, graph)
    options, state, rules, decode, limits = search.options, search.state, search.rules, search.decode, search.limits
    pad_id, eos_id = search.tokens.pad_id, search.tokens.eos_id
    recorder = trace.active()
    batch = src_ids.shape[0]
    output = torch.full((batch, search.steps), pad_id, dtype=torch.long, device=src_ids.device)
    lengths = limits.clone()
    scores = torch.zeros(batch, dtype=torch.float32, device=src_ids.device)
    alive = torch.arange(batch, device=src_ids.device)  # original index of every row still decoding
    forced = torch.zeros(batch, dtype=torch.bool, device=src_ids.device)
    for t in range(search.steps):
        if recorder is not None:
            recorder.step = t
        logits = model.project(decode(*state.inputs())[:, -1:])[:, 0]  # (rows, vocab)
        # log p(chosen) = logit - logsumexp(logits): one pass less than a full log_softmax. Taken before
        # the rules (they forbid a token or move its score, they do not renormalise), as beam search does.
        normaliser = torch.logsumexp(logits, dim=-1) if options.with_scores else None
        logits = rules(logits, t)
        chosen = logits.argmax(dim=-1)
        rules.chose(chosen)
        forced_rows = rules.forced()
        if forced_rows is not None:
            forced[alive] |= forced_rows
        if normaliser is not None:
            best = logits.gather(1, chosen[:, None])[:, 0]
            scores.index_add_(0, alive, (best - normaliser).float())
        output[alive, t] = chosen
        if recorder is not None:
            full = torch.full((batch,), pad_id, dtype=torch.long, device=chosen.device)
            full[alive] = chosen
            trace.emit("generate", "chosen", full)
        ended = (chosen == eos_id) | (limits[alive] <= t + 1)
        state.append(chosen)
        if bool(ended.any()):
            lengths[alive[ended]] = t + 1
            keep = (~ended).nonzero()[:, 0]
            if keep.numel() == 0:
                break
            alive = alive[keep]
            state.select(keep, sentences=keep)
            rules.select(keep)
    return Decoded(output, lengths, scores, eos_id, forced)
