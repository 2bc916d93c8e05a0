"""Beam search, step by step: the tree of hypotheses that `translate --beam K` explored, read from the records
that `generate.beam.beam_search` writes while a recorder is active.

At every step the search extends each live hypothesis by every token and keeps the best K extensions
(generate/beam.py). The records of step t (`beam.logits` before the rules, `beam.adjusted` after, with what
the step decided) give, per live hypothesis: its words and sum of log-probabilities, its best candidates with
their log-probabilities (as the model gave them, and as the rules left them: <eos> blocked before the
minimum length, tokens the placeholder rule forbids, the brevity penalty on <eos>), which candidates go on,
which finish (an <eos> among the best K; or the length limit), the length penalty lp(t + 1), and why the
search stopped. The finished hypotheses are ranked by their score, log p / lp; the best is the translation.

`BeamTree.to_dict()` is the JSON (`explain --beam K --format json`, the page's tree); `render_beam` is the
terminal's table per step. One sentence at a time (explain translates one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import torch

from clearformer.generate.beam import BeamStepRecord
from clearformer.generate.constraints import ends_in_loop
from clearformer.record.trace import Record


@dataclass
class Candidate:
    """One extension of a hypothesis: `token` (id and `word`), log p as the model gave it (`logprob`), as
    the rules left it (`adjusted`), the hypothesis's sum with it (`total`), and its `fate`: "continues"
    (among the best K that do not end), "finishes" (an <eos> among the best K, or the best at the length
    limit), "stopped" (among the best K when the search stopped), or "pruned"."""

    token: int
    word: str
    logprob: float
    adjusted: float
    total: float
    fate: str = "pruned"
    rule: str = ""  # what moved its score, if anything
    child: str | None = None  # the hypothesis it becomes at the next step


@dataclass
class Hypothesis:
    id: str  # "t.r": row r of step t
    step: int
    words: list[str]  # the words chosen so far (<bos> excluded)
    tokens: list[int]  # their ids
    total: float  # sum of log-probabilities so far
    parent: str | None
    candidates: list[Candidate] = field(default_factory=list)
    attention: list[list[list[float]]] = field(default_factory=list)  # cross-attention (layer, head, source)
    chosen: bool = False  # an ancestor of (or) the translation


@dataclass
class Finished:
    words: list[str]  # <eos> included when it ended there
    tokens: list[int]
    step: int
    logprob: float  # the sum of log-probabilities, <eos> (and its brevity penalty) included
    penalty: float  # lp(length)
    score: float  # logprob / penalty
    why: str
    parent: str
    best: bool = False


@dataclass
class BeamStep:
    step: int
    penalty: float  # lp(t + 1) = ((5 + t + 1) / 6) ** alpha
    hypotheses: list[Hypothesis]
    finished: list[Finished]
    best_finished: float | None  # the best finished score after this step
    stopped: str = ""  # why the search stopped after this step ("" = it goes on)


@dataclass
class BeamTree:
    source_tokens: list[str]
    beam: int
    alpha: float
    stop: str
    steps: list[BeamStep]
    ranking: list[Finished]
    result: str = ""
    chosen_path: list[str] = field(default_factory=list)  # hypothesis ids, step 0 first
    masked_source: str = ""  # a run that masks placeholders: the sentence the model read
    masked_result: str = ""  # and the translation it wrote, before `result` got the placeholders back
    layers: int = 0
    heads: int = 0

    def to_dict(self) -> dict:
        return finite(asdict(self))


def finite(data):
    """JSON has no infinity: -inf (a forbidden token, no finished hypothesis yet) becomes None."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, list):
        return [finite(v) for v in data]
    return data


