"""Exercises: write one piece of the Transformer yourself, then check it against clearformer.

`clearformer learn exercise NAME` writes NAME's starter file (signature, docstring with shapes,
`raise NotImplementedError`) into the current folder, never over an existing file;
`clearformer learn check NAME FILE` runs the function in FILE on the cases of `learn/cases.py` and
compares every result with clearformer's own module (`learn/check.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clearformer.errors import UserError
from clearformer.learn import cases
from clearformer.store.atomic import atomic_write_text


@dataclass
class Exercise:
    name: str
    functions: tuple[str, ...]   # the functions FILE must define (the first is the exercise's)
    title: str
    lesson: int
    starter: str
    cases: Callable[[], list[cases.Case]]

    @property
    def function(self) -> str:
        return self.functions[0]

    @property
    def filename(self) -> str:
        return self.name.replace("-", "_") + ".py"


HEADER = '''"""clearformer exercise: {title} (lesson {lesson}; `clearformer learn {lesson}` explains it).

Implement the function(s) below, then check them against clearformer's own modules:

    clearformer learn check {name} {filename}
"""

import torch
'''

STARTERS = {
    "positional-encoding": '''

def positional_encoding(seq_len: int, d_model: int) -> torch.Tensor:
    """The paper's sinusoidal positional encoding, shape (seq_len, d_model).

    PE[pos, 2i]   = sin(pos / 10000 ** (2i / d_model))     even columns: sines
    PE[pos, 2i+1] = cos(pos / 10000 ** (2i / d_model))     odd columns: cosines (interleaved)
    Positions start at 0. d_model is even.
    """
    raise NotImplementedError
''',
    "attention": '''

def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q kᵀ / √d_k, with blocked cells removed) v  ->  (output, weights).

    q (batch, heads, q_len, d_k), k (batch, heads, k_len, d_k), v (batch, heads, k_len, d_v);
    mask: None, or boolean, broadcastable to (batch, heads, q_len, k_len), True = may attend.
    Returns output (batch, heads, q_len, d_v) and weights (batch, heads, q_len, k_len).
    A query whose every key is blocked has nothing to attend to: its weights (and its output) are
    all zeros (as clearformer's masked_softmax gives), not NaN.
    """
    raise NotImplementedError
''',
    "causal-mask": '''

def causal_mask(size: int) -> torch.Tensor:
    """The decoder's look-ahead mask: boolean, shape (size, size).

    mask[i, j] is True where position i may attend to position j (itself and earlier positions).
    """
    raise NotImplementedError
''',
    "layer-norm": '''

def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last axis: gamma * (x - mean) / sqrt(var + eps) + beta.

    x (..., d_model); gamma, beta (d_model,). mean and var are taken over each vector's d_model numbers
    (the population variance: divide by d_model). Returns the shape of x.
    """
    raise NotImplementedError
''',
    "heads": '''

def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(batch, seq, d_model) -> (batch, n_heads, seq, d_head), d_head = d_model // n_heads.

    Head h takes the columns h * d_head .. (h + 1) * d_head - 1 of each token's vector.
    """
    raise NotImplementedError


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """The inverse (Concat of the heads): (batch, n_heads, seq, d_head) -> (batch, seq, n_heads * d_head)."""
    raise NotImplementedError
''',
    "greedy-decode": '''

def greedy_decode(next_token_logits, bos_id: int, eos_id: int, max_new_tokens: int) -> list[int]:
    """Greedy decoding: start from [bos_id]; repeatedly take the most probable next token and append it.

    next_token_logits(prefix: list[int]) -> torch.Tensor (vocab,): the model's scores for the token
    after `prefix` (which starts with bos_id). Stop after eos_id (keep it in the result) or after
    max_new_tokens tokens. Returns the generated ids, bos_id not included.
    """
    raise NotImplementedError
''',
    "label-smoothing": '''

