"""Worked solutions: `clearformer learn solution NAME` writes NAME's into the current folder (never over a file).

One short, plain solution per exercise (what a learner who read the lesson would write), and the
capstone's (learn/capstone_source.py). The tests check that each passes its own check, and plant the
bugs learners make into copies of them (tests/learn/planted.py).
"""

from __future__ import annotations

SOLUTIONS = {
    "positional-encoding": '''
import torch

def positional_encoding(seq_len, d_model):
    position = torch.arange(seq_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = position / 10000 ** (two_i / d_model)
    pe = torch.zeros(seq_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe
''',
    "attention": '''
import math
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)      # a row with no allowed key: all zeros
    return weights @ v, weights
''',
    "causal-mask": '''
import torch

def causal_mask(size):
    return torch.tril(torch.ones(size, size, dtype=torch.bool))
''',
    "heads": '''
def split_heads(x, n_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, seq, n_heads, d_model // n_heads).transpose(1, 2)

def merge_heads(x):
    batch, heads, seq, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, seq, heads * d_head)
''',
    "layer-norm": '''
import torch

def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
''',
    "greedy-decode": '''
def greedy_decode(next_token_logits, bos_id, eos_id, max_new_tokens):
    prefix = [bos_id]
    for _ in range(max_new_tokens):
        token = int(next_token_logits(prefix).argmax())
        prefix.append(token)
        if token == eos_id:
            break
    return prefix[1:]
''',
    "label-smoothing": '''
import torch

def label_smoothed_loss(logits, labels, pad_id, smoothing=0.1):
    log_p = torch.log_softmax(logits, dim=-1)
    nll = -log_p.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    uniform = -log_p.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    real = labels != pad_id
    return loss[real].mean()
''',
    "beam-step": '''
def beam_step(log_probs, beam_scores, beam_size):
    vocab = log_probs.shape[-1]
    total = (beam_scores[:, None] + log_probs).reshape(-1)
    scores, positions = total.topk(beam_size)
    return scores, positions // vocab, positions % vocab
''',
}


HEADER = '''"""clearformer worked solution: {title} (lesson {lesson}). Check it:

    clearformer learn check {name} {filename}
"""
'''


def solution_text(name: str) -> str:
    """The worked solution of exercise `name` ("transformer": the capstone), as the file it writes."""
    from clearformer.learn.capstone_source import solution_text as capstone
    from clearformer.learn.exercises import exercise

    if name == "transformer":
        return capstone()
    item = exercise(name)
    return HEADER.format(title=item.title, lesson=item.lesson, name=item.name, filename=item.filename) + \
        SOLUTIONS[name].lstrip("\n")
