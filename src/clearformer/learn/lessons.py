"""The lessons, in the seeds' order: concept, snippet, the step on the learner's sentence, one question.

Seed 003 states the rhythm: a concept lesson, a tiny PyTorch snippet to see it work, one guiding
question to confirm it was understood. Each `Lesson` holds

  * `concept`: the seeds' explanation in a few sentences, with their arithmetic corrected
    (the true values: tests/golden/seed_examples.json);
  * `snippet`: code that calls clearformer's modules on the seeds' test data (run by
    `snippets.run_snippet`: what is printed is what it computed);
  * `ask(run)`: the step(s) of the walkthrough recorded on the learner's sentence by the trained
    toy model, and the question whose answer is read off them;
  * `page_steps`: the recorded names (regular expressions) of the walkthrough steps the lesson
    explains, so the page (explain --html, serve) can show the lesson beside them.

This module is the one source of the lessons: the terminal (`clearformer learn N`), the notebooks
(`clearformer learn --notebooks DIR`) and the page all read it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clearformer.explain.walkthrough import Walkthrough
from clearformer.generate.options import DEFAULT_ALPHA
from clearformer.learn import browser
from clearformer.learn.questions import Question, cell, step, where

PAPER_ALPHA = 0.6  # the paper's length-penalty α (clearformer's default is DEFAULT_ALPHA)


@dataclass
class LearnerRun:
    """What the toy model recorded on the learner's sentence."""

    sentence: str
    walk: Walkthrough
    tgt_vocab_size: int
    checkpoint: Path | None = None  # the run that recorded it (lessons 12 and 13 run it once more)


@dataclass
class StepView:
    """One recorded step to show: its name, generation step, head (None = all) and columns shown."""

    name: str
    decode_step: int | None = None
    head: int | None = 0
    max_cols: int = 8
    cols: tuple[int, int] | None = None  # show only these columns [start, stop) of a wide matrix


@dataclass
class Lesson:
    number: int
    slug: str
    title: str
    concept: str
    snippet: str
    ask: Callable[[LearnerRun], tuple[Question, list[StepView]]]
    page_steps: tuple[str, ...] = ()
    seeds: str = ""
    extra: dict = field(default_factory=dict)
    # the exercise that practises it (`clearformer learn exercise NAME`) and, for the capstone, the part to read
    exercise: str = "transformer"
    exercise_part: str = ""
    # the steps (regular expressions) where the page opens this lesson first, before others that match too
    page_leads: tuple[str, ...] = ()


def _source(run: LearnerRun) -> list[str]:
    return run.walk.source_tokens


def _last_step(run: LearnerRun) -> int:
    return max(s.decode_step for s in run.walk.steps if s.decode_step is not None)


# ----------------------------------------------------------------------------- questions on the sentence
#
# Every question needs a computation, or a choice reasoned from the numbers on the screen: its answer is never
# a number the lesson prints (tests/learn/test_questions.py holds that on two sentences), its tolerance refuses
# a rounded answer (`pick` chooses a cell whose value is no round number), and its hint names the step and the
# rule, never the result.


def pick(candidates, value: Callable, tolerance: float, key: Callable | None = None):
    """The candidate whose value is largest in size (or whose `key` is largest) among those a rounded answer
    (to 0.1) cannot pass for; any candidate when none is (questions.py `refusing_rounded` then narrows the
    tolerance)."""
    candidates = list(candidates)
    unround = [c for c in candidates if abs(value(c) - round(value(c), 1)) > 2 * tolerance]
    return max(unround or candidates, key=key or (lambda c: abs(value(c))))


def ask_embedding(run):
    """Lesson 1: the paper's √d_model scaling, computed from the looked-up row."""
    tokens = _source(run)
    position = 1 if len(tokens) > 1 else 0
    lookup = step(run.walk, "src_embed.tokens.lookup")
    scaled = step(run.walk, "src_embed.tokens.scaled")
    d_model = len(lookup.matrices[0].col_labels)
    tolerance = 1e-3  # 4 printed decimals times √d_model
    col = pick(range(min(8, d_model)), lambda c: cell(scaled, position, c), tolerance)
    word = tokens[position]
    question = Question(f"The paper multiplies every embedding by √d_model before the positions are added (d_model = "
                        f"{d_model} here). What is the scaled embedding of {word!r} (position {position}) in "
                        f"dimension d{col}?", "number", cell(scaled, position, col), tolerance=tolerance,
                        hint=f"the id of {word!r} picks its row of E: take {where(lookup, row=word, col=f'd{col}')} "
                             f"and multiply it by √d_model, as the step \"Scaled embeddings\" (E[ids] · √d_model) does",
                        why="E[ids] reads the token's row of the table; the √d_model factor keeps the embeddings from "
                            "being drowned by the positional encoding, whose numbers lie in [-1, 1].")
    return question, [StepView("src_embed.token_ids"), StepView("src_embed.tokens.lookup")]


def ask_pe(run):
    """Lesson 2: PE at the position after the sentence's last, which the table does not show, from the formula."""
    tokens = _source(run)
    position = len(tokens)
    found = step(run.walk, "src_embed.positions.PE")
    d_model = len(found.matrices[0].col_labels)

    def pe(dim: int) -> float:
        angle = position / 10000 ** ((dim - dim % 2) / d_model)
        return math.sin(angle) if dim % 2 == 0 else math.cos(angle)

    dim = pick(range(2, 6), pe, 5e-4)
    kind = "sin" if dim % 2 == 0 else "cos"
    question = Question(f"The positional encoding above stops at position {position - 1} ({tokens[-1]!r}). A sentence "
                        f"one token longer would add position {position}: what is PE there, in dimension d{dim} "
                        f"(a {kind}ine; d_model = {d_model})?", "number", pe(dim), tolerance=5e-4,
                        hint=f"PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / "
                             f"10000^(2i/d_model)), with pos = {position} and 2i = {dim - dim % 2}; check your formula "
                             f"on a row of {where(found)} first (radians)",
                        why="Each pair of columns is a clock of its own speed: the wavelength grows from 2π (d0, d1) "
                            "to 10000·2π (the last pair), so every position gets a different vector.")
    return question, [StepView("src_embed.positions.PE", max_cols=6)]


def ask_q(run):
    """Lesson 3: what W^Q, W^K, W^V and their biases hold, from the shapes on the screen."""
    found = step(run.walk, "encoder.layers.0.self_attention.Q")
    heads = len(found.matrices)
    d_k = len(found.matrices[0].col_labels)
    d_model = len(step(run.walk, "src_embed.X").matrices[0].col_labels)
    answer = 3 * heads * (d_model * d_k + d_k)
    question = Question(f"Encoder layer 0 has {heads} heads; each makes its Q, K and V of d_k = {d_k} columns from X "
                        f"(d_model = {d_model} columns) with its own weights W_i and bias b_i. How many learned "
                        "numbers "
                        "(weights and biases) do Q, K and V take in this layer, all heads together?", "number",
                        float(answer), hint="Q = X · W^Q + b^Q (the steps \"Queries Q\", \"Keys K\", \"Values V\"): "
                                            "per head and per projection W_i is d_model x d_k and b_i has d_k numbers; "
                                            "three projections, every head",
                        why="Q, K and V are three linear maps of the same X, each with a bias (torch's nn.Linear, "
                            "ModelConfig.bias); together the heads' W_i are d_model x d_model per projection.")
    return question, [StepView("src_embed.X", max_cols=6), StepView("encoder.layers.0.self_attention.Q"),
                      StepView("encoder.layers.0.self_attention.K"), StepView("encoder.layers.0.self_attention.V")]


