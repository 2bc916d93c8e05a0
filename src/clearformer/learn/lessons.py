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

from collections.abc import Callable
from dataclasses import dataclass, field

from clearformer.explain.walkthrough import Walkthrough
from clearformer.learn.questions import Question, cell, step, where


@dataclass
class LearnerRun:
    """What the toy model recorded on the learner's sentence."""

    sentence: str
    walk: Walkthrough
    tgt_vocab_size: int


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


def _source(run: LearnerRun) -> list[str]:
    return run.walk.source_tokens


def _last_step(run: LearnerRun) -> int:
    return max(s.decode_step for s in run.walk.steps if s.decode_step is not None)


# ----------------------------------------------------------------------------- questions on the sentence


def ask_ids(run):
    tokens = _source(run)
    position = 1 if len(tokens) > 1 else 0
    found = step(run.walk, "src_embed.token_ids")
    answer = cell(found, 0, position)
    question = Question(f"What is the token id of {tokens[position]!r}, the source token at position {position}?",
                        "number", answer, hint=f"read {where(found, col=tokens[position])}",
                        why="The id is the row of the embedding table that the lookup takes.")
    return question, [StepView("src_embed.token_ids"), StepView("src_embed.tokens.lookup")]


def ask_pe(run):
    tokens = _source(run)
    position = len(tokens) - 1
    found = step(run.walk, "src_embed.positions.PE")
    answer = cell(found, position, 1)
    question = Question(f"In the positional encoding of your sentence, what is PE at position {position} "
                        f"({tokens[position]!r}), dimension 1 (a cosine)?", "number", answer, tolerance=5e-4,
                        hint=f"read {where(found, row=tokens[position], col='d1')}: it is cos({position})",
                        why="Dimension 1 has wavelength 2π: PE(pos, 1) = cos(pos / 10000^0) = cos(pos).")
    return question, [StepView("src_embed.positions.PE", max_cols=6)]


def ask_q(run):
    tokens = _source(run)
    position = 0
    found = step(run.walk, "encoder.layers.0.self_attention.Q")
    answer = cell(found, position, 0, head=0)
    question = Question(f"Encoder layer 0, head 0: what is the first number (d0) of the query Q of "
                        f"{tokens[position]!r}?", "number", answer, tolerance=5e-4,
                        hint=f"read {where(found, head=0, row=tokens[position], col='d0')}",
                        why="Q = X · W^Q: one row per token, d_k columns per head.")
    return question, [StepView("encoder.layers.0.self_attention.Q"), StepView("encoder.layers.0.self_attention.K")]


def ask_scaled(run):
    tokens = _source(run)
    row, col = 0, 1 if len(tokens) > 1 else 0
    found = step(run.walk, "encoder.layers.0.self_attention.scaled")
    answer = cell(found, row, col, head=0)
    question = Question(f"Encoder layer 0, head 0: what is the scaled score of {tokens[row]!r} against "
                        f"{tokens[col]!r}?", "number", answer, tolerance=5e-4,
                        hint=f"read {where(found, head=0, row=tokens[row], col=tokens[col])} "
                             f"(= the score QKᵀ divided by √d_k)",
                        why="Row = the query's token, column = the key's token; scaled = Q·Kᵀ / √d_k.")
    return question, [StepView("encoder.layers.0.self_attention.scores"),
                      StepView("encoder.layers.0.self_attention.scaled"),
                      StepView("encoder.layers.0.self_attention.weights")]


def ask_mask(run):
    last = _last_step(run)
    found = step(run.walk, "decoder.layers.0.self_attention.mask", last)
    matrix = found.matrices[0]
    row, col = (0, len(matrix.col_labels) - 1) if len(matrix.col_labels) > 1 else (0, 0)
    allowed = matrix.values[row][col] == 1
    choices = ["yes, it may attend to it", "no, the mask blocks it"]
    question = Question(f"In the decoder's masked self-attention (layer 0, generation step {last + 1}), may the "
                        f"query {matrix.row_labels[row]!r} (row) attend to {matrix.col_labels[col]!r} (column)?",
                        "choice", choices[0] if allowed else choices[1], choices=choices,
                        hint=f"read {where(found, row=matrix.row_labels[row], col=matrix.col_labels[col])}: "
                             "1 = may attend, 0 = blocked",
                        why="The causal mask lets position i see positions j <= i only: never a later word.")
    return question, [StepView("decoder.layers.0.self_attention.mask", last),
                      StepView("decoder.layers.0.self_attention.weights", last)]


