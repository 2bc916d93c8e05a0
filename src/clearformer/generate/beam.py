"""Beam search with the length penalty of the paper (GNMT's, Wu et al. 2016).

Each sentence keeps the `beam` most probable prefixes; at each step every prefix is extended by
every token, and the best `beam` extensions that do not end in <eos> go on. Extensions that end
in <eos> (among the best `beam`) are finished hypotheses, scored

    score = log p(y | x) / lp(|y|),    lp(n) = ((5 + n) / 6) ** alpha

(|y| counts <eos>; alpha = 0 gives the plain sum of log-probabilities). Only the best finished
hypothesis of each sentence is kept. A sentence is done when it reaches its length limit (its
surviving beams are then scored as finished) or when no surviving beam can still beat its best
finished hypothesis (early stopping). Two rules for "can still beat", `stop=`:

* "current" (the default): compare with the best beam scored at the current length, s / lp(t),
  as Transformers does by default (`early_stopping=False`). With alpha = 0 this is exact, since
  log-probabilities only fall as a prefix grows; with alpha > 0 a longer continuation can still
  score higher, so it may stop too early, in favour of short outputs.
* "bound": a beam's log-probability s only falls as it grows, and s / lp(n) is largest at the
  longest length the sentence allows, so no continuation of the best beam can beat s / lp(limit).
  Stopping once the best finished hypothesis reaches that bound loses nothing the beams could
  still find, at the cost of more steps (BLEU and time against "current": BENCHMARKS.md,
  `benchmarks/beam_stopping.py`).

Batched over sentences x beams: rows are ordered sentence-major, finished sentences leave the
batch, and the decoder self-attention cache follows the beams by one `reorder` per step.
Step 0 runs once per sentence (every beam starts from the same <bos>), and the model's cache
(`model/cache.py`) is then expanded to the beams: the cross-attention keys and values, computed once
per sentence at step 0, are repeated to its beams then and left in place by the later reorders
among them (`DecoderState.select`).
"""

from __future__ import annotations

import torch

from clearformer.generate.brevity import BrevityPenalty
from clearformer.generate.constraints import DecodingRules
from clearformer.generate.greedy import search_setup
from clearformer.generate.options import DEFAULT_ALPHA, STOP_RULES, DecodingOptions, SearchTokens
from clearformer.generate.state import Decoded, DecoderState
from clearformer.record import trace

__all__ = ["DEFAULT_ALPHA", "STOP_RULES", "beam_search", "length_penalty"]


def length_penalty(length: int | float | torch.Tensor, alpha: float):
    """GNMT length penalty lp(n) = ((5 + n) / 6) ** alpha; lp(1) = 1 for every alpha."""
    return ((5.0 + length) / 6.0) ** alpha


def candidates(logits: torch.Tensor, beam_scores: torch.Tensor, beam: int, blocked: int | None = None,
               constraint: DecodingRules | None = None,
               eos_bonus: tuple[int, torch.Tensor] | None = None, t: int | None = None
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The best 2 x beam extensions of each sentence's beams; token `blocked` (<eos> before the
    minimum length) and the tokens `constraint` forbids are never one, but keep their share of
    the probability; `eos_bonus` = (<eos> id, (n * k_cur,) bonus: the brevity penalty) is added to
    the <eos> scores after the probabilities are taken; t is the step (for the constraint).

    logits (n * k_cur, vocab) for n sentences of k_cur beams, beam_scores (n, k_cur) -> scores (sum of
    log-probabilities), source beam and token of each candidate, each (n, 2 * beam), best first.
    """
    n, k_cur = beam_scores.shape
    # log p(token) = logit - logsumexp(row) is a shift per row, so a sentence's best 2*beam
    # extensions are among the best 2*beam logits of each of its rows: rank those few
    # instead of writing out a log-softmax over the whole vocabulary for every row.
    normaliser = torch.logsumexp(logits, dim=-1)
    if blocked is not None:
        logits[:, blocked] = float("-inf")
    if eos_bonus is not None:
        logits[:, eos_bonus[0]] += eos_bonus[1]
    if constraint is not None:
        constraint.mask(logits, t)
    width = min(2 * beam, logits.shape[-1])
    row_best, row_token = logits.topk(width, dim=-1)  # (n * k_cur, width)
    row_scores = (row_best - normaliser[:, None] + beam_scores.reshape(-1, 1)).view(n, k_cur * width)
    top_scores, top_pos = row_scores.topk(min(2 * beam, k_cur * width), dim=1)  # sorted, best first
    top_beam = torch.div(top_pos, width, rounding_mode="floor")
    return top_scores, top_beam, row_token.view(n, k_cur * width).gather(1, top_pos)


def continuing(top_scores: torch.Tensor, top_beam: torch.Tensor, top_token: torch.Tensor, beam: int,
               eos_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The beams that go on: the best `beam` candidates (each (n, 2 * beam), best first) that do not
    end in <eos> -> their scores, source beams and tokens, each (n, beam), best first."""
    scores, pos = top_scores.masked_fill(top_token == eos_id, float("-inf")).topk(min(beam, top_scores.shape[1]), dim=1)
    return scores, top_beam.gather(1, pos), top_token.gather(1, pos)