def rule_for(token: int, raw: float, adjusted: float, eos_id: int, step: int, min_length: int,
             before: Sequence[int] = ()) -> str:
    """Which of beam search's rules moved this candidate's score, in words ("" if none); `before` is the
    hypothesis's tokens (a forbidden repeat of its last one, or a piece closing a loop, is the repeat
    bound's, generate/constraints.py)."""
    if adjusted == raw:
        return ""
    if adjusted == float("-inf"):
        if token == eos_id and step < min_length:
            return "blocked: <eos> before the minimum length"
        if token == eos_id:  # the brevity rule's bonus is -inf for ending at once (generate/brevity.py)
            return "brevity penalty -inf: an empty translation never ends"
        if before and (token == before[-1] or ends_in_loop([*before, token])):
            return "forbidden by the repeat bound"
        return "forbidden by the placeholder rule"
    return f"brevity penalty {adjusted - raw:+.4f}" if token == eos_id else f"moved {adjusted - raw:+.4f}"


def cross_attention(records: list[Record], step: int, row: int) -> list[list[list[float]]]:
    """Row `row`'s cross-attention weights at `step`, (layers, heads, source): what it read to choose."""
    layers = [r for r in records if r.step == step and r.name.endswith(".cross_attention.weights")]
    return [r.value[row, :, -1].double().tolist() for r in layers]


def step_records(records: list[Record]) -> dict[int, tuple[Record, Record]]:
    by_step: dict[int, dict[str, Record]] = {}
    for record in records:
        if record.name in ("beam.logits", "beam.adjusted"):
            by_step.setdefault(record.step, {})[record.name] = record
    return {t: (r["beam.logits"], r["beam.adjusted"]) for t, r in sorted(by_step.items())}


def step_decision(adjusted: Record) -> BeamStepRecord:
    """The typed record of what a step of beam search decided (generate/beam.py), carried by its
    `beam.adjusted` record."""
    decision = adjusted.meta.get("decision")
    if not isinstance(decision, BeamStepRecord):
        raise ValueError(f"{adjusted.name} at step {adjusted.step} carries no BeamStepRecord")
    return decision


def read_step(t: int, raw: Record, adjusted: Record, records: list[Record], vocab: list[str], eos_id: int,
              beam: int, parents: list[str | None], per_hypothesis: int) -> BeamStep:
    """The hypotheses, their candidates and fates, and what finished, at step t (sentence 0 only)."""
    decision = step_decision(adjusted)
    if decision.alive.numel() != 1 or int(decision.alive[0]) != 0:
        raise ValueError("the beam view reads one sentence at a time")
    normaliser = torch.logsumexp(raw.value.double(), dim=-1, keepdim=True)
    logprobs, moved = raw.value.double() - normaliser, adjusted.value.double() - normaliser
    scores = decision.beam_scores[0].double()
    top_beam, top_token = decision.top.beams[0], decision.top.tokens[0]
    go_scores, go_beam, go_token = (x[0] for x in decision.going)
    penalty = float(decision.penalty)
    going = {(int(b), int(k)): j for j, (b, k) in enumerate(zip(go_beam, go_token, strict=True))}
    ends = {(int(b), int(k)) for b, k in zip(top_beam[:beam], top_token[:beam], strict=True) if int(k) == eos_id}
    prefix = decision.prefix
    done, at_limit = bool(decision.done[0]), bool(decision.at_limit[0])
    hypotheses, finished = [], []
    for row in range(prefix.shape[0]):
        ids = prefix[row, 1:].tolist()
        words = [vocab[i] for i in ids]
        node = Hypothesis(f"{t}.{row}", t, words, ids, float(scores[row]), parents[row] if row < len(parents) else None,
                          attention=cross_attention(records, t, row))
        order = torch.topk(moved[row], min(per_hypothesis, moved.shape[1])).indices.tolist()
        order += [k for b, k in (*going, *ends) if b == row and k not in order]  # what went on, always shown
        # and what the model ranked high but a rule pushed out (a forbidden token, a blocked <eos>)
        order += [k for k in torch.topk(logprobs[row], min(per_hypothesis, moved.shape[1])).indices.tolist()
                  if k not in order and moved[row, k] != logprobs[row, k]]
        for token in order:
            lp, adj = float(logprobs[row, token]), float(moved[row, token])
            candidate = Candidate(token, vocab[token], lp, adj, float(scores[row]) + adj,
                                  rule=rule_for(token, lp, adj, eos_id, t, decision.min_length, ids))
            if (row, token) in going and done:  # among the best K, but the search ends here
                candidate.fate = "finishes" if at_limit and going[(row, token)] == 0 else "stopped"
            elif (row, token) in going:
                candidate.fate, candidate.child = "continues", f"{t + 1}.{going[(row, token)]}"
            elif (row, token) in ends:
                candidate.fate = "finishes"
                finished.append(Finished(words + [vocab[token]], ids + [token], t, candidate.total, penalty,
                                         candidate.total / penalty, "<eos> among the best candidates", node.id))
            node.candidates.append(candidate)
        hypotheses.append(node)
    if at_limit:
        row, token = int(go_beam[0]), int(go_token[0])
        finished.append(Finished(hypotheses[row].words + [vocab[token]], hypotheses[row].tokens + [token], t,
                                 float(go_scores[0]), penalty,
                                 float(go_scores[0]) / penalty, "length limit reached", hypotheses[row].id))
    best = float(decision.best[0])
    stopped = ""
    if done:
        stopped = ("the length limit" if at_limit else
                   f"early stop ({decision.stop}): the best finished score {best:.4f} ≥ "
                   f"{float(decision.reach[0]):.4f}, "
                   f"the most a live hypothesis can still reach")
    return BeamStep(t, penalty, hypotheses, finished, best if math.isfinite(best) else None, stopped)