def ask_concat(run):
    tokens = _source(run)
    heads = step(run.walk, "encoder.layers.0.self_attention.head_outputs")
    d_head = len(heads.matrices[0].col_labels)
    found = step(run.walk, "encoder.layers.0.self_attention.concat")
    answer = cell(found, 0, d_head)
    question = Question(f"Encoder layer 0: each head outputs d_k = {d_head} numbers per token. What is column "
                        f"d{d_head} of the concatenated heads for {tokens[0]!r}?", "number", answer,
                        tolerance=5e-4,
                        hint=f"column d{d_head} is the first column of head 1: read "
                             + where(heads, head=1, row=tokens[0], col="d0"),
                        why="Concat puts the heads side by side: head h fills columns h·d_k .. (h+1)·d_k - 1.")
    return question, [StepView("encoder.layers.0.self_attention.head_outputs", head=1, max_cols=4),
                      StepView("encoder.layers.0.self_attention.concat", cols=(d_head - 2, d_head + 3))]


def ask_residual(run):
    tokens = _source(run)
    found = step(run.walk, "encoder.layers.0.add_norm_1.residual")
    answer = cell(found, 0, 0)
    question = Question(f"Encoder layer 0, first Add & Norm: what is the residual sum x + Sublayer(x) for "
                        f"{tokens[0]!r}, dimension d0?", "number", answer, tolerance=5e-4,
                        hint=f"add the d0 of {tokens[0]!r} in the steps \"Input X\" and \"Multi-head output\", "
                             f"or read {where(found, row=tokens[0], col='d0')}",
                        why="Add: the sublayer's output is added to its own input; Norm then rescales the sum.")
    return question, [StepView("src_embed.X", max_cols=4),
                      StepView("encoder.layers.0.self_attention.output", max_cols=4),
                      StepView("encoder.layers.0.add_norm_1.residual", max_cols=4),
                      StepView("encoder.layers.0.add_norm_1.norm", max_cols=4),
                      StepView("encoder.layers.0.feed_forward.hidden", max_cols=6)]


def ask_memory(run):
    found = step(run.walk, "encoder.output")
    rows = len(found.matrices[0].values)
    question = Question("How many vectors does the encoder hand to the decoder (rows of the encoder output) "
                        "for your sentence?", "number", float(rows),
                        hint=f"count the rows of {where(found)}: one per source token, <eos> included",
                        why="One context-aware vector per source token; every decoder layer attends to all of them.")
    return question, [StepView("encoder.output", max_cols=6)]


def ask_cross(run):
    tokens = _source(run)
    layers = sorted({s.layer for s in run.walk.steps if s.name.endswith("cross_attention.weights")})
    name = f"decoder.layers.{layers[-1]}.cross_attention.weights"
    found = step(run.walk, name, 0)
    row = found.matrices[0].values[-1]
    best = max(range(len(row)), key=lambda j: row[j])
    choices = list(dict.fromkeys(tokens))
    question = Question(f"Generation step 1 (choosing the first word): in decoder layer {layers[-1]}, head 0, "
                        "which source token gets the largest cross-attention weight?", "choice", tokens[best],
                        choices=choices, hint=f"find the largest number in {where(found, head=0)}",
                        why="Cross-attention: queries from the decoder, keys and values from the encoder output.")
    return question, [StepView(name, 0), StepView(f"decoder.layers.{layers[-1]}.self_attention.weights", 0)]


def ask_probability(run):
    found = step(run.walk, "output.probabilities", 0)
    chosen = step(run.walk, "generate.chosen", 0).matrices[0].note
    values = found.matrices[0].values[0]
    answer = values[found.matrices[0].col_labels.index(chosen)] if chosen in found.matrices[0].col_labels \
        else max(values)
    question = Question(f"Generation step 1 chose {chosen!r}. What probability did the softmax give it?",
                        "number", answer, tolerance=5e-4, hint=f"read {where(found, col=chosen)}",
                        why="Greedy decoding takes the most probable word (within translate's rules) and feeds it "
                            "back.")
    return question, [StepView("output.probabilities", 0, max_cols=6), StepView("generate.chosen", 0)]


def ask_smoothing(run):
    vocab = run.tgt_vocab_size
    found = step(run.walk, "output.probabilities", 0)
    answer = 0.9 + 0.1 / vocab
    question = Question(f"Training with label smoothing ε = 0.1 spreads ε evenly over all {vocab} words of this "
                        "model's target vocabulary (the correct one included, as torch's cross_entropy does). "
                        "What target probability does the correct word get?", "number", answer, tolerance=5e-5,
                        hint=f"1 - ε + ε / V with V = {vocab}, the vocabulary size under {where(found)}",
                        why="The loss compares the softmax with this softened target, not with a one-hot vector.")
    return question, [StepView("output.probabilities", 0, max_cols=6)]


