"""The seeds' worked examples, run through the very modules that train.

Each example builds real clearformer modules (TokenEmbedding, SinusoidalPositionalEncoding,
MultiHeadAttention, masked_softmax), loads the seed's numbers into their weights, runs them under a
`Recorder`, and returns the walkthrough. Nothing here computes attention by itself.

Weight layout: the seeds write Q = X · W^Q with W^Q of shape (d_model, d_k); `nn.Linear` stores
the transpose, so `weight = W^Q.T`.
"""

from __future__ import annotations

import numpy as np
import torch

from clearformer.config import ModelConfig
from clearformer.errors import UserError
from clearformer.explain.walkthrough import Walkthrough, build_walkthrough
from clearformer.model.attention import MultiHeadAttention, causal_mask, masked_softmax
from clearformer.model.embedding import InputEmbedding, SinusoidalPositionalEncoding, TokenEmbedding
from clearformer.record import trace

# --- seed 002: "I love you" -> "Je t'aime" -----------------------------------------------------------------
I_LOVE_YOU_VOCAB = ["<START>", "I", "love", "you", "Je", "t'", "aime", "hello", "world", "<END>"]
I_LOVE_YOU_EMBEDDINGS = [
    [0.1, 0.1, 0.1, 0.1], [0.2, 0.5, 0.1, 0.8], [0.9, 0.1, 0.7, 0.3], [0.3, 0.8, 0.2, 0.6],
    [0.2, 0.4, 0.2, 0.7], [0.4, 0.6, 0.3, 0.5], [0.8, 0.2, 0.6, 0.4], [0.5, 0.5, 0.5, 0.5],
    [0.6, 0.3, 0.8, 0.2], [0.0, 0.0, 0.0, 0.0],
]
I_LOVE_YOU_W_Q = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
I_LOVE_YOU_W_K = [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]
I_LOVE_YOU_W_V = [[0.5, 0.5, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5]]
# The seed's masked-attention example: decoder scores for "<START> Je t' aime", softmax without scaling.
MASKED_TOKENS = ["<START>", "Je", "t'", "aime"]
MASKED_SCORES = [[2.0, 1.5, 0.8, 1.2], [1.8, 2.5, 1.1, 0.9], [1.2, 1.9, 2.3, 1.4], [1.0, 1.6, 1.8, 2.1]]
# The seed's output layer example: the decoder's logits for the first generated position.
OUTPUT_LOGITS = [-0.5, 0.3, 0.8, 0.2, 2.5, 1.1, 0.9, -0.2, 0.1, -0.8]

# --- seed 001: "India is great" ----------------------------------------------------------------------------
INDIA_TOKENS = ["India", "is", "great"]
INDIA_X = [[0.1, 1.3, 0.4, 1.5], [1.041, 0.640, 0.60999, 1.2999], [1.309, -0.116, 0.92, 1.0998]]
INDIA_W_Q = [[0.1, 0.2, 0.0, 0.3], [0.4, 0.1, 0.2, 0.2], [0.3, 0.3, 0.3, 0.0], [0.2, 0.0, 0.1, 0.4]]
INDIA_W_K = [[0.3, 0.1, 0.1, 0.0], [0.1, 0.3, 0.2, 0.2], [0.2, 0.2, 0.4, 0.1], [0.0, 0.4, 0.0, 0.3]]
INDIA_W_V = [[0.2, 0.1, 0.0, 0.2], [0.3, 0.2, 0.3, 0.1], [0.0, 0.4, 0.2, 0.2], [0.1, 0.0, 0.4, 0.3]]


def india_two_head_weights() -> dict[str, np.ndarray]:
    """The seed's two-head weights: np.random.seed(1), then rand(4,2) for Wq1, Wk1, Wv1, Wq2, Wk2, Wv2
    in that order, then rand(4,4) for W_O (NumPy's legacy generator, so the numbers are the seed's)."""
    rng = np.random.RandomState(1)
    names = ["Wq1", "Wk1", "Wv1", "Wq2", "Wk2", "Wv2"]
    weights = {name: rng.rand(4, 2) for name in names}
    weights["W_O"] = rng.rand(4, 4)
    return weights