def _softmax_row(row: list[float], allowed: list[bool] | None = None) -> list[float]:
    allowed = allowed or [True] * len(row)
    top = max(v for v, ok in zip(row, allowed, strict=True) if ok)
    powers = [math.exp(v - top) if ok else 0.0 for v, ok in zip(row, allowed, strict=True)]
    return [p / sum(powers) for p in powers]


def ask_weight(run):
    """Lesson 4: one attention weight computed from a row of scaled scores (the least saturated one of the
    trained model's attention rows: a trained head is often one-hot, and 1.0 / 0.0 teaches little)."""
    candidates = []  # (how far from 0 and 1, step name, generation step, head, row, column)
    for found in run.walk.steps:  # scaled scores are recorded whole: a decoder step's one new row (with every key)
        if not found.name.endswith("attention.scaled"):
            continue
        for matrix in found.matrices:
            for r in range(len(matrix.values)):
                for c, w in enumerate(_softmax_row(matrix.values[r])):
                    if abs(w - round(w, 1)) > 1e-3:
                        candidates.append((min(w, 1 - w), -len(matrix.values[r]), found.name, found.decode_step,
                                           matrix.head, r, c))
    if not candidates:
        return ask_scaled(run)
    _, _, name, decode_step, head, r, c = max(candidates)
    scaled = step(run.walk, name, decode_step)
    matrix = next(m for m in scaled.matrices if m.head == head)
    query, key = matrix.row_labels[r], matrix.col_labels[c]
    answer = _softmax_row(matrix.values[r])[c]
    place = name.removesuffix(".scaled").replace("layers.", "layer ").replace("_", "-").replace(".", " ")
    at = f", generation step {decode_step + 1}" if decode_step is not None else ""
    question = Question(f"{place.capitalize()}, head {head}{at}: from the scaled scores of the query {query!r} (its "
                        f"row of \"Scaled scores\" above), compute the attention weight it gives to the key {key!r}.",
                        "number", answer, tolerance=5e-4,
                        hint=f"softmax over the row {query!r} of {where(scaled, head=head)}: weight_j = e^(s_j) / "
                             "Σ_k e^(s_k) (subtract the row's largest score first to keep the powers small)",
                        why="The softmax turns each row of scaled scores into weights that sum to 1; only the "
                            "differences of the scores matter.")
    score_name = name.replace(".scaled", ".scores")
    return question, [StepView(score_name, decode_step, head=head), StepView(name, decode_step, head=head)]


def ask_scaled(run):
    """Lesson 4 on a model whose every weight is 0 or 1: a scaled score from its raw score."""
    tokens = _source(run)
    row, col = 0, 1 if len(tokens) > 1 else 0
    scores = step(run.walk, "encoder.layers.0.self_attention.scores")
    found = step(run.walk, "encoder.layers.0.self_attention.scaled")
    d_k = len(step(run.walk, "encoder.layers.0.self_attention.Q").matrices[0].col_labels)
    question = Question(f"Encoder layer 0, head 0 (d_k = {d_k}): what is the scaled score of {tokens[row]!r} against "
                        f"{tokens[col]!r}?", "number", cell(found, row, col, head=0), tolerance=5e-4,
                        hint=f"divide {where(scores, head=0, row=tokens[row], col=tokens[col])} by √d_k",
                        why="Row = the query's token, column = the key's token; scaled = Q·Kᵀ / √d_k.")
    return question, [StepView("encoder.layers.0.self_attention.scores"),
                      StepView("encoder.layers.0.self_attention.weights")]


def ask_mask(run):
    """Lesson 5: the padding mask of a batch, reasoned from the mask's shape."""
    found = step(run.walk, "encoder.layers.0.self_attention.mask")
    tokens = len(found.matrices[0].col_labels)
    pads = 3
    total = tokens + pads
    last = _last_step(run)
    question = Question(f"Your sentence is {tokens} source tokens (<eos> included: the mask's columns). In a batch "
                        f"with a sentence of {total} tokens it is padded with {pads} <pad> tokens. Its encoder "
                        f"self-attention mask then has {total} rows and {total} columns: how many of those cells are "
                        "blocked?", "number", float(total * pads),
                        hint="the padding mask (shape (batch, 1, 1, keys), concept above) blocks every <pad> key for "
                             f"every query, <pad> queries included; compare {where(found)}, a sentence alone, which "
                             "blocks nothing",
                        why="Blocked cells get -∞ before the softmax: no query takes anything from a <pad> key. The "
                            "causal mask, in the decoder only, blocks the cells above the diagonal as well.")
    return question, [StepView("encoder.layers.0.self_attention.mask"),
                      StepView("decoder.layers.0.self_attention.mask", last)]


def ask_concat(run):
    """Lesson 6: where a head's column lands in the concatenation."""
    tokens = _source(run)
    heads = step(run.walk, "encoder.layers.0.self_attention.head_outputs")
    d_head = len(heads.matrices[0].col_labels)
    head = len(heads.matrices) - 1
    column = min(len(tokens), d_head - 1)
    answer = head * d_head + column
    question = Question(f"Encoder layer 0: each of the {len(heads.matrices)} heads outputs d_k = {d_head} numbers per "
                        f"token, and Concat puts them side by side. Which column of the concatenated heads holds "
                        f"head {head}'s d{column} of {tokens[0]!r}? Answer with the column's number (d37 -> 37).",
                        "number", float(answer),
                        hint=f"head h fills columns h·d_k .. (h+1)·d_k - 1 of the step \"Concatenated heads\": "
                             f"compare {where(heads, head=1, row=tokens[0], col='d0')} with the columns around "
                             f"d{d_head} "
                             "above",
                        why="Concat does not mix the heads: head h's column j is column h·d_k + j; W^O mixes them "
                            "afterwards.")
    return question, [StepView("encoder.layers.0.self_attention.head_outputs", head=1, max_cols=4),
                      StepView("encoder.layers.0.self_attention.concat", cols=(d_head - 2, d_head + 3))]