def ask_penalty(run):
    generated = run.walk.target_tokens[1:]
    length = len(generated)
    answer = ((5 + length) / 6) ** 0.6
    question = Question(f"Your translation is the {length} chosen tokens {' '.join(generated)!r} (an end marker "
                        "counts). What is the GNMT length penalty lp(n) = ((5 + n) / 6)^α for it, at the paper's "
                        "α = 0.6?", "number", answer, tolerance=5e-4,
                        hint=f"n = {length}, the number of steps \"Chosen token\" below",
                        why="Beam search divides a hypothesis' log-probability by lp(n), so longer ones are not "
                            "punished for having more factors below 1.")
    views = [StepView("generate.chosen", t) for t in range(_last_step(run) + 1)]
    return question, views


def ask_decoder_only(run):
    choices = ["the masked self-attention", "the cross-attention to the encoder output", "the feed-forward network"]
    found = step(run.walk, "decoder.layers.0.cross_attention.weights", 0)
    question = Question("A decoder-only language model (GPT, or clearformer's `lm`) keeps the decoder layer you see "
                        "here but drops one of its sublayers. Which one?", "choice", choices[1], choices=choices,
                        hint=f"there is no encoder to look at: see {where(found)}",
                        why="Without a source there is no memory to attend to; the causal self-attention remains.")
    return question, [StepView("decoder.layers.0.self_attention.weights", 0),
                      StepView("decoder.layers.0.cross_attention.weights", 0)]


