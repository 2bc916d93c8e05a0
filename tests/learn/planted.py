"""Each exercise's reference solution and the bugs learners really make, as the files a learner would write.

BUGS[exercise] lists (bug, source, words the check's diagnosis must contain). The tests write each
source into a file, run `clearformer learn check` on it and expect: the solution passes (exit 0),
every bug is caught (exit 1) with a diagnosis that says what differs.
"""

from __future__ import annotations

from clearformer.learn.solutions import SOLUTIONS


def _swap(exercise: str, old: str, new: str) -> str:
    source = SOLUTIONS[exercise]
    assert old in source, (exercise, old)
    return source.replace(old, new)


ATT_OLD = ('    if mask is not None:\n        scores = scores.masked_fill(~mask, float("-inf"))\n'
           '    weights = torch.softmax(scores, dim=-1)\n')
ATT_NEW = ('    weights = torch.softmax(scores, dim=-1)\n    if mask is not None:\n'
           '        weights = weights.masked_fill(~mask, 0.0)\n')
GREEDY_NO_BOS = '''
def greedy_decode(next_token_logits, bos_id, eos_id, max_new_tokens):
    prefix = []
    for _ in range(max_new_tokens):
        token = int(next_token_logits(prefix).argmax())
        prefix.append(token)
        if token == eos_id:
            break
    return prefix
'''
BEAM_INSIDE = '''
import torch

def beam_step(log_probs, beam_scores, beam_size):
    total = beam_scores[:, None] + log_probs
    scores, tokens = total.topk(beam_size, dim=-1)           # the best beam_size of each beam
    beams = torch.arange(total.shape[0])[:, None].expand_as(tokens)
    return scores.reshape(-1), beams.reshape(-1), tokens.reshape(-1)
'''