def ask_residual(run):
    """Lesson 7: the residual sum, computed from its two parts (the sum itself is not shown)."""
    tokens = _source(run)
    found = step(run.walk, "encoder.layers.0.add_norm_1.residual")
    tolerance = 3e-4  # two numbers of 4 printed decimals
    col = pick(range(4), lambda c: cell(found, 0, c), tolerance)
    question = Question(f"Encoder layer 0, first Add & Norm: what is the residual sum x + Sublayer(x) for "
                        f"{tokens[0]!r} in dimension d{col}, the number LayerNorm then normalises?", "number",
                        cell(found, 0, col), tolerance=tolerance,
                        hint=f"Add: x is the row {tokens[0]!r} of the step \"Input X\" and Sublayer(x) its row of "
                             f"the step \"Multi-head output (× W^O)\"; add their d{col}",
                        why="Add: the sublayer's output is added to its own input; Norm then rescales the sum to mean "
                            "0 and variance 1 (then γ, β).")
    return question, [StepView("src_embed.X", max_cols=4),
                      StepView("encoder.layers.0.self_attention.output", max_cols=4),
                      StepView("encoder.layers.0.add_norm_1.norm", max_cols=4),
                      StepView("encoder.layers.0.feed_forward.hidden", max_cols=6)]


def ask_memory(run):
    """Lesson 8: what the decoder computes from the memory, from its shape."""
    found = step(run.walk, "encoder.output")
    rows, d_model = len(found.matrices[0].values), len(found.matrices[0].col_labels)
    layers = len({s.layer for s in run.walk.steps if s.name.endswith("cross_attention.K")})
    answer = layers * 2 * rows * d_model
    question = Question(f"Every one of the {layers} decoder layers makes its own cross-attention keys and values from "
                        "the encoder output above: K = memory · W^K + b^K and V likewise, d_model numbers per source "
                        "token each (all heads together). How many numbers of K and V do the decoder layers compute "
                        "from your sentence's memory?", "number", float(answer),
                        hint=f"rows x columns of {where(found)} (one row per source token, <eos> included), for K and "
                             "for V, in every decoder layer",
                        why="One context-aware vector per source token; every decoder layer projects all of them into "
                            "its own keys and values, once per sentence (the cache keeps them across steps).")
    return question, [StepView("encoder.output", max_cols=6)]


@dataclass
class CrossRow:
    """One row of a cross-attention head: the decoder input `label` at that position, the word chosen there
    (`chosen`: the next word), the source token with the largest weight and that weight."""

    label: str
    chosen: str
    source: str
    weight: float


def cross_rows(run, layer: int, head: int) -> list[CrossRow]:
    """The rows of decoder layer `layer`, head `head`'s cross-attention at the last generation step."""
    found = step(run.walk, f"decoder.layers.{layer}.cross_attention.weights", _last_step(run))
    matrix = next(m for m in found.matrices if m.head == head)
    chosen = run.walk.target_tokens[1:]
    rows = []
    for label, row, word in zip(matrix.row_labels, matrix.values, chosen, strict=False):
        best = max(range(len(row)), key=lambda j: row[j])
        rows.append(CrossRow(label, word, matrix.col_labels[best], row[best]))
    return rows


def ask_cross(run):
    """Lesson 9: a cross-attention row is the decoder input that predicts the NEXT word. The question names a
    chosen word and asks what the head looked at while choosing it: the row of the word before it."""
    tokens = _source(run)
    last = _last_step(run)
    layers = sorted({s.layer for s in run.walk.steps if s.name.endswith("cross_attention.weights")})
    heads = len(step(run.walk, f"decoder.layers.{layers[0]}.cross_attention.weights", last).matrices)

    def worth(rows: list[CrossRow]) -> float:  # how sharply the rows choosing words point at source words
        return sum(r.weight for r in rows if not r.source.startswith("<") and not r.chosen.startswith("<"))

    layer, head = max(((lay, h) for lay in layers for h in range(heads)),
                      key=lambda lh: (worth(cross_rows(run, *lh)), -lh[0], -lh[1]))
    rows = cross_rows(run, layer, head)
    # the word to ask about: its own row (the wrong reading) and the row that chose it point at different words
    def pitfall(i: int) -> tuple:
        own = rows[i + 1].source if i + 1 < len(rows) else rows[i].source
        return (own != rows[i].source, not rows[i].source.startswith("<"), rows[i].weight)

    asked = max(range(len(rows)), key=pitfall)
    target = rows[asked]
    name = f"decoder.layers.{layer}.cross_attention.weights"
    found = step(run.walk, name, last)
    alignment = "; ".join(f"row {r.label!r} (choosing {r.chosen!r}) -> {r.source!r} {r.weight:.2f}" for r in rows)
    question = Question(f"Decoder layer {layer}, head {head}: the model chose {target.chosen!r} at generation step "
                        f"{asked + 1}. Which source token did this head weigh most while it chose that word?",
                        "choice", target.source, choices=list(dict.fromkeys(tokens)),
                        hint=f"a row belongs to the decoder input at its position, whose output predicts the next "
                             f"word: the row that chose {target.chosen!r} is the row of the word before it; find its "
                             f"largest weight in {where(found, head=head)}",
                        why=f"Row {target.label!r} is the decoder's input at the step that chose {target.chosen!r}: "
                            f"cross-attention shows what the model consulted to predict the next word, not what the "
                            f"row's own word translates. This head, row by row: {alignment}.")
    return question, [StepView(f"decoder.layers.{layer}.self_attention.weights", last, head=head),
                      StepView(name, last, head=head)]


def ask_probability(run):
    """Lesson 10: the runner-up's probability as a fraction of the chosen word's, from two logits (at the step
    where the choice was least certain, among those whose ratio is no round number): the softmax's denominator
    cancels."""
    def at(t: int) -> tuple[float, str, str]:
        logits = step(run.walk, "output.logits", t).matrices[0]
        chosen = step(run.walk, "generate.chosen", t).matrices[0].note
        values = dict(zip(logits.col_labels, logits.values[0], strict=True))
        mine = values.get(chosen, max(values.values()))
        other = max((w for w in values if w != chosen), key=lambda w: values[w])
        return math.exp(values[other] - mine), chosen, other

    # the least certain step among those whose ratio (at most 1 for greedy's own choice) a rounded answer cannot
    # pass for; the tolerance is the answer's own scale, 0.1% of it
    t = pick(range(_last_step(run) + 1), lambda s: at(s)[0], 1e-3, key=lambda s: min(at(s)[0], 1 / at(s)[0]))
    fraction, chosen, other = at(t)
    found = step(run.walk, "output.logits", t)
    question = Question(f"Generation step {t + 1} chose {chosen!r}. From the logits, what is p({other}) / "
                        f"p({chosen}): the probability the softmax gave {other!r}, as a fraction of {chosen!r}'s?",
                        "number", fraction, tolerance=max(1e-7, fraction * 1e-3),
                        hint="p = softmax(logits) = e^(l) / Σ e^(l): in a ratio the sum cancels, leaving "
                             "e^(l_b - l_a); "
                             f"l_a and l_b are in {where(found)}",
                        why="Greedy decoding takes the most probable word (within translate's rules) and feeds it "
                            "back; the softmax only keeps the differences of the logits.")
    return question, [StepView("output.logits", t, max_cols=6), StepView("generate.chosen", t)]