def reachable(best_beam: torch.Tensor, limits: torch.Tensor, penalty: float, alpha: float, stop: str) -> torch.Tensor:
    """The best score a sentence's surviving beams can still reach, (n,), from the best beam's sum of
    log-probabilities (n,) (see the module docstring for the two rules). Log-probabilities only fall,
    and lp is monotone in the length, so over the lengths still allowed the bound peaks at one end."""
    if stop == "bound":
        return best_beam / length_penalty(limits.float(), alpha).clamp(min=penalty)
    return best_beam / penalty


class Finished:
    """The best finished hypothesis of every sentence so far: tokens (batch, steps), lengths and
    scores (batch,), the score divided by the length penalty (-inf: none yet)."""

    def __init__(self, batch: int, steps: int, pad_id: int, eos_id: int, device: torch.device) -> None:
        self.eos_id = eos_id
        self.tokens = torch.full((batch, steps), pad_id, dtype=torch.long, device=device)
        self.lengths = torch.zeros(batch, dtype=torch.long, device=device)
        self.scores = torch.full((batch,), float("-inf"), device=device)

    def offer(self, alive: torch.Tensor, t: int, prefix: torch.Tensor, rows: torch.Tensor, last_token: torch.Tensor,
              score: torch.Tensor) -> None:
        """One candidate per alive sentence that ends at step t: its prefix row `rows` (of `prefix`, which
        holds <bos> first), its last token and its score; kept where it beats the sentence's best."""
        improved = score > self.scores[alive]
        if not bool(improved.any()):
            return
        index = alive[improved]
        self.tokens[index, :t] = prefix.index_select(0, rows[improved])[:, 1:]  # <bos> dropped
        self.tokens[index, t] = last_token[improved]
        self.lengths[index] = t + 1
        self.scores[index] = score[improved]

    def offer_step(self, alive: torch.Tensor, t: int, prefix: torch.Tensor, top: tuple, going: tuple,
                   at_limit: torch.Tensor, penalty: float, beam: int) -> None:
        """Offer what finishes at step t: <eos> among each sentence's best `beam` candidates `top`
        (scores, source beams, tokens; (n, 2 * beam) each), and for a sentence at its length limit
        (`at_limit`, (n,)) also its best surviving beam of `going` (scores, beams, tokens; (n, beam) each).
        Scores are divided by the length penalty; the better of the two is offered."""
        top_scores, top_beam, top_token = top
        go_scores, go_beam, go_token = going
        eos_id = self.eos_id
        ends = top_token == eos_id
        ends[:, beam:] = False
        eos_best, eos_pos = (top_scores.masked_fill(~ends, float("-inf")) / penalty).max(dim=1)
        limit_best = torch.where(at_limit, go_scores[:, 0] / penalty, torch.full_like(eos_best, float("-inf")))
        use_limit = limit_best > eos_best
        source_beam = torch.where(use_limit, go_beam[:, 0], top_beam.gather(1, eos_pos[:, None])[:, 0])
        last_token = torch.where(use_limit, go_token[:, 0], torch.full_like(go_token[:, 0], eos_id))
        k_cur = prefix.shape[0] // alive.shape[0]
        rows = torch.arange(alive.shape[0], device=alive.device) * k_cur + source_beam
        self.offer(alive, t, prefix, rows, last_token, torch.maximum(eos_best, limit_best))


