"""Beam search with the length penalty of the paper (GNMT's, Wu et al. 2016).

Each sentence keeps the `beam` most probable prefixes; at each step every prefix is extended by
every token, and the best `beam` extensions that do not end in <eos> go on. Extensions that end
in <eos> (among the best `beam`) are finished hypotheses, scored

    score = log p(y | x) / lp(|y|),    lp(n) = ((5 + n) / 6) ** alpha

(|y| counts <eos>; alpha = 0 gives the plain sum of log-probabilities). Only the best finished
hypothesis of each sentence is kept, unless the caller passes `hypotheses` (`FinishedHypotheses`):
then every finished one is listed too, for an n-best list (generate/nbest.py). A sentence is done
when it reaches its length limit (its surviving beams are then scored as finished) or when no
surviving beam can still beat its best finished hypothesis (early stopping). Two rules for "can still beat", `stop=`:

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

from dataclasses import dataclass
from typing import NamedTuple

import torch

from clearformer.generate.graphs import GraphStep
from clearformer.generate.options import DEFAULT_ALPHA, STOP_RULES, DecodingOptions, SearchTokens
from clearformer.generate.state import Decoded, start_search
from clearformer.record import trace

__all__ = ["DEFAULT_ALPHA", "STOP_RULES", "BeamStepRecord", "Candidates", "FinishedHypotheses", "beam_search",
           "length_penalty"]


class Candidates(NamedTuple):
    """Extensions of the beams of n sentences, best first: their scores (sums of log-probabilities), the
    beam each extends and the token it adds, each (n, width)."""

    scores: torch.Tensor
    beams: torch.Tensor
    tokens: torch.Tensor


@dataclass
class BeamStepRecord:
    """What one step of beam search decided, and why: the record the beam view reads (explain/beam.py),
    recorded as the `beam.adjusted` record's `decision` while a recorder is active.

    prefix (n * k_cur, t + 1): <bos> and the tokens of every live hypothesis, sentence-major;
    beam_scores (n, k_cur): their sums of log-probabilities; alive (n,): the sentences' original indices;
    top: the best 2 x beam candidates, going: the best `beam` that do not end in <eos> (`Candidates`);
    penalty: lp(t + 1); at_limit, done (n,): at its length limit, stopped after this step;
    best (n,): the best finished score so far; reach (n,): the most a live hypothesis can still reach;
    min_length and stop: the options the step ran with.
    """

    prefix: torch.Tensor
    beam_scores: torch.Tensor
    alive: torch.Tensor
    top: Candidates
    going: Candidates
    penalty: float
    at_limit: torch.Tensor
    done: torch.Tensor
    best: torch.Tensor
    reach: torch.Tensor
    min_length: int
    stop: str


def length_penalty(length: int | float | torch.Tensor, alpha: float):
    """GNMT length penalty lp(n) = ((5 + n) / 6) ** alpha; lp(1) = 1 for every alpha."""
    return ((5.0 + length) / 6.0) ** alpha


def candidates(logits: torch.Tensor, beam_scores: torch.Tensor, beam: int,
               normaliser: torch.Tensor | None = None) -> Candidates:
    """The best 2 x beam extensions of each sentence's beams, from `logits` as the decoding rules left them
    (generate/rules.py: a token they forbid is -inf, never a candidate); `normaliser` (n * k_cur,): each
    row's logsumexp taken before the rules (default: of `logits`), so that a forbidden token keeps its share
    of the probability and a bonus moves only its own token.

    logits (n * k_cur, vocab) for n sentences of k_cur beams, beam_scores (n, k_cur) -> `Candidates`,
    each (n, 2 * beam), best first.
    """
    n, k_cur = beam_scores.shape
    # log p(token) = logit - logsumexp(row) is a shift per row, so a sentence's best 2*beam
    # extensions are among the best 2*beam logits of each of its rows: rank those few
    # instead of writing out a log-softmax over the whole vocabulary for every row.
    normaliser = torch.logsumexp(logits, dim=-1) if normaliser is None else normaliser
    width = min(2 * beam, logits.shape[-1])
    row_best, row_token = logits.topk(width, dim=-1)  # (n * k_cur, width)
    row_scores = (row_best - normaliser[:, None] + beam_scores.reshape(-1, 1)).view(n, k_cur * width)
    top_scores, top_pos = row_scores.topk(min(2 * beam, k_cur * width), dim=1)  # sorted, best first
    top_beam = torch.div(top_pos, width, rounding_mode="floor")
    return Candidates(top_scores, top_beam, row_token.view(n, k_cur * width).gather(1, top_pos))


def continuing(top: Candidates, beam: int, eos_id: int) -> Candidates:
    """The beams that go on: the best `beam` candidates of `top` (each (n, 2 * beam), best first) that do not
    end in <eos> -> `Candidates`, each (n, beam), best first."""
    scores, pos = top.scores.masked_fill(top.tokens == eos_id, float("-inf")).topk(min(beam, top.scores.shape[1]),
                                                                                     dim=1)
    return Candidates(scores, top.beams.gather(1, pos), top.tokens.gather(1, pos))


def reachable(best_beam: torch.Tensor, limits: torch.Tensor, penalty: float, alpha: float, stop: str) -> torch.Tensor:
    """The best score a sentence's surviving beams can still reach, (n,), from the best beam's sum of
    log-probabilities (n,) (see the module docstring for the two rules). Log-probabilities only fall,
    and lp is monotone in the length, so over the lengths still allowed the bound peaks at one end."""
    if stop == "bound":
        return best_beam / length_penalty(limits.float(), alpha).clamp(min=penalty)
    return best_beam / penalty


class BestFinished:
    """The best finished hypothesis of every sentence so far: tokens (batch, steps), lengths and
    scores (batch,), the score divided by the length penalty (-inf: none yet)."""

    def __init__(self, batch: int, steps: int, pad_id: int, eos_id: int, device: torch.device) -> None:
        self.eos_id = eos_id
        self.tokens = torch.full((batch, steps), pad_id, dtype=torch.long, device=device)
        self.lengths = torch.zeros(batch, dtype=torch.long, device=device)
        self.scores = torch.full((batch,), float("-inf"), device=device)
        self.forced = torch.zeros(batch, dtype=torch.bool, device=device)
        self.row_forced: torch.Tensor | None = None  # this step's hypotheses' `DecodingRules.forced`, if any

    def offer(self, alive: torch.Tensor, t: int, prefix: torch.Tensor, rows: torch.Tensor, last_token: torch.Tensor,
              score: torch.Tensor) -> None:
        """One candidate per alive sentence that ends at step t: its prefix row `rows` (of `prefix`, which
        holds <bos> first), its last token and its score; kept where it beats the sentence's best."""
        improved = score > self.scores[alive]
        if not bool(improved.any()):
            return
        index = alive[improved]
        if self.row_forced is not None:
            self.forced[index] = self.row_forced.index_select(0, rows[improved])
        self.tokens[index, :t] = prefix.index_select(0, rows[improved])[:, 1:]  # <bos> dropped
        self.tokens[index, t] = last_token[improved]
        self.lengths[index] = t + 1
        self.scores[index] = score[improved]

    def offer_step(self, alive: torch.Tensor, t: int, prefix: torch.Tensor, top: Candidates, going: Candidates,
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


class FinishedHypotheses:
    """Every hypothesis the search finishes, per sentence: `by_sentence[i]` lists (ids, score), ids without
    <bos> and with the <eos> that ended it (none where the length limit did), the score divided by the length
    penalty as `BestFinished` scores it. The same candidates `BestFinished.offer_step` chooses among."""

    def __init__(self, batch: int, eos_id: int) -> None:
        self.eos_id = eos_id
        self.by_sentence: list[list[tuple[list[int], float]]] = [[] for _ in range(batch)]

    def collect(self, alive: torch.Tensor, prefix: torch.Tensor, top: Candidates, going: Candidates,
                at_limit: torch.Tensor, penalty: float, beam: int) -> None:
        """The hypotheses finishing at this step: <eos> among a sentence's best `beam` candidates, and every
        surviving beam of a sentence at its length limit (shapes as `BestFinished.offer_step`)."""
        k_cur = prefix.shape[0] // alive.shape[0]
        rows = prefix[:, 1:].tolist()
        ends = top.tokens[:, :beam] == self.eos_id
        for sentence, position in ends.nonzero().tolist():
            score = float(top.scores[sentence, position]) / penalty
            row = sentence * k_cur + int(top.beams[sentence, position])
            if score != float("-inf"):
                self.by_sentence[int(alive[sentence])].append((rows[row] + [self.eos_id], score))
        for sentence in at_limit.nonzero()[:, 0].tolist():
            for position in range(going.scores.shape[1]):
                score = float(going.scores[sentence, position]) / penalty
                row = sentence * k_cur + int(going.beams[sentence, position])
                if score != float("-inf"):
                    self.by_sentence[int(alive[sentence])].append(
                        (rows[row] + [int(going.tokens[sentence, position])], score))

    def best_first(self, sentence: int) -> list[list[int]]:
        """The sentence's finished hypotheses, best score first, each without its <eos>."""
        ranked = sorted(self.by_sentence[sentence], key=lambda item: -item[1])
        return [ids[:-1] if ids and ids[-1] == self.eos_id else ids for ids, _ in ranked]


@torch.inference_mode()
def beam_search(model, src_ids: torch.Tensor, options: DecodingOptions | None = None,
                tokens: SearchTokens | None = None, hypotheses: FinishedHypotheses | None = None,
                graph: GraphStep | None = None) -> Decoded:
    """Translate a padded batch of source ids with beam search (`options.beam` beams; default 4 when
    no options are given).

    src_ids (batch, src_len) -> `Decoded` (the best hypothesis per sentence, scores divided by the
    length penalty with `options.alpha`). Limits, `tokens` and the decoding rules as in `greedy_decode`;
    `options.stop` is the early-stopping rule ("bound" or "current", see the module docstring);
    `hypotheses`: listed there, every hypothesis that finishes (an n-best list: generate/nbest.py); `graph`: as
    in `greedy_decode`.
    """
    search = start_search(model, src_ids, options or DecodingOptions(beam=4), tokens, graph)
    options, state, rules, decode, limits = search.options, search.state, search.rules, search.decode, search.limits
    beam, alpha, stop, eos_id = options.beam, options.alpha, options.stop, search.tokens.eos_id
    device = src_ids.device
    recorder = trace.active()
    finished = BestFinished(src_ids.shape[0], search.steps, search.tokens.pad_id, eos_id, device)
    alive = torch.arange(src_ids.shape[0], device=device)  # original index of every sentence still searched
    beam_scores = torch.zeros(src_ids.shape[0], 1, device=device)  # (alive, beams): sum of log-probabilities
    for t in range(search.steps):
        if recorder is not None:
            recorder.step = t
        n, k_cur = beam_scores.shape
        logits = model.project(decode(*state.inputs())[:, -1:])[:, 0].float()  # (n * k_cur, vocab)
        trace.emit("beam", "logits", logits)  # the beam view (explain/beam.py): the scores before any rule moves them
        normaliser = torch.logsumexp(logits, dim=-1)  # the model's log p: the rules forbid, they do not renormalise
        logits = rules(logits, t)
        top = candidates(logits, beam_scores, beam, normaliser)
        penalty = length_penalty(t + 1, alpha)
        going = continuing(top, beam, eos_id)
        if recorder is not None:
            trace.emit("generate", "chosen", going.tokens)
        at_limit = limits[alive] <= t + 1
        finished.row_forced = rules.forced()
        finished.offer_step(alive, t, state.prefix, top, going, at_limit, penalty, beam)
        if hypotheses is not None:
            hypotheses.collect(alive, state.prefix, top, going, at_limit, penalty, beam)
        reach = reachable(going.scores[:, 0], limits[alive], penalty, alpha, stop)
        done = at_limit | (finished.scores[alive] >= reach)
        if recorder is not None:  # the beam view (explain/beam.py): what this step decided, and why
            trace.emit("beam", "adjusted", logits, decision=BeamStepRecord(
                state.prefix, beam_scores, alive, top, going, penalty, at_limit, done, finished.scores[alive].clone(),
                reach, options.min_length, stop))
        keep = (~done).nonzero()[:, 0]
        if keep.numel() == 0:
            break
        rows = (torch.arange(n, device=device)[:, None] * k_cur + going.beams)[keep].reshape(-1)
        state.select(rows, sentences=keep if keep.numel() < n else None)
        state.append(going.tokens[keep].reshape(-1))
        rules.select(rows)
        rules.chose(going.tokens[keep].reshape(-1))
        beam_scores = going.scores[keep]
        alive = alive[keep]
    return Decoded(finished.tokens, finished.lengths, finished.scores, eos_id,
                   None if rules.forced() is None else finished.forced)