def ask_smoothing(run):
    vocab = run.tgt_vocab_size
    found = step(run.walk, "output.probabilities", 0)
    answer = 0.9 + 0.1 / vocab
    question = Question(f"Training with label smoothing ε = 0.1 spreads ε evenly over all {vocab} words of this "
                        "model's target vocabulary (the correct one included, as torch's cross_entropy does). "
                        "What target probability does the correct word get?", "number", answer, tolerance=5e-5,
                        hint=f"the correct word keeps 1 - ε and gets its share ε / V of the spread, with V = {vocab}, "
                             f"the vocabulary size under {where(found)}",
                        why="The loss compares the softmax with this softened target, not with a one-hot vector.")
    return question, [StepView("output.probabilities", 0, max_cols=6)]


def ask_penalty(run):
    """Lesson 12: the winner's score had beam search used the paper's α, from the beam table's sum."""
    from clearformer.learn.onsentence import beam_walk

    tree = beam_walk(run.sentence, run.checkpoint).beam
    best = tree["ranking"][0]
    n = len(best["words"])
    answer = best["logprob"] / ((5 + n) / 6) ** PAPER_ALPHA
    words = " ".join(best["words"])
    question = Question(f"The beam search above finished with {words!r} ({n} tokens, <eos> included), scored with "
                        f"clearformer's α = {DEFAULT_ALPHA:g}. What score would the same hypothesis get with the "
                        f"paper's α = {PAPER_ALPHA:g}?", "number", answer, tolerance=5e-4,
                        hint=f"score = sum / lp(n): keep the sum of its log-probabilities (the finished line's sum, "
                             f"the brevity penalty included) and divide by lp(n) = ((5 + n) / 6)^α with n = {n} and "
                             f"α = {PAPER_ALPHA:g} (the table labels step t with lp(t))",
                        why="A longer hypothesis has more negative log-probabilities; dividing by lp(n) keeps it from "
                            "losing for that alone, and a larger α favours long hypotheses more.")
    return question, [StepView("generate.chosen", _last_step(run))]


def ask_decoder_only(run):
    """Lesson 13: a causal weight of a decoder-only model on the learner's sentence, computed from its scores
    before the mask (the learner chooses which scores count)."""
    from clearformer.learn.onsentence import lm_scores

    words, scaled = lm_scores(run.sentence, run.checkpoint)
    key = 0

    def weight(i: int, j: int) -> float:
        return _softmax_row(scaled[i], [k <= i for k in range(len(words))])[j]

    query = pick([i for i in range(1, len(words))], lambda i: weight(i, key), 5e-4)
    question = Question(f"The decoder-only model's scaled scores on your sentence are printed above, before the causal "
                        f"mask. What attention weight does the query {words[query]!r} (row {query}) give to "
                        f"{words[key]!r} (column {key})?", "number", weight(query, key), tolerance=5e-4,
                        hint="the causal mask lets row i see columns j <= i only (the others get -∞): softmax over "
                             f"the first {query + 1} scores of row {query} of the table \"scaled scores "
                             "Q·Kᵀ/√d_k, BEFORE the causal mask\"",
                        why="A language model is the decoder without cross-attention: each position predicts the next "
                            "token from itself and the tokens before it, all positions at once.")
    return question, []


def ask_cache(run):
    """Lesson 14: what the KV cache holds at the last step, from K's shape."""
    last = _last_step(run)
    found = step(run.walk, "decoder.layers.0.self_attention.K", last)
    rows, d_k, heads = len(found.matrices[0].values), len(found.matrices[0].col_labels), len(found.matrices)
    layers = len({s.layer for s in run.walk.steps if s.name.endswith("self_attention.K") and s.stage == "decoder"})
    question = Question(f"At generation step {last + 1} the decoder computes a query for the newest token only and "
                        f"keeps every earlier key and value in its cache. How many numbers does the self-attention "
                        f"cache of all {layers} decoder layers hold after this step ({heads} heads of d_k = {d_k})?",
                        "number", float(2 * layers * heads * rows * d_k),
                        hint=f"K and V, each one row per position so far (count the rows of "
                             f"{where(found, head=0)}) of d_k numbers per head, in every decoder layer",
                        why="The KV cache keeps the keys and values of every earlier position; each step adds one row "
                            "per layer and head, 2 · n_heads · d_k numbers per token and layer.")
    return question, [StepView("decoder.layers.0.self_attention.Q", last, max_cols=4),
                      StepView("decoder.layers.0.self_attention.K", last, max_cols=4)]


def ask_tied(run):
    """Lesson 15: the one matrix the paper shares (section 3.4), computed from the vocabulary and the width."""
    found = step(run.walk, "src_embed.X")
    d_model = len(found.matrices[0].col_labels)
    vocab = run.tgt_vocab_size
    question = Question(f"Your model shares one matrix between the source embedding, the target embedding and the "
                        f"output projection (paper section 3.4). The toy vocabulary has V = {vocab} tokens. How many "
                        "numbers does that matrix hold?", "number", float(vocab * d_model),
                        hint=f"V x d_model, with d_model the number of columns of {where(found)}",
                        why="One row per token of the joint vocabulary, d_model numbers each: the lookup reads a row, "
                            "the output projection scores every row against the decoder state.")
    return question, [StepView("src_embed.X", max_cols=6)]


# ----------------------------------------------------------------------------- the lessons