@torch.inference_mode()
def beam_search(model, src_ids: torch.Tensor, options: DecodingOptions | None = None,
                tokens: SearchTokens | None = None) -> Decoded:
    """Translate a padded batch of source ids with beam search (`options.beam` beams; default 4 when
    no options are given).

    src_ids (batch, src_len) -> `Decoded` (the best hypothesis per sentence, scores divided by the
    length penalty with `options.alpha`). Limits, `tokens` and `brevity` as in `greedy_decode`;
    `options.stop` is the early-stopping rule ("bound" or "current", see the module docstring).
    """
    options, tokens, limits = search_setup(model, src_ids, options or DecodingOptions(beam=4), tokens)
    options.check()
    beam, alpha, stop, eos_id = options.beam, options.alpha, options.stop, tokens.eos_id
    device = src_ids.device
    recorder = trace.active()
    if recorder is not None:
        recorder.step = None
    memory, src_mask = model.encode(src_ids)
    batch = src_ids.shape[0]
    steps = int(limits.max())
    finished = Finished(batch, steps, tokens.pad_id, eos_id, device)
    alive = torch.arange(batch, device=device)  # original index of every sentence still searched
    state = DecoderState(model, memory, src_mask, tokens.bos_id, options.use_cache, options.compile)
    beam_scores = torch.zeros(batch, 1, device=device)  # (alive, beams): sum of log-probabilities
    constraint = DecodingRules.for_batch(src_ids, tokens, limits)
    short = BrevityPenalty.for_batch(src_ids, tokens, options.brevity)
    for t in range(steps):
        if recorder is not None:
            recorder.step = t
        n, k_cur = beam_scores.shape
        logits = state.logits().float()  # (n * k_cur, vocab)
        bonus = None if short is None else (eos_id, short.bonus(t, alive, k_cur))
        trace.emit("beam", "logits", logits)  # the beam view (explain/beam.py): the scores before any rule moves them
        blocked = eos_id if t < options.min_length else None
        top_scores, top_beam, top_token = candidates(logits, beam_scores, beam, blocked, constraint, bonus, t)
        penalty = length_penalty(t + 1, alpha)
        go_scores, go_beam, go_token = continuing(top_scores, top_beam, top_token, beam, eos_id)
        if recorder is not None:
            trace.emit("generate", "chosen", go_token)
        at_limit = limits[alive] <= t + 1
        finished.offer_step(alive, t, state.prefix, (top_scores, top_beam, top_token), (go_scores, go_beam, go_token),
                            at_limit, penalty, beam)
        done = at_limit | (finished.scores[alive] >= reachable(go_scores[:, 0], limits[alive], penalty, alpha, stop))
        if recorder is not None:  # the beam view (explain/beam.py): what this step decided, and why
            trace.emit("beam", "adjusted", logits, prefix=state.prefix, beam_scores=beam_scores, alive=alive,
                       top=(top_scores, top_beam, top_token), going=(go_scores, go_beam, go_token), penalty=penalty,
                       at_limit=at_limit, done=done, best=finished.scores[alive].clone(), min_length=options.min_length,
                       reach=reachable(go_scores[:, 0], limits[alive], penalty, alpha, stop), stop=stop)
        keep = (~done).nonzero()[:, 0]
        if keep.numel() == 0:
            break
        rows = (torch.arange(n, device=device)[:, None] * k_cur + go_beam)[keep].reshape(-1)
        state.select(rows, sentences=keep if keep.numel() < n else None)
        state.append(go_token[keep].reshape(-1))
        if constraint is not None:
            constraint.select(rows)
            constraint.chose(go_token[keep].reshape(-1))
        beam_scores = go_scores[keep]
        alive = alive[keep]
    return Decoded(finished.tokens, finished.lengths, finished.scores, eos_id)