def read_beam_tree(records: list[Record], vocab: list[str], source_tokens: list[str], eos_id: int, beam: int,
                   alpha: float, stop: str, per_hypothesis: int | None = None) -> BeamTree:
    """The search's tree from a recorder's records (one sentence searched with `beam_search`)."""
    per_hypothesis = per_hypothesis or 2 * beam
    steps: list[BeamStep] = []
    parents: list[str | None] = [None]
    for t, (raw, adjusted) in step_records(records).items():
        current = read_step(t, raw, adjusted, records, vocab, eos_id, beam, parents, per_hypothesis)
        steps.append(current)
        children = {c.child: h.id for h in current.hypotheses for c in h.candidates if c.child}
        parents = [children.get(f"{t + 1}.{j}") for j in range(len(children))]
    # A stable sort: of equal scores the earlier stays first, as `generate.beam.BestFinished` keeps one only
    # when it beats the best.
    ranking = sorted((f for step in steps for f in step.finished), key=lambda f: -f.score)
    tree = BeamTree(source_tokens, beam, alpha, stop, steps, ranking)
    if ranking:
        ranking[0].best = True
        mark_path(tree, ranking[0])
    layers = steps[0].hypotheses[0].attention if steps and steps[0].hypotheses else []
    tree.layers, tree.heads = len(layers), len(layers[0]) if layers else 0
    return tree


def mark_path(tree: BeamTree, best: Finished) -> None:
    """Mark the translation's hypothesis at every step, from its parent links."""
    nodes = {h.id: h for s in tree.steps for h in s.hypotheses}
    path, node = [], nodes.get(best.parent)
    while node is not None:
        node.chosen = True
        path.append(node.id)
        node = nodes.get(node.parent) if node.parent else None
    tree.chosen_path = path[::-1]


def chosen_rows(tree: BeamTree) -> dict[int, int]:
    """step -> the row of the translation's hypothesis at that step."""
    return {int(i.split(".")[0]): int(i.split(".")[1]) for i in tree.chosen_path}


def follow_chosen(records: list[Record], tree: BeamTree) -> list[Record]:
    """The records as if only the translation's hypothesis had been searched: at each step its row of every
    tensor (the other hypotheses' rows dropped), steps after it finished dropped; the beam's own records out."""
    rows = chosen_rows(tree)
    kept = []
    for record in records:
        if record.name.startswith("beam."):
            continue
        if record.step is None:
            kept.append(record)
            continue
        if record.step not in rows:
            continue
        row = rows[record.step]
        value = record.value
        if record.name == "generate.chosen":  # beam search records every surviving token: keep the chosen one
            value = torch.tensor([tree.ranking[0].tokens[record.step]])
        elif value.dim() >= 1 and value.shape[0] > row:
            value = value[row:row + 1]
        kept.append(Record(record.name, value, record.step, record.meta))
    return kept