LESSONS: list[Lesson] = [
    Lesson(1, "embeddings", "Token ids and embeddings", seeds="000, 002, 003 (lesson 1)",
           concept="A Transformer reads numbers, not words. A vocabulary gives every token an id (seed 002: "
                   "<START>=0, I=1, love=2, you=3, ...), and the embedding matrix E (vocab_size x d_model, here "
                   "10 x 4) gives every id a learned row. Embedding is a lookup: E[ids], which equals multiplying "
                   "a one-hot vector by E, only faster. The paper then multiplies by √d_model; the seeds' toy "
                   "walkthroughs do not.",
           snippet='''from clearformer.explain.examples import I_LOVE_YOU_EMBEDDINGS, I_LOVE_YOU_VOCAB, seed_embedding

ids = torch.tensor([[I_LOVE_YOU_VOCAB.index(word) for word in ["I", "love", "you"]]])
embedding = seed_embedding(I_LOVE_YOU_EMBEDDINGS, d_model=4)   # seed 002's 10 x 4 table
rows = embedding.tokens(ids)                                     # clearformer's TokenEmbedding: E[ids]
one_hot = torch.nn.functional.one_hot(ids, num_classes=10).double()
print("ids:", ids.tolist())
print("E[ids] =", rows[0], sep="\\n")
print("one_hot(ids) @ E equals the lookup:", torch.equal(one_hot @ embedding.tokens.weight, rows))
''', ask=ask_embedding, exercise="transformer", exercise_part="its Embedding",
           page_steps=(r"token_ids$", r"tokens\.lookup$", r"tokens\.scaled$")),
    Lesson(2, "positional-encoding", "Positional encoding", seeds="000, 002, 003 (lesson 2)",
           concept="Attention treats its input as a set: without positions 'I love you' and 'you love I' look "
                   "alike. The paper adds a fixed vector per position: PE(pos, 2i) = sin(pos / 10000^(2i/d)) in "
                   "the even columns and PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) in the odd ones, so each pair "
                   "of columns is a clock of its own speed. 10000 is a constant of the formula, not max_seq_len. "
                   "X = embedding + PE; for 'love' at position 1 in seed 002: [0.9, 0.1, 0.7, 0.3] + "
                   "[0.8415, 0.5403, 0.0100, 0.99995] = [1.7415, 0.6403, 0.7100, 1.29995]. (Seed 000 adds PE(1) "
                   "to 'love' correctly, then uses that vector as the row of 'I' at position 0.)",
           snippet='''from clearformer.explain.examples import I_LOVE_YOU_EMBEDDINGS, seed_embedding
from clearformer.model.embedding import sinusoidal_table

pe = sinusoidal_table(5, 6)            # seed 003: 5 positions, d_model = 6
print("PE (5 x 6) =", pe, sep="\\n")
embedding = seed_embedding(I_LOVE_YOU_EMBEDDINGS, d_model=4)
X = embedding(torch.tensor([[1, 2, 3]]))[0]   # seed 002: "I love you" -> E[ids] + PE
print("X = E[ids] + PE =", X, sep="\\n")
''', ask=ask_pe, exercise="positional-encoding", page_steps=(r"\.PE$", r"embed(ding)?\.X$")),
    Lesson(3, "qkv", "Queries, keys and values", seeds="000, 001, 004",
           concept="Every token asks and answers: its query Q says what it looks for, its key K what it offers, its "
                   "value V what it hands over when attended to. All three are linear projections of the same X: "
                   "Q = X·W^Q + b^Q, K = X·W^K + b^K, V = X·W^V + b^V, with W of shape (d_model x d_k) and a bias b "
                   "(d_k) learned in training and shared by all tokens of a layer and head. The paper writes the "
                   "projections without b; clearformer's layers, like torch's nn.Linear, add it (ModelConfig.bias), "
                   "so a Q recomputed from X·W^Q alone misses the recorded one by b^Q. Below, on your sentence: Q, K "
                   "and V of the first encoder layer; V is what the attention weights will average. Seed 001's 'India "
                   "is great' with its given 4 x 4 weights "
                   "gives Q[India] = [0.95, 0.27, 0.53, 0.89] (the seed's printout is right).",
           snippet='''from clearformer.record import trace
from clearformer.explain.examples import INDIA_W_K, INDIA_W_Q, INDIA_W_V, INDIA_X, seed_attention

X = torch.tensor([INDIA_X], dtype=torch.float64)      # seed 001: (batch 1, 3 tokens, d_model 4)
attention = seed_attention(4, 1, INDIA_W_Q, INDIA_W_K, INDIA_W_V)   # MultiHeadAttention with the seed's W
with trace.Recorder() as recorder:
    attention(X)
Q, K, V = (recorder.get(f"self_attention.{name}")[0, 0] for name in "QKV")
print("Q = X W^Q =", Q, "K = X W^K =", K, "V = X W^V =", V, sep="\\n")
''', ask=ask_q, exercise="heads",
           page_steps=(r"(attention|multi_head)\.(Q|K|V)$", r"^input\.X$")),
    Lesson(4, "attention", "Scaled dot-product attention", seeds="000, 001, 002",
           concept="Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k)·V. Q·Kᵀ scores every query against every key; "
                   "dividing by √d_k keeps the scores from growing with the width and saturating the softmax; "
                   "the softmax turns each row into weights that sum to 1; the output is the weighted average of "
                   "the values. Seed 002's 'I love you' (d_k = 4, √d_k = 2): its row 0 is right (scores 0.96, "
                   "4.15, 2.45; weights 0.125, 0.613, 0.262), but rows 1 and 2 are not: the true scores are "
                   "[4.1483, 4.0761, 2.8646] and [2.4467, 2.8646, 1.6323] (the seed prints 3.21, 5.89, 4.12 and "
                   "2.87, 4.76, 3.54), so 'love' attends 0.401 / 0.387 / 0.211, not 0.16 / 0.60 / 0.25. On your "
                   "sentence below the trained toy model's weights are close to one-hot: dividing by √d_k keeps "
                   "the scores of *random* "
                   "projections at unit variance, but training then grows W^Q and W^K until the scores span tens "
                   "of units, because sharp weights translate the toy set best; saturation here is learned, not a "
                   "failure of the scaling. The snippet's last lines show the unsaturated case beside it: random "
                   "queries and keys of d_k = 64, with and without the division.",
           snippet='''from clearformer.record import trace
from clearformer.explain.examples import (I_LOVE_YOU_EMBEDDINGS, I_LOVE_YOU_W_K, I_LOVE_YOU_W_Q,
                                          I_LOVE_YOU_W_V, seed_attention, seed_embedding)

embedding = seed_embedding(I_LOVE_YOU_EMBEDDINGS, d_model=4)
attention = seed_attention(4, 1, I_LOVE_YOU_W_Q, I_LOVE_YOU_W_K, I_LOVE_YOU_W_V)
with trace.Recorder() as recorder:
    attention(embedding(torch.tensor([[1, 2, 3]])))       # seed 002: "I love you"
scores, scaled, weights, output = (recorder.get(f"self_attention.{name}")[0, 0]
                                   for name in ("scores", "scaled", "weights", "head_outputs"))
print("scores = Q Kᵀ =", scores, "scaled = scores / √4 =", scaled, sep="\\n")
print("weights = softmax(scaled) =", weights, "output = weights V =", output, sep="\\n")
print("row sums of the weights:", weights.sum(dim=-1))
generator = torch.Generator().manual_seed(0)          # untrained: random q, k of d_k = 64
q, k = torch.randn(4, 64, generator=generator), torch.randn(4, 64, generator=generator)
for name, scale in (("divided by √64", 1 / 8), ("not divided", 1.0)):
    w = torch.softmax(q @ k.T * scale, dim=-1)
    print(f"{name:14s}: score spread {float((q @ k.T * scale).std()):6.2f}, largest weight per row", w.max(-1).values)
''', ask=ask_weight, exercise="attention",
           page_steps=(r"(attention|multi_head|masked_example)\.(scores|scaled|weights)$",
                                       r"attention\.head_outputs$")),
    Lesson(5, "masks", "Masks: padding and causal", seeds="002, 004",
           concept="A mask says which keys a query may look at (clearformer: True = may attend); blocked cells get "
                   "-∞ before the softmax, so their weight is exactly 0. The padding mask hides the <pad> tokens that "
                   "fill short sentences of a batch. The causal (look-ahead) mask hides later positions in the "
                   "decoder: position i sees j <= i, a lower triangle. Seed 002's masked example gets rows 0 and 1 "
                   "right, but row 2 is softmax([1.2, 1.9, 2.3]) = [0.166, 0.335, 0.499] (the seed says 0.19, 0.38, "
                   "0.43) and row 3 is [0.124, 0.226, 0.276, 0.373] (not 0.14, 0.25, 0.30, 0.31). A query with "
                   "every key blocked gets all-zero weights in clearformer, not NaN.",
           snippet='''from clearformer.explain.examples import MASKED_SCORES
from clearformer.model.attention import causal_mask, masked_softmax, padding_mask

mask = causal_mask(4)                                    # True = may attend
print("causal mask =", mask.int(), sep="\\n")
weights = masked_softmax(torch.tensor(MASKED_SCORES), mask)   # seed 002: <START> Je t' aime
print("masked softmax =", weights, sep="\\n")
batch = torch.tensor([[5, 6, 7], [8, 9, 0]])             # the second sentence is padded with id 0
print("padding mask (batch, 1, 1, keys) =", padding_mask(batch, pad_id=0).int(), sep="\\n")
''', ask=ask_mask, exercise="causal-mask", page_steps=(r"\.mask$", r"^masked_example\.")),
    Lesson(6, "multi-head", "Multi-head attention", seeds="000, 001, 004",
           concept="One attention sees one kind of relation; h heads see h at once. d_model is split, not copied: "
                   "each head works in d_k = d_model / h dimensions with its own W_i^Q, W_i^K, W_i^V, the heads' "
                   "outputs are concatenated back to d_model columns, and W^O (d_model x d_model) mixes them: "
                   "MultiHead = Concat(head_1, ..., head_h)·W^O. Seed 001's two-head example (np.random.seed(1) "
                   "weights) is right: the 'India' row is [2.3151, 1.7958, 3.6214, 3.3451]. Q, K and V are not "
                   "concatenated; the heads' outputs are (seed 004).",
           snippet='''import numpy as np
from clearformer.record import trace
from clearformer.explain.examples import INDIA_X, india_two_head_weights, seed_attention

w = india_two_head_weights()      # seed 001: np.random.seed(1), two heads of d_k = 2, and W_O
attention = seed_attention(4, 2, np.concatenate([w["Wq1"], w["Wq2"]], axis=1),
                           np.concatenate([w["Wk1"], w["Wk2"]], axis=1),
                           np.concatenate([w["Wv1"], w["Wv2"]], axis=1), w["W_O"], name="multi_head")
with trace.Recorder() as recorder:
    output = attention(torch.tensor([INDIA_X], dtype=torch.float64))[0]
print("head outputs (heads, tokens, d_k) =", recorder.get("multi_head.head_outputs")[0], sep="\\n")
print("Concat(head_1, head_2) =", recorder.get("multi_head.concat")[0], sep="\\n")
print("MultiHead = Concat · W^O =", output, sep="\\n")
''', ask=ask_concat, exercise="heads", page_steps=(r"(attention|multi_head)\.(head_outputs|concat|output)$",)),
    Lesson(7, "add-norm-ffn", "Add & Norm and the feed-forward network", seeds="000, 002, 004",
           concept="After each sublayer: Output = LayerNorm(x + Sublayer(x)). The residual 'Add' lets information and "
                   "gradients pass straight through; LayerNorm rescales each token vector to mean 0 and variance 1 "
                   "(the population variance, dividing by d_model), then scales by γ and shifts by β. The "
                   "feed-forward network FFN(x) = max(0, x·W_1 + b_1)·W_2 + b_2 works on each position alone, "
                   "widening to d_ff (2048 in the paper, 4 x d_model) and back.",
           snippet='''from clearformer.record import trace
from clearformer.config import ModelConfig
from clearformer.explain.examples import INDIA_X
from clearformer.model.transformer import Transformer

torch.manual_seed(0)
model = Transformer(ModelConfig(d_model=4, n_heads=1, d_ff=16))   # one encoder layer, d_ff = 4 x d_model
layer = model.encoder.layers[0]
with trace.Recorder() as recorder:
    layer(torch.tensor([INDIA_X]))                                 # seed 001's X
residual = recorder.get("encoder.layers.0.add_norm_1.residual")[0]
norm = recorder.get("encoder.layers.0.add_norm_1.norm")[0]
print("x + Sublayer(x) =", residual, "LayerNorm(...) =", norm, sep="\\n")
print("mean per token:", norm.mean(-1), "variance per token:", norm.var(-1, unbiased=False))
print("FFN hidden (ReLU) =", recorder.get("encoder.layers.0.feed_forward.hidden")[0], sep="\\n")
''', ask=ask_residual, exercise="layer-norm",
           page_steps=(r"add_norm_\d\.(residual|norm)$", r"feed_forward\.(hidden|output)$")),
    Lesson(8, "encoder", "The encoder", seeds="000, 002, 003 (lesson 4)",
           concept="The encoder stacks N identical layers (6 in the paper), each self-attention then feed-forward, "
                   "each wrapped in Add & Norm. It reads the whole source at once, unmasked: every word sees every "
                   "other word, before and after it, so all positions are computed in parallel (an RNN must wait "
                   "for the previous word). Its output, the memory, has one context-aware d_model vector per source "
                   "token; every decoder layer attends to it.",
           snippet='''from clearformer.record import trace
from clearformer.config import ModelConfig
from clearformer.model.transformer import Transformer

torch.manual_seed(0)
model = Transformer(ModelConfig(d_model=8, n_heads=2, d_ff=32, n_encoder_layers=2)).eval()
source = torch.tensor([[1, 2, 3]])                      # seed 002's ids of "I love you"
with trace.Recorder() as recorder:
    model(source, torch.tensor([[0]]))                 # the encoder runs once per source
memory = recorder.get("encoder.output")
print("memory shape (batch, source tokens, d_model):", tuple(memory.shape))
print("layers run:", sorted({r.name.split(".")[2] for r in recorder.find(".norm") if r.name.startswith("encoder")}))
print("layer 1 self-attention weights (unmasked, rows sum to 1) =",
      recorder.get("encoder.layers.1.self_attention.weights")[0, 0], sep="\\n")
''', ask=ask_memory, exercise="transformer", exercise_part="its EncoderLayer", page_steps=(r"^encoder\.output$",)),
    Lesson(9, "decoder", "The decoder: masked self-attention and cross-attention", seeds="002, 003 (lesson 4)",
           concept="The decoder reads the target shifted right (<START> Je t' aime -> predicts Je t' aime <END>). "
                   "Its masked self-attention lets each position see only itself and earlier words, so training "
                   "on whole sentences cannot cheat. Its cross-attention takes queries from the decoder and keys "
                   "and values from the encoder output. A row of the cross-attention belongs to the decoder INPUT at "
                   "its position, and the decoder's output there predicts the NEXT word: the row labelled <START> "
                   "is where 'Je' is chosen, the row 'Je' where 't'' is chosen, the row 'aime' where <END> is. So a "
                   "row shows which source words the model consulted while choosing the word after its label, not "
                   "the source word its own label translates. Then the feed-forward; each sublayer with Add & Norm, "
                   "self-attention first, then cross-attention, in every decoder layer. The snippet's model is "
                   "untrained (random weights): it shows the shapes of both weight matrices, not an alignment. On "
                   "your sentence below, recorded from the trained toy model at the last generation step (every "
                   "row in view), the head the question picks is the one whose rows point most sharply at source "
                   "words; other heads look at the end marker or spread out, and which head aligns differs from "
                   "run to run. The answer's feedback lists that head's rows: what each one chose and where it "
                   "looked.",
           snippet='''from clearformer.record import trace
from clearformer.config import ModelConfig
from clearformer.model.transformer import Transformer

torch.manual_seed(0)
model = Transformer(ModelConfig(d_model=8, n_heads=2, d_ff=32)).eval()
source, target_in = torch.tensor([[1, 2, 3]]), torch.tensor([[0, 4, 5, 6]])   # I love you / <START> Je t' aime
with trace.Recorder() as recorder:
    model(source, target_in)
print("masked self-attention weights (head 0) =",
      recorder.get("decoder.layers.0.self_attention.weights")[0, 0], sep="\\n")
print("cross-attention weights (head 0; rows: target, columns: source) =",
      recorder.get("decoder.layers.0.cross_attention.weights")[0, 0], sep="\\n")
''', ask=ask_cross, page_leads=(r"cross_attention\.",), exercise="transformer",
           exercise_part="its DecoderLayer (self-attention, then cross-attention)",
           page_steps=(r"cross_attention\.", r"^decoder\.layers\.\d+\.self_attention\.(weights|mask)$")),
    Lesson(10, "output-greedy", "The output softmax and greedy decoding", seeds="002",
           concept="The decoder's last vector for a position is projected to one score (logit) per vocabulary word "
                   "and a softmax turns the scores into probabilities. Greedy decoding takes the most probable word, "
                   "appends it to the decoder input and repeats until <END>. Seed 002's logits for the first "
                   "position are right: P(Je) = 0.4792, so 'Je' is chosen; exp(-0.5) = 0.61 and the sum 25.43 "
                   "check out.",
           snippet='''from clearformer.explain.examples import I_LOVE_YOU_VOCAB, OUTPUT_LOGITS

logits = torch.tensor(OUTPUT_LOGITS)                     # seed 002: the scores for the first position
probabilities = torch.softmax(logits, dim=-1)
for word, p in zip(I_LOVE_YOU_VOCAB, probabilities.tolist()):
    print(f"{word:8s} {p:.4f}")
print("greedy choice:", I_LOVE_YOU_VOCAB[int(probabilities.argmax())])
''', ask=ask_probability, exercise="greedy-decode",
           page_steps=(r"output\.(logits|probabilities)$", r"generate\.chosen$",
                                      r"^decoder\.output$")),
    Lesson(11, "training", "Training: label smoothing and the warm-up schedule", seeds="000, 003",
           concept="Training compares the predicted distribution with the target word by cross-entropy. The paper "
                   "smooths the target (ε = 0.1): clearformer, like torch's cross_entropy, gives the correct word "
                   "1 - ε + ε/V and every other word ε/V, so the model is not pushed to infinite confidence. "
                   "Adam runs with the learning rate lr = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5): it "
                   "rises linearly for `warmup` steps (4000 in the paper), peaks there, then decays as 1/√step.",
           snippet='''from clearformer.explain.examples import I_LOVE_YOU_VOCAB, OUTPUT_LOGITS
from clearformer.train.loss import label_smoothed_loss
from clearformer.train.schedule import noam_lr

logits = torch.tensor([[OUTPUT_LOGITS]])                 # seed 002's first position; the answer is "Je"
label = torch.tensor([[I_LOVE_YOU_VOCAB.index("Je")]])
for smoothing in (0.0, 0.1):
    loss, nll, tokens = label_smoothed_loss(logits, label, pad_id=-1, smoothing=smoothing)
    print(f"smoothing {smoothing}: loss {float(loss):.4f} (plain -log p(Je) = {float(nll):.4f})")
for step in (1, 1000, 4000, 16000):
    print(f"lr at step {step:5d} (d_model 512, warmup 4000): {noam_lr(step, 512, 4000):.3e}")
''', ask=ask_smoothing, exercise="label-smoothing", page_steps=(r"output\.probabilities$",)),
    Lesson(12, "beam-search", "Beam search and its length penalty", seeds="002",
           concept="Greedy decoding keeps one prefix; beam search keeps the k most probable prefixes (k = 4 in the "
                   "paper). At each step every prefix is extended by every word, scored by the sum of its "
                   "log-probabilities, and the best k go on; those ending in <eos> are finished. Because every "
                   "extra word adds a negative log-probability, long hypotheses would lose, so a finished one is "
                   "scored log p / lp(n) with GNMT's lp(n) = ((5 + n) / 6)^α. The paper uses α = 0.6; clearformer "
                   "uses α = 2.0 (`--alpha 0.6` gives the paper's): its small models, trained for minutes, end "
                   "translations too early, and a larger α translated longer and better on a trained model "
                   "(BENCHMARKS.md, 'Translation length: the length penalty on one trained model'). For the same "
                   "reason it adds a brevity penalty (generate/brevity.py): ending a hypothesis of t tokens when "
                   "the training data's length ratio r expects r·m for a source of m tokens costs "
                   "w·max(0, r·m - t)²/(r·m) on <eos> (w = 2.0, `--brevity 0` turns it off). Below: the real "
                   "table of `clearformer explain SENTENCE --beam 2` on your sentence.",
           snippet='''from clearformer.explain.examples import I_LOVE_YOU_VOCAB, OUTPUT_LOGITS
from clearformer.generate.beam import length_penalty
from clearformer.generate.options import DEFAULT_ALPHA

log_probs = torch.log_softmax(torch.tensor(OUTPUT_LOGITS), dim=-1)   # seed 002's first position
scores, words = log_probs.topk(4)                                     # the 4 beams after step 1
for score, word in zip(scores.tolist(), words.tolist()):
    print(f"beam {I_LOVE_YOU_VOCAB[word]:6s} log p = {score:.4f}")
for n in (1, 2, 5, 10):
    print(f"lp({n:2d}): paper alpha 0.6 = {length_penalty(n, 0.6):.4f}, clearformer alpha {DEFAULT_ALPHA} = "
          f"{length_penalty(n, DEFAULT_ALPHA):.4f}")
''', ask=ask_penalty, exercise="beam-step", page_steps=(r"generate\.chosen$",), extra={"show": "beam"}),
    Lesson(13, "decoder-only", "The decoder-only language model", seeds="004",
           concept="A language model (GPT) is the decoder alone, without cross-attention: it predicts the next token "
                   "at every position at once, each seeing only itself and earlier tokens through the causal mask. "
                   "Seed 004 walks 'life is short eat dessert first' through the mask; its final matrix is "
                   "illustrative, not computed: softmax of its masked row 'is' [0.2, 0.6] is [0.401, 0.599], not "
                   "[0.3, 0.7]. On your sentence below: clearformer's own decoder-only model (model/lm.py, one layer "
                   "of the toy translator's width) reads it as a language model would, <bos> first. The lessons train "
                   "no language model, so its weights are random (seed 0): the table shows the mechanism, the causal "
                   "mask at work on your tokens, not learned language (`clearformer train --preset lm-tiny` trains "
                   "one and `clearformer lm` writes with it). Its scaled scores are printed before the mask.",
           snippet='''from clearformer.record import trace
from clearformer.config import preset
from clearformer.model.attention import causal_mask, masked_softmax
from clearformer.model.lm import LanguageModel

scaled = torch.tensor([[0.5, 0.4, 0.3, 0.2, 0.1, 0.0], [0.2, 0.6, 0.4, 0.1, 0.1, 0.0],
                       [0.2, 0.3, 0.7, 0.2, 0.2, 0.1], [0.1, 0.1, 0.2, 0.6, 0.4, 0.2],
                       [0.1, 0.1, 0.2, 0.2, 0.7, 0.5], [0.0, 0.1, 0.1, 0.2, 0.3, 0.7]])  # seed 004
print("seed 004's weights, computed =", masked_softmax(scaled, causal_mask(6)), sep="\\n")
torch.manual_seed(0)
model = LanguageModel(preset("lm-tiny", tgt_vocab_size=10, d_model=8, n_heads=2, n_decoder_layers=1)).eval()
with trace.Recorder() as recorder:
    logits = model(torch.tensor([[1, 2, 3, 4, 5, 6]]))
print("next-token logits per position:", tuple(logits.shape))
print("layer 0 weights (head 0) =", recorder.get("decoder.layers.0.self_attention.weights")[0, 0], sep="\\n")
''', ask=ask_decoder_only, exercise="causal-mask", page_steps=(), extra={"show": "lm"}),
    Lesson(14, "kv-cache-mla", "The KV cache and Multi-Head Latent Attention", seeds="004",
           concept="Generating token t needs the keys and values of all earlier tokens, which do not change: the KV "
                   "cache keeps them, so each step computes Q, K and V for the newest token only and appends. "
                   "The cache costs 2 · n_heads · d_k numbers per token and layer. DeepSeek-V2's Multi-Head Latent "
                   "Attention (MLA) caches one small latent c_KV (d_c numbers) plus a shared RoPE key instead, and "
                   "rebuilds every head's keys and values from it: 28.1% of MHA's cache for lm-small. Below, "
                   "after your sentence's cache: the latent each of its tokens leaves in an MLA layer.",
           snippet='''from clearformer.record import trace
from clearformer.config import preset, variant_overrides
from clearformer.explain.examples import INDIA_W_K, INDIA_W_Q, INDIA_W_V, INDIA_X, seed_attention
from clearformer.model.attention import causal_mask, explicit_attention
from clearformer.model.cache import kv_cache_bytes_per_token

with trace.Recorder() as recorder:     # seed 001's Q, K, V, read as a decoder would (causally)
    seed_attention(4, 1, INDIA_W_Q, INDIA_W_K, INDIA_W_V)(torch.tensor([INDIA_X], dtype=torch.float64))
q, k, v = (recorder.get(f"self_attention.{name}") for name in "QKV")     # (1, 1, 3 tokens, 4)
full, _ = explicit_attention(q, k, v, causal_mask(3))                    # all positions at once, masked
steps = [explicit_attention(q[:, :, t:t + 1], k[:, :, :t + 1], v[:, :, :t + 1])[0] for t in range(3)]
print("one token at a time with the cache == all at once:", torch.allclose(torch.cat(steps, 2), full))
for variant in ("mha", "mla"):
    config = preset("lm-small", tgt_vocab_size=100, **variant_overrides(variant, 256, 8))
    cache = kv_cache_bytes_per_token(config)
    print(f"{variant}: {cache['bytes_total']} bytes per token ({cache['fraction_of_mha']:.1%} of MHA)")
''', ask=ask_cache, exercise="transformer",
           exercise_part="its translate loop (it recomputes every step; the cache is what model/cache.py adds)",
           page_steps=(r"self_attention\.(latent|K_rope)$",), extra={"show": "mla"}),
    Lesson(15, "put-it-together", "Put it together: your Transformer", seeds="003 (the plan's last step)",
           concept="Seed 003's plan ends with complete PyTorch code for a small Transformer. `clearformer learn "
                   "exercise transformer` writes it, about 160 lines in the paper's order (embeddings and positions, "
                   "multi-head attention, feed-forward, layer norm, encoder layer, decoder layer, the model, greedy "
                   "translation), built from your exercise files: positional_encoding.py, attention.py, heads.py, "
                   "causal_mask.py, layer_norm.py, greedy_decode.py beside it. Fill the blocks marked `# yours:`. "
                   "`clearformer learn check transformer transformer.py` loads the trained toy run's weights into "
                   "your model (a mapping of names, printed below: encoder.0.self_attn.w_q is clearformer's "
                   "encoder.layers.0.self_attention.w_q) and compares, on the toy test sentences, the logits (to "
                   "1e-5) and the greedy translations, naming the first module whose output differs. `clearformer "
                   "learn train transformer.py` trains your model with clearformer's own trainer (the paper's Adam, "
                   "warm-up and label smoothing, for the toy preset's steps; it prints the time it took), your modules "
                   "doing the math, "
                   "saves it as a clearformer run and translates 'I love you' with it: 'Je t'aime'. What "
                   "src/clearformer/model/ adds to your file: the KV cache (model/cache.py: keys and values of "
                   "earlier tokens kept, so each step computes one new row; lesson 14); the fused kernel "
                   "(model/attention.py's fast_attention: torch's scaled_dot_product_attention, one call instead of "
                   "matmul, softmax, matmul, when nothing is recorded); GQA and MLA (model/variants.py, "
                   "model/latent.py: fewer key/value heads, or one small latent per token, for a smaller cache); and "
                   "the recorder (record/trace.py: every intermediate named and kept, which is how `clearformer "
                   "explain` and these lessons show your sentence's steps).",
           snippet='''from clearformer.config import preset
from clearformer.learn.capstone import clearformer_name
from clearformer.model.transformer import Transformer

for mine in ["src_embed.table.weight", "encoder.0.self_attn.w_q.weight", "encoder.0.norm1.gamma",
             "encoder.0.ffn.linear1.bias", "decoder.1.cross_attn.w_o.weight", "decoder.1.norm3.beta", "out.bias"]:
    print(f"{mine:34s} -> {clearformer_name(mine)}")
model = Transformer(preset("toy-translate", src_vocab_size=329, tgt_vocab_size=329, tie_embeddings="all"))
print("parameters of the toy-sized model (the shared matrix counted once):", model.num_parameters())
''', ask=ask_tied, exercise="transformer", page_steps=()),
    # the production student against the paper, on the learner's sentence: learn/browser.py (its table: extras.py)
    Lesson(16, "browser", "What your browser runs: Firefox's translator", seeds="none (issue 38: Firefox's en-pt "
           "student)", concept=browser.CONCEPT, snippet=browser.SNIPPET, ask=browser.ask_browser,
           exercise="transformer", exercise_part="its decoder layer: put the SSRU's three lines where its masked "
                                                  "self-attention is, as model/ssru.py does",
           page_steps=(), extra={"show": "browser"}),
]


def lesson(number: int) -> Lesson:
    for item in LESSONS:
        if item.number == number:
            return item
    raise KeyError(number)