def label_smoothed_loss(logits: torch.Tensor, labels: torch.Tensor, pad_id: int, smoothing: float = 0.1):
    """Label-smoothed cross-entropy, averaged over the non-pad labels: a scalar tensor.

    logits (batch, tgt_len, vocab); labels (batch, tgt_len), pad_id where there is no token.
    The target puts 1 - smoothing + smoothing / vocab on the label and smoothing / vocab on every other
    token (torch's cross_entropy convention), so per token:
        loss = (1 - smoothing) * (-log p[label]) + smoothing * mean_k(-log p[k])
    """
    raise NotImplementedError
''',
    "beam-step": '''

def beam_step(log_probs: torch.Tensor, beam_scores: torch.Tensor, beam_size: int):
    """One beam search step: the best `beam_size` extensions of all beams -> (scores, beams, tokens).

    log_probs (beams, vocab): log p(token | beam's prefix); beam_scores (beams,): each beam's sum of
    log-probabilities so far. An extension (beam b, token t) scores beam_scores[b] + log_probs[b, t].
    Returns three (beam_size,) tensors, best first: the scores, the source beam b of each, the token t.
    """
    raise NotImplementedError
''',
}

EXERCISES: list[Exercise] = [
    Exercise("positional-encoding", ("positional_encoding",), "sinusoidal positional encoding", 2,
             STARTERS["positional-encoding"], cases.positional_encoding_cases),
    Exercise("attention", ("scaled_dot_product_attention",), "scaled dot-product attention", 4,
             STARTERS["attention"], cases.attention_cases),
    Exercise("causal-mask", ("causal_mask",), "the causal mask", 5, STARTERS["causal-mask"],
             cases.causal_mask_cases),
    Exercise("heads", ("split_heads", "merge_heads"), "splitting and merging heads", 6, STARTERS["heads"],
             cases.heads_cases),
    Exercise("layer-norm", ("layer_norm",), "layer normalisation", 7, STARTERS["layer-norm"],
             cases.layer_norm_cases),
    Exercise("greedy-decode", ("greedy_decode",), "a greedy decoding loop", 10, STARTERS["greedy-decode"],
             cases.greedy_cases),
    Exercise("label-smoothing", ("label_smoothed_loss",), "the label-smoothed loss", 11,
             STARTERS["label-smoothing"], cases.smoothing_cases),
    Exercise("beam-step", ("beam_step",), "one beam search step", 12, STARTERS["beam-step"], cases.beam_cases),
]


def exercise(name: str) -> Exercise:
    for item in EXERCISES:
        if item.name == name:
            return item
    raise UserError(f"no exercise {name[:40]!r}; choose one of: {', '.join(e.name for e in EXERCISES)}")


def starter_text(item: Exercise) -> str:
    return HEADER.format(title=item.title, lesson=item.lesson, name=item.name, filename=item.filename) + item.starter


def write_starter(item: Exercise, folder: Path) -> Path:
    """Write the starter file into `folder`; never over an existing file."""
    return write_new(folder / item.filename, starter_text(item), item.name)


def write_new(path: Path, text: str, name: str) -> Path:
    """Write `text` at `path` (a starter or a solution); never over an existing file."""
    try:
        atomic_write_text(path, text, overwrite=False)
    except FileExistsError:
        raise UserError(f"{path.name} exists in {path.parent}: check it with `clearformer learn check {name} "
                        f"{path.name}`, or move it away for a fresh start") from None
    except OSError as error:
        raise UserError(f"cannot write {path}: {error.strerror}") from None
    return path


def exercise_list() -> str:
    lines = ["exercises: `clearformer learn exercise NAME` writes NAME's starter file here; "
             "`clearformer learn check NAME FILE` checks it", ""]
    lines += [f"  {e.name:20s} {', '.join(e.functions):40s} (lesson {e.lesson}: {e.title})" for e in EXERCISES]
    lines += [f"  {'transformer':20s} {'Transformer, translate':40s} (lesson 15: the whole model, from the files "
              "above; `clearformer learn train FILE` trains it)",
              "", "`clearformer learn solution NAME` writes a worked solution (never over your file)"]
    return "\n".join(lines) + "\n"