def ask_cache(run):
    last = _last_step(run)
    found = step(run.walk, "decoder.layers.0.self_attention.K", last)
    rows = len(found.matrices[0].values)
    question = Question(f"At generation step {last + 1} the decoder computes a query for the newest token only. "
                        "How many rows does its self-attention K have (layer 0, head 0)?", "number", float(rows),
                        hint=f"count the rows of {where(found, head=0)}: the cached keys plus the new one",
                        why="The KV cache keeps the keys and values of every earlier position; each step adds one.")
    return question, [StepView("decoder.layers.0.self_attention.Q", last, max_cols=4),
                      StepView("decoder.layers.0.self_attention.K", last, max_cols=4)]


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
''', ask=ask_ids, page_steps=(r"token_ids$", r"tokens\.lookup$", r"tokens\.scaled$")),
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
''', ask=ask_pe, page_steps=(r"\.PE$", r"embed(ding)?\.X$")),
    Lesson(3, "qkv", "Queries, keys and values", seeds="000, 001, 004",
           concept="Every token asks and answers: its query Q says what it looks for, its key K what it offers, its "
                   "value V what it hands over when attended to. All three are linear projections of the same X: "
                   "Q = X·W^Q, K = X·W^K, V = X·W^V, with W of shape (d_model x d_k) learned in training and shared "
                   "by all tokens of a layer and head. Seed 001's 'India is great' with its given 4 x 4 weights "
                   "gives Q[India] = [0.95, 0.27, 0.53, 0.89] (the seed's printout is right).",
           snippet='''from clearformer.record import trace
from clearformer.explain.examples import INDIA_W_K, INDIA_W_Q, INDIA_W_V, INDIA_X, seed_attention

X = torch.tensor([INDIA_X], dtype=torch.float64)      # seed 001: (batch 1, 3 tokens, d_model 4)
attention = seed_attention(4, 1, INDIA_W_Q, INDIA_W_K, INDIA_W_V)   # MultiHeadAttention with the seed's W
with trace.Recorder() as recorder:
    attention(X)
Q, K, V = (recorder.get(f"self_attention.{name}")[0, 0] for name in "QKV")
print("Q = X W^Q =", Q, "K = X W^K =", K, "V = X W^V =", V, sep="\\n")
''', ask=ask_q, page_steps=(r"(attention|multi_head)\.(Q|K|V)$", r"^input\.X$")),
    Lesson(4, "attention", "Scaled dot-product attention", seeds="000, 001, 002",
           concept="Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k)·V. Q·Kᵀ scores every query against every key; "
                   "dividing by √d_k keeps the scores from growing with the width and saturating the softmax; "
                   "the softmax turns each row into weights that sum to 1; the output is the weighted average of "
                   "the values. Seed 002's 'I love you' (d_k = 4, √d_k = 2): its row 0 is right (scores 0.96, "
                   "4.15, 2.45; weights 0.125, 0.613, 0.262), but rows 1 and 2 are not: the true scores are "
                   "[4.1483, 4.0761, 2.8646] and [2.4467, 2.8646, 1.6323] (the seed prints 3.21, 5.89, 4.12 and "
                   "2.87, 4.76, 3.54), so 'love' attends 0.401 / 0.387 / 0.211, not 0.16 / 0.60 / 0.25.",
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
''', ask=ask_scaled, page_steps=(r"(attention|multi_head|masked_example)\.(scores|scaled|weights)$",
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
''', ask=ask_mask, page_steps=(r"\.mask$", r"^masked_example\.")),
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
''', ask=ask_concat, page_steps=(r"(attention|multi_head)\.(head_outputs|concat|output)$",)),
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
''', ask=ask_residual, page_steps=(r"add_norm_\d\.(residual|norm)$", r"feed_forward\.(hidden|output)$")),
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
''', ask=ask_memory, page_steps=(r"^encoder\.output$",)),
    Lesson(9, "decoder", "The decoder: masked self-attention and cross-attention", seeds="002, 003 (lesson 4)",
           concept="The decoder reads the target shifted right (<START> Je t' aime -> predicts Je t' aime <END>). "
                   "Its masked self-attention lets each position see only itself and earlier words, so training "
                   "on whole sentences cannot cheat. Its cross-attention takes queries from the decoder and keys "
                   "and values from the encoder output: each target word looks at the source words, which learns "
                   "an alignment ('aime' with 'love'). Then the feed-forward; each sublayer with Add & Norm.",
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
''', ask=ask_cross, page_steps=(r"cross_attention\.", r"^decoder\.layers\.\d+\.self_attention\.(weights|mask)$")),
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
''', ask=ask_probability, page_steps=(r"output\.(logits|probabilities)$", r"generate\.chosen$",
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
''', ask=ask_smoothing, page_steps=(r"output\.probabilities$",)),
    Lesson(12, "beam-search", "Beam search and its length penalty", seeds="002",
           concept="Greedy decoding keeps one prefix; beam search keeps the k most probable prefixes (k = 4 in the "
                   "paper). At each step every prefix is extended by every word, scored by the sum of its "
                   "log-probabilities, and the best k go on; those ending in <eos> are finished. Because every "
                   "extra word adds a negative log-probability, long hypotheses would lose, so a finished one is "
                   "scored log p / lp(n) with GNMT's lp(n) = ((5 + n) / 6)^α (α = 0.6 in the paper).",
           snippet='''from clearformer.explain.examples import I_LOVE_YOU_VOCAB, OUTPUT_LOGITS
from clearformer.generate.beam import length_penalty

log_probs = torch.log_softmax(torch.tensor(OUTPUT_LOGITS), dim=-1)   # seed 002's first position
scores, words = log_probs.topk(4)                                     # the 4 beams after step 1
for score, word in zip(scores.tolist(), words.tolist()):
    print(f"beam {I_LOVE_YOU_VOCAB[word]:6s} log p = {score:.4f}")
for n in (1, 2, 5, 10):
    print(f"lp({n:2d}) at alpha 0.6 = {length_penalty(n, 0.6):.4f}")
''', ask=ask_penalty, page_steps=(r"generate\.chosen$",)),
    Lesson(13, "decoder-only", "The decoder-only language model", seeds="004",
           concept="A language model (GPT) is the decoder alone, without cross-attention: it predicts the next token "
                   "at every position at once, each seeing only itself and earlier tokens through the causal mask. "
                   "Seed 004 walks 'life is short eat dessert first' through the mask; its final matrix is "
                   "illustrative, not computed: softmax of its masked row 'is' [0.2, 0.6] is [0.401, 0.599], not "
                   "[0.3, 0.7].",
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
''', ask=ask_decoder_only, page_steps=()),
    Lesson(14, "kv-cache-mla", "The KV cache and Multi-Head Latent Attention", seeds="004",
           concept="Generating token t needs the keys and values of all earlier tokens, which do not change: the KV "
                   "cache keeps them, so each step computes Q, K and V for the newest token only and appends. "
                   "The cache costs 2 · n_heads · d_k numbers per token and layer. DeepSeek-V2's Multi-Head Latent "
                   "Attention (MLA) caches one small latent c_KV (d_c numbers) plus a shared RoPE key instead, and "
                   "rebuilds every head's keys and values from it: 28.1% of MHA's cache for lm-small.",
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
''', ask=ask_cache, page_steps=(r"self_attention\.(latent|K_rope)$",)),
]


def lesson(number: int) -> Lesson:
    for item in LESSONS:
        if item.number == number:
            return item
    raise KeyError(number)