BUGS = {
    "positional-encoding": [
        ("sin and cos swapped", _swap("positional-encoding", "pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = "
                                      "torch.cos(angle)", "pe[:, 0::2] = torch.cos(angle)\n    pe[:, 1::2] = "
                                      "torch.sin(angle)"), "swapped"),
        ("10000^(i/d) instead of 10000^(2i/d)", _swap("positional-encoding", "two_i / d_model",
                                                      "(two_i / 2) / d_model"), "10000^(2i/d)"),
        ("positions from 1", _swap("positional-encoding", "torch.arange(seq_len,", "1 + torch.arange(seq_len,"),
         "positions start at 1"),
        ("sines then cosines in two halves", _swap("positional-encoding", "pe[:, 0::2] = torch.sin(angle)\n    "
                                                   "pe[:, 1::2] = torch.cos(angle)",
                                                   "pe[:, :d_model // 2] = torch.sin(angle)\n    "
                                                   "pe[:, d_model // 2:] = torch.cos(angle)"), "interleaves"),
    ],
    "attention": [
        ("divides by d_k, not sqrt(d_k)", _swap("attention", "math.sqrt(q.shape[-1])", "q.shape[-1]"), "d_k"),
        ("divides by sqrt(d_model)", _swap("attention", "math.sqrt(q.shape[-1])",
                                           "math.sqrt(q.shape[-1] * q.shape[1])"), "d_model"),
        ("softmax over the wrong axis", _swap("attention", "torch.softmax(scores, dim=-1)",
                                              "torch.softmax(scores, dim=-2)"), "wrong axis"),
        ("mask inverted", _swap("attention", "masked_fill(~mask,", "masked_fill(mask,"), "inverted"),
        ("mask applied after the softmax", _swap("attention", ATT_OLD, ATT_NEW), "after the softmax"),
        ("k.T on a 4-D tensor", _swap("attention", "k.transpose(-2, -1)", "k.T"), "k.transpose(-2, -1)"),
        ("(weights, output) order", _swap("attention", "return weights @ v, weights", "return weights, weights @ v"),
         "wrong order"),
        # F.dropout trains by default: the weights lose cells and grow by 1/(1 - p); not a softmax-axis problem
        ("dropout left in", _swap("attention", "    return weights @ v, weights",
                                  "    weights = torch.nn.functional.dropout(weights, p=0.5)\n"
                                  "    return weights @ v, weights"), "dropout"),
    ],
    "causal-mask": [
        ("inverted", _swap("causal-mask", "return torch.tril(", "return ~torch.tril("), "swapped"),
        ("upper triangle", _swap("causal-mask", "torch.tril(", "torch.triu("), "upper triangle"),
        ("diagonal left out", _swap("causal-mask", "dtype=torch.bool))", "dtype=torch.bool), diagonal=-1)"),
         "diagonal"),
        ("float 0/1 instead of bool", _swap("causal-mask", "torch.ones(size, size, dtype=torch.bool)",
                                            "torch.ones(size, size)"), "boolean"),
    ],
    "heads": [
        ("reshape without transpose", _swap("heads", "x.view(batch, seq, n_heads, d_model // n_heads).transpose(1, 2)",
                                            "x.reshape(batch, n_heads, seq, d_model // n_heads)"), "transpose(1, 2)"),
        ("strided columns per head", _swap("heads", "x.view(batch, seq, n_heads, d_model // n_heads).transpose(1, 2)",
                                           "x.view(batch, seq, d_model // n_heads, n_heads).permute(0, 3, 1, 2)"),
         "contiguous"),
        ("merge with .view on a transposed tensor", _swap("heads",
                                                          "x.transpose(1, 2).reshape(batch, seq, heads * d_head)",
                                                          "x.transpose(1, 2).view(batch, seq, heads * d_head)"),
         "contiguous"),
        ("merge without transpose", _swap("heads", "x.transpose(1, 2).reshape(batch, seq, heads * d_head)",
                                          "x.reshape(batch, seq, heads * d_head)"), "transpose(1, 2) before"),
    ],
    "layer-norm": [
        ("Bessel-corrected variance", _swap("layer-norm", "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)",
                                            "var = x.var(dim=-1, keepdim=True)"), "Bessel"),
        ("eps outside the square root", _swap("layer-norm", "torch.sqrt(var + eps)", "(torch.sqrt(var) + eps)"),
         "inside the square root"),
        ("normalised over the tokens", _swap("layer-norm", "mean = x.mean(dim=-1, keepdim=True)\n    var = ((x - "
                                             "mean) ** 2).mean(dim=-1, keepdim=True)", "mean = x.mean(dim=-2, "
                                             "keepdim=True)\n    var = ((x - mean) ** 2).mean(dim=-2, keepdim=True)"),
         "over the tokens"),
        ("E[x^2] for the variance", _swap("layer-norm", "var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)",
                                          "var = (x ** 2).mean(dim=-1, keepdim=True)"), "E[x²]"),
        ("eps 1e-6, not the eps given", _swap("layer-norm", "torch.sqrt(var + eps)", "torch.sqrt(var + 1e-6)"),
         "eps argument"),
        ("gamma and beta forgotten", _swap("layer-norm", "return gamma * (x - mean) / torch.sqrt(var + eps) + beta",
                                           "return (x - mean) / torch.sqrt(var + eps)"), "not applied"),
    ],
    "greedy-decode": [
        ("does not stop at <eos>", _swap("greedy-decode", "        if token == eos_id:\n            break\n", ""),
         "after <eos>"),
        ("drops <eos>", _swap("greedy-decode", "        prefix.append(token)\n        if token == eos_id:\n"
                                               "            break\n",
                              "        if token == eos_id:\n            break\n        prefix.append(token)\n"),
         "<eos> is dropped"),
        ("one token short", _swap("greedy-decode", "range(max_new_tokens)", "range(max_new_tokens - 1)"),
         "too few"),
        ("the loop starts without <bos>", GREEDY_NO_BOS, "[bos_id]"),
        (".max() for .argmax()", _swap("greedy-decode", "int(next_token_logits(prefix).argmax())",
                                       "int(next_token_logits(prefix).max())"), ".argmax()"),
        ("tensor ids appended", _swap("greedy-decode", "int(next_token_logits(prefix).argmax())",
                                      "next_token_logits(prefix).argmax()"), "int("),
        ("never feeds the choice back", _swap("greedy-decode", "next_token_logits(prefix)",
                                              "next_token_logits([bos_id])"), "same id every step"),
    ],
    "label-smoothing": [
        ("padding averaged in", _swap("label-smoothing", "return loss[real].mean()", "return loss.mean()"),
         "padding"),
        ("eps over the vocab - 1 wrong classes", _swap(
            "label-smoothing", "uniform = -log_p.mean(dim=-1)",
            "uniform = -(log_p.sum(dim=-1) + nll) / (log_p.shape[-1] - 1)"), "vocab - 1"),
        ("raw logits instead of log-probabilities", _swap("label-smoothing", "log_p = torch.log_softmax(logits, "
                                                          "dim=-1)", "log_p = logits"), "log_softmax"),
        ("log10 for ln", _swap("label-smoothing", "log_p = torch.log_softmax(logits, dim=-1)",
                               "log_p = torch.log10(torch.softmax(logits, dim=-1))"), "log10"),
        ("the label's target without its eps/V", _swap("label-smoothing", "uniform = -log_p.mean(dim=-1)",
                                                       "uniform = -(log_p.sum(dim=-1) + nll) / log_p.shape[-1]"),
         "without its own share eps/V"),
        ("summed, not averaged", _swap("label-smoothing", "return loss[real].mean()", "return loss[real].sum()"),
         "sum over tokens"),
    ],
    "beam-step": [
        ("running scores ignored", _swap("beam-step", "(beam_scores[:, None] + log_probs)", "log_probs"),
         "running score"),
        ("beams and tokens swapped", _swap("beam-step", "positions // vocab, positions % vocab",
                                           "positions % vocab, positions // vocab"), "swapped"),
        ("top-k inside each beam", BEAM_INSIDE, "inside each beam"),
        ("float beam indices", _swap("beam-step", "positions // vocab, positions % vocab",
                                     "(positions // vocab).float(), positions % vocab"), "integer"),
        ("worst first", _swap("beam-step", "scores, positions = total.topk(beam_size)",
                              "scores, positions = total.topk(beam_size)\n    scores, positions = scores.flip(0), "
                              "positions.flip(0)"), "best first"),
    ],
}

# What a diagnosis once said of these bugs, wrongly: the report must not say it (each bug above holds what it must say).
MISLEADING = {
    "dropout left in": "axis",
    ".max() for .argmax()": "[bos_id]",
    "tensor ids appended": "[bos_id]",
}

# Right answers that differ from clearformer only on a row the Transformer never meets (a query with every key
# blocked): they pass, with a note naming the difference (learn/check.py).
NOTES = {
    "attention": [
        ("-1e9 fill: uniform weights on a fully masked row", _swap("attention", 'float("-inf")', "-1e9"),
         "every key blocked"),
        ("NaN on a fully masked row", _swap("attention", "    weights = torch.nan_to_num(weights, nan=0.0)"
                                                         "      # a row with no allowed key: all zeros\n", ""), "NaN"),
    ],
}