def _tensor(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def seed_attention(d_model: int, n_heads: int, w_q, w_k, w_v, w_o=None, name: str = "self_attention"
                   ) -> MultiHeadAttention:
    """A bias-free MultiHeadAttention holding the seed's matrices (each (d_model, heads * d_k))."""
    attention = MultiHeadAttention(ModelConfig(d_model=d_model, n_heads=n_heads, bias=False)).double()
    with torch.no_grad():
        attention.w_q.weight.copy_(_tensor(w_q).T)
        attention.w_k.weight.copy_(_tensor(w_k).T)
        attention.w_v.weight.copy_(_tensor(w_v).T)
        # The single-head seeds have no output projection: W^O = I leaves the head output unchanged.
        attention.w_o.weight.copy_(torch.eye(d_model, dtype=torch.float64) if w_o is None else _tensor(w_o).T)
    trace.name_modules(attention, name)
    return attention


def seed_embedding(table, d_model: int) -> InputEmbedding:
    """Embedding (no √d scale, as in the seeds) + sinusoidal positions, holding the seed's table."""
    tokens = TokenEmbedding(len(table), d_model, scale=False, pad_id=None).double()
    with torch.no_grad():
        tokens.weight.copy_(_tensor(table))
    embedding = InputEmbedding(tokens, SinusoidalPositionalEncoding(d_model, max_len=16)).double()
    trace.name_modules(embedding, "embedding")
    return embedding


def i_love_you() -> tuple[Walkthrough, trace.Recorder]:
    """Seed 002: embeddings -> PE -> X -> Q, K, V -> scores -> scaled -> weights -> output,
    then its masked (causal) example and its output-layer example."""
    embedding = seed_embedding(I_LOVE_YOU_EMBEDDINGS, 4)
    attention = seed_attention(4, 1, I_LOVE_YOU_W_Q, I_LOVE_YOU_W_K, I_LOVE_YOU_W_V)
    ids = torch.tensor([[I_LOVE_YOU_VOCAB.index(w) for w in ("I", "love", "you")]])
    with trace.Recorder() as recorder, torch.no_grad():
        attention(embedding(ids))
        # The masked example starts from given scores; the model's own masked softmax turns them into weights.
        scores = _tensor(MASKED_SCORES)[None, None]
        mask = causal_mask(4, 4)
        trace.emit("masked_example", "scores", scores)
        trace.emit("masked_example", "mask", mask[None])
        trace.emit("masked_example", "weights", masked_softmax(scores, mask))
        # The output layer example: softmax over the vocabulary, then greedy choice.
        logits = _tensor(OUTPUT_LOGITS)[None, None]
        trace.emit("output", "logits", logits)
        probabilities = torch.softmax(logits, dim=-1)
        trace.emit("output", "probabilities", probabilities)
        trace.emit("generate", "chosen", probabilities[0, -1].argmax().reshape(1))
    walk = build_walkthrough(recorder.records, 'Seed 002: self-attention on "I love you" (d_model = 4)',
                             ["I", "love", "you"], MASKED_TOKENS, vocab=I_LOVE_YOU_VOCAB, top=0,
                             skip=("self_attention.concat", "self_attention.output"))
    for step in walk.steps:
        if step.name.startswith("masked_example"):
            step.stage = "example"
            labels = MASKED_TOKENS
            for matrix in step.matrices:
                matrix.row_labels, matrix.col_labels = list(labels), list(labels)
            step.title = "Masked example: " + step.title
        elif step.name.startswith(("output", "generate")):
            step.matrices[0].row_labels = ["<START>"]
            step.title = "Output layer example: " + step.title
    walk.result = "Je"
    return walk, recorder


def india_is_great() -> tuple[Walkthrough, trace.Recorder]:
    """Seed 001: single-head self-attention on given X, then the two-head example with W^O."""
    x = _tensor(INDIA_X)[None]
    single = seed_attention(4, 1, INDIA_W_Q, INDIA_W_K, INDIA_W_V, name="self_attention")
    w = india_two_head_weights()
    two_head = seed_attention(4, 2, np.concatenate([w["Wq1"], w["Wq2"]], axis=1),
                              np.concatenate([w["Wk1"], w["Wk2"]], axis=1),
                              np.concatenate([w["Wv1"], w["Wv2"]], axis=1), w["W_O"], name="multi_head")
    with trace.Recorder() as recorder, torch.no_grad():
        trace.emit("input", "X", x)
        single(x)
        two_head(x)
    walk = build_walkthrough(recorder.records, 'Seed 001: self-attention on "India is great"', INDIA_TOKENS,
                             skip=("self_attention.concat", "self_attention.output"))
    for step in walk.steps:
        if step.name.startswith("multi_head"):
            step.stage = "multi-head"
            step.title = "Two heads: " + step.title.lower() if not step.title.startswith("Multi") else step.title
    walk.result = "contextualised vectors for India, is, great"
    return walk, recorder


EXAMPLES = {"i-love-you": i_love_you, "india-is-great": india_is_great}


def run_example(name: str) -> tuple[Walkthrough, trace.Recorder]:
    if name not in EXAMPLES:
        raise UserError(f"unknown example {name!r}; choose one of: {', '.join(EXAMPLES)}")
    return EXAMPLES[name]()
