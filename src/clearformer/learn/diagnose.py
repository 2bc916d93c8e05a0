"""What differs, in words: the symptoms of the mistakes learners make, read off a wrong result.

Each exercise has one function that looks at the learner's result for the first case that failed
and names the cause when the symptom is unmistakable (rows of the attention weights that do not
sum to 1, weight on blocked cells, sines where cosines belong, a variance that is n/(n-1) too
big, ...). None means no known cause: the report then shows the first wrong cell only.
"""

from __future__ import annotations

import math
import re

import torch

from clearformer.learn.cases import Case
from clearformer.learn.wire import Raised


def _close(a, b, tolerance: float = 1e-5) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape:
        return False
    a, b = a.detach().to(torch.float64), b.detach().to(torch.float64)
    return bool(torch.allclose(a, b, atol=tolerance, rtol=tolerance, equal_nan=True))


def _sinusoid(seq_len: int, d_model: int, exponent, swap: bool = False, start: int = 0) -> torch.Tensor:
    """A sine/cosine table with the exponent of column j given by `exponent(j)` (a symptom model)."""
    position = torch.arange(start, start + seq_len, dtype=torch.float64)[:, None]
    columns = torch.arange(d_model)
    angle = position / torch.pow(10000.0, torch.tensor([exponent(int(j)) for j in columns], dtype=torch.float64))
    even = columns % 2 == 0
    first, second = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    return torch.where(even, first(angle), second(angle))


def positional_encoding(case: Case, got, mismatch) -> str | None:
    seq_len, d_model = case.args
    expected = case.expected
    if isinstance(got, torch.Tensor) and tuple(got.shape) == (d_model, seq_len) and seq_len != d_model:
        return "rows are positions and columns dimensions: the shape is (seq_len, d_model), transposed here"
    if _close(got, _sinusoid(seq_len, d_model, lambda j: 2 * (j // 2) / d_model, swap=True)):
        return "sines and cosines are swapped: even columns (0, 2, ...) hold sin, odd columns cos"
    half = d_model // 2
    if _close(got, torch.cat([expected[:, 0::2], expected[:, 1::2]], dim=1)) and d_model > 2:
        return "all sines first, then all cosines (two halves): the paper interleaves them, sin in even columns"
    if _close(got, _sinusoid(seq_len, d_model, lambda j: j / d_model)):
        return "the exponent uses the column index j (10000^(j/d)): both columns of a pair share 10000^(2i/d)"
    if _close(got, _sinusoid(seq_len, d_model, lambda j: (j // 2) / d_model)):
        return "the exponent is 10000^(i/d) with i the pair number: the paper's is 10000^(2i/d)"
    if _close(got, _sinusoid(seq_len, d_model, lambda j: 2 * j / d_model)) and half:
        return "the exponent is 10000^(2j/d) with j the column: the pair 2i, 2i+1 shares 10000^(2i/d)"
    if _close(got, _sinusoid(seq_len, d_model, lambda j: 2 * (j // 2) / d_model, start=1)):
        return "positions start at 1: the first row is position 0 (sin 0 = 0, cos 0 = 1)"
    return None


def _scores(case: Case) -> torch.Tensor:
    q, k = case.info["q"], case.info["k"]
    return q @ k.transpose(-2, -1)


def _masked_softmax(scaled: torch.Tensor, mask) -> torch.Tensor:
    if mask is None:
        return torch.softmax(scaled, dim=-1)
    weights = torch.softmax(scaled.masked_fill(~mask, float("-inf")), dim=-1)
    return torch.nan_to_num(weights, nan=0.0)


def _dropout_scale(weights: torch.Tensor, expected: torch.Tensor) -> float | None:
    """The factor 1 / (1 - p) when `weights` are `expected` with some cells zeroed and the rest scaled by one
    factor above 1 (what dropout does), else None."""
    alive = (weights.abs() > 1e-12) & (expected.abs() > 1e-9)
    dropped = (weights.abs() <= 1e-12) & (expected.abs() > 1e-9)
    if not bool(alive.any()):
        return None
    ratios = weights[alive] / expected[alive]
    scale = float(ratios.mean())
    if scale > 1 + 1e-6 and bool(((ratios - scale).abs() < 1e-6 * scale).all()):
        return scale
    if bool(dropped.any()) and abs(scale - 1) < 1e-6 and bool(((ratios - 1).abs() < 1e-6).all()):
        return scale
    return None


def attention(case: Case, got, mismatch) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return "return two tensors: (output, weights)"
    output, weights = got
    if not isinstance(weights, torch.Tensor) or not isinstance(output, torch.Tensor):
        return None
    _, expected_weights = case.expected
    if weights.shape != expected_weights.shape:
        if output.shape == expected_weights.shape:
            return "the two results are in the wrong order: return (output, weights)"
        return None
    mask = case.info["mask"]
    weights = weights.detach().to(torch.float64)
    allowed = torch.ones_like(expected_weights, dtype=torch.bool) if mask is None else mask.expand_as(expected_weights)
    has_key = allowed.any(dim=-1)
    if bool(torch.isnan(weights).any()):
        if not bool(has_key.all()):
            return ("a query with every key blocked gave NaN (softmax of a row of -inf): clearformer gives it "
                    "all-zero weights and a zero output")
        return "the weights hold NaN"
    if not bool(has_key.all()):
        empty = weights[~has_key]
        if bool(((empty - empty.mean(dim=-1, keepdim=True)).abs() < 1e-9).all()) and bool((empty > 0).all()):
            return ("a query with every key blocked got uniform weights 1/k_len (a finite fill such as -1e9): "
                    "clearformer gives it all-zero weights and a zero output, as it has nothing to attend to")
    if mask is not None and bool((weights[~allowed].abs() > 1e-6).any()):
        if bool((weights[allowed].abs() < 1e-6).all()):
            return "the mask is inverted: True means 'may attend', so the False cells must get weight 0"
        return "blocked cells (mask False) get weight: set them to -inf before the softmax"
    scores = _scores(case)
    d_k = case.info["q"].shape[-1]
    if mask is not None and _close(weights, torch.softmax(scores / math.sqrt(d_k), dim=-1) * allowed):
        return ("the mask is applied after the softmax (the blocked weights zeroed afterwards, so the rows no "
                "longer sum to 1): set the blocked scores to -inf before the softmax")
    kept = _dropout_scale(weights, expected_weights)
    if kept is not None:
        return (f"dropout is applied to the weights (some cells are 0, the others {kept:.3g} times the right ones, "
                "1 / (1 - p)): F.dropout drops by default (training=True), so the check, which runs as inference "
                "does, sees it. Drop weights in training only: nn.Dropout in your module, or "
                "F.dropout(weights, p, training=self.training)")
    row_sums = weights.sum(dim=-1)
    if not bool(((row_sums[has_key] - 1).abs() < 1e-5).all()):
        if bool(((weights.sum(dim=-2) - 1).abs() < 1e-5).all()):
            return "row sums of the weights are not 1 but column sums are: softmax over the wrong axis (use dim=-1)"
        return "row sums of the weights are not 1: softmax over the keys (the last axis)?"
    heads = case.info["q"].shape[1]
    for scale, text in ((1 / d_k, "divided by d_k instead of √d_k"), (1.0, "no scaling: divide the scores by √d_k"),
                        (1 / math.sqrt(d_k * heads), "divided by √(heads · d_k) = √d_model: a head's d_k is "
                                                     "q.shape[-1]"), (math.sqrt(d_k), "multiplied by √d_k instead "
                                                                                      "of dividing")):
        if scale != 1 / math.sqrt(d_k) and _close(weights, _masked_softmax(scores * scale, mask)):
            return f"the scores are {text}" if "no scaling" not in text else text
    if _close(weights, expected_weights) and mismatch.part == "output":
        return "the weights are right but the output is not: output = weights @ v"
    return None


def causal_mask(case: Case, got, mismatch) -> str | None:
    if not isinstance(got, torch.Tensor) or got.shape != case.expected.shape:
        return None
    expected = case.expected
    mask = got.to(torch.bool) if got.dtype != torch.bool else got
    size = expected.shape[0]
    if got.dtype.is_floating_point and bool(torch.isinf(got).any()):
        return "an additive mask (0 / -inf): return booleans, True where i may attend to j"
    if torch.equal(mask, ~expected):
        return "True and False are swapped: True means 'may attend' (the lower triangle with its diagonal)"
    if torch.equal(mask, expected.T) and size > 1:
        return "the upper triangle: row i is the query, column j the key; i may attend to j when j <= i"
    if torch.equal(mask, torch.tril(torch.ones(size, size, dtype=torch.bool), -1)):
        return "off by one: the diagonal must be True (a position may attend to itself)"
    if torch.equal(mask, torch.tril(torch.ones(size, size, dtype=torch.bool), 1)):
        return "off by one: each position sees the next one too (a future word)"
    return None


def layer_norm(case: Case, got, mismatch) -> str | None:
    x, gamma, beta, eps = case.args
    if not isinstance(got, torch.Tensor) or got.shape != x.shape:
        return None
    mean = x.mean(-1, keepdim=True)
    centred = x - mean
    if _close(got, gamma * centred / torch.sqrt(x.var(-1, unbiased=True, keepdim=True) + eps) + beta):
        return ("the variance divides by d_model - 1 (Bessel's correction, torch.var's default): LayerNorm "
                "divides by d_model")
    variance = x.var(-1, unbiased=False, keepdim=True)
    if _close(got, gamma * centred / (torch.sqrt(variance) + eps) + beta):
        return "eps is added to the standard deviation: it belongs inside the square root, √(var + eps)"
    if _close(got, gamma * centred / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) + beta):
        return ("the variance is E[x²], the mean of the squares without subtracting the mean: var = E[(x - mean)²] "
                "(or E[x²] - mean²)")
    if _close(got, centred / torch.sqrt(variance + eps)):
        return "gamma and beta are not applied: gamma · normalised + beta"
    if _close(got, beta * centred / torch.sqrt(variance + eps) + gamma):
        return "gamma and beta are swapped: gamma scales, beta shifts"
    for other_eps in (1e-6, 1e-5, 1e-8, 1e-12, 0.0, 1e-3):
        if other_eps != eps and _close(got, gamma * centred / torch.sqrt(variance + other_eps) + beta):
            return (f"eps is {other_eps:g}, not the eps argument ({eps:g} here): use the eps the function is given "
                    "(the model's LayerNorm passes its own)")
    if x.shape[-2] > 1:
        other = x - x.mean(-2, keepdim=True)
        if _close(got, gamma * other / torch.sqrt(x.var(-2, unbiased=False, keepdim=True) + eps) + beta):
            return "normalised over the tokens (axis -2): LayerNorm normalises each token vector (the last axis)"
    return None


def heads(case: Case, got, mismatch) -> str | None:
    if not isinstance(got, tuple) or len(got) != 2:
        return None
    x, n_heads = case.args
    batch, seq, d_model = x.shape
    d_head = d_model // n_heads
    split, merged = got
    if mismatch.part.startswith("split"):
        if _close(split, x.reshape(batch, n_heads, seq, d_head)):
            return ("reshaped straight to (batch, heads, seq, d_head), which mixes tokens into heads: view as "
                    "(batch, seq, heads, d_head) first, then transpose(1, 2)")
        if _close(split, x.reshape(batch, seq, d_head, n_heads).permute(0, 3, 1, 2)):
            return ("head h takes every n_heads-th column: it must take the contiguous columns "
                    "h·d_head .. (h+1)·d_head-1")
        if isinstance(split, torch.Tensor) and tuple(split.shape) == (batch, seq, n_heads, d_head):
            return "the shape is (batch, seq, heads, d_head): transpose(1, 2) to put heads before seq"
        return None
    heads_in = case.info["heads"]
    if _close(merged, heads_in.reshape(batch, seq, d_model)):
        return "merged without moving the heads back next to d_head: transpose(1, 2) before the reshape"
    return None


def greedy_decode(case: Case, got, mismatch) -> str | None:
    expected = case.expected
    limit = case.info["limit"]
    got = list(got) if isinstance(got, (list, tuple)) else got
    if not isinstance(got, list):
        return None
    eos = case.args[2]
    if got and got[0] == case.args[1] and got[1:] == expected:
        return "the result starts with <bos>: return the generated ids only"
    if expected and expected[-1] == eos and got == expected[:-1]:
        return "<eos> is dropped: keep it as the last id (the translation's end marker)"
    if len(got) > len(expected) and got[: len(expected)] == expected:
        if expected and expected[-1] == eos:
            return "it goes on after <eos>: stop once eos_id is produced"
        return f"it produces more than max_new_tokens = {limit} ids: stop after that many"
    if len(got) == len(expected) - 1 and got == expected[:-1]:
        return f"one id too few: produce up to max_new_tokens = {limit} ids (an off-by-one in the loop)"
    if len(set(got)) == 1 and len(got) > 1 and len(set(expected)) > 1:
        return "the same id every step: append each chosen id to the prefix before asking for the next one"
    if got and got == _greedy_by_max(case, len(got)):
        return ("the ids are the largest scores, not their positions: .max() gives the highest logit, "
                ".argmax() the id that has it")
    return None


def _greedy_by_max(case: Case, length: int) -> list[int]:
    """The first `length` ids a loop that takes int(logits.max()) would produce (as far as it gets)."""
    next_token_logits, bos_id = case.args[0], case.args[1]
    prefix = [bos_id]
    try:
        for _ in range(length):
            prefix.append(int(next_token_logits(prefix).max()))
    except Exception:  # an id outside the vocabulary: the loop stops there, as the learner's did
        pass
    return prefix[1:]


def label_smoothing(case: Case, got, mismatch) -> str | None:
    logits, labels, pad_id, eps = case.args
    if not isinstance(got, torch.Tensor):
        return None
    log_p = torch.log_softmax(logits, dim=-1)
    vocab = logits.shape[-1]
    nll = -log_p.gather(-1, labels.clamp(0, vocab - 1)[..., None])[..., 0]
    uniform = -log_p.mean(-1)
    real = labels != pad_id
    per_token = (1 - eps) * nll + eps * uniform
    if got.numel() != 1:
        return "return one number (a scalar tensor): the mean over the non-pad labels"
    value = got.reshape(())
    expected = (per_token * real).sum() / real.sum()
    for base, name in ((10.0, "log10"), (2.0, "log2")):
        if _close(value, expected / math.log(base)):
            return (f"the loss is {expected.item():.6g} / ln {base:g}: {name} where the natural logarithm belongs "
                    "(torch.log, or log_softmax)")
    others = -(log_p.sum(-1) - log_p.gather(-1, labels.clamp(0, vocab - 1)[..., None])[..., 0])
    if eps > 0 and _close(value, (((1 - eps) * nll + eps / vocab * others) * real).sum() / real.sum()):
        return ("the label's target is 1 - eps, without its own share eps/V: the target is 1 - eps + eps/V on the "
                "label and eps/V on every other token, so loss = (1 - eps)·(-log p[label]) + eps·mean_k(-log p[k])")
    if _close(value, per_token.mean()):
        return "padding counts: average over the labels that are not pad_id only"
    if _close(value, (per_token * real).sum() / labels.numel()):
        return "the pad positions are left out of the sum but counted in the average: divide by the real labels"
    if _close(value, (per_token * real).sum()):
        return "the sum over tokens: divide by the number of non-pad labels"
    other = -(log_p.sum(-1) - log_p.gather(-1, labels.clamp(0, vocab - 1)[..., None])[..., 0]) / (vocab - 1)
    if _close(value, (((1 - eps) * nll + eps * other) * real).sum() / real.sum()):
        return ("smoothing spread over the vocab - 1 wrong classes: clearformer (like torch) spreads eps over "
                "all classes")
    raw = -logits.gather(-1, labels.clamp(0, vocab - 1)[..., None])[..., 0]
    if _close(value, (((1 - eps) * raw + eps * (-logits.mean(-1))) * real).sum() / real.sum()):
        return "raw logits used as log-probabilities: apply log_softmax first"
    return None


def beam_step(case: Case, got, mismatch) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        return "return three tensors: (scores, beams, tokens)"
    scores, beams, tokens = got
    log_probs, beam_scores = case.info["log_probs"], case.info["beam_scores"]
    size = case.args[2]
    vocab = log_probs.shape[-1]
    total = (beam_scores[:, None] + log_probs).reshape(-1).topk(size)
    if _close(scores, total.values):
        if isinstance(beams, torch.Tensor) and torch.equal(beams.long(), total.indices % vocab):
            return ("beams and tokens are swapped: position p of the flattened (beams x vocab) scores is beam "
                    "p // vocab, token p % vocab")
        return "the scores are right: the beam is position // vocab and the token position % vocab"
    if _close(scores, total.values.flip(0)):
        return "the order is worst first: return the best first"
    if _close(scores, log_probs.reshape(-1).topk(size).values):
        return "each extension must add its beam's running score: beam_scores[b] + log_probs[b, t]"
    if isinstance(scores, torch.Tensor) and scores.numel() == log_probs.shape[0] * size and log_probs.shape[0] > 1:
        inside = (beam_scores[:, None] + log_probs).topk(size, dim=-1).values
        if _close(scores.reshape(inside.shape), inside) or _close(scores.reshape(-1), inside.reshape(-1)):
            return (f"top-k inside each beam: {log_probs.shape[0]} beams x {size} = {scores.numel()} candidates came "
                    f"back; rank all beams x vocab extensions together and keep the best beam_size = {size} overall")
    if isinstance(scores, torch.Tensor) and scores.shape == total.values.shape and log_probs.shape[0] > 1:
        inside = (beam_scores[:, None] + log_probs).topk(size, dim=-1).values.reshape(-1)[:size]
        if _close(scores, inside):
            return ("top-k inside each beam: the first beam's best extensions came back; rank all beams x vocab "
                    "extensions together and keep the best beam_size overall")
    per_beam = (beam_scores[:, None] + log_probs).topk(1, dim=-1).values.reshape(-1).sort(descending=True).values
    if isinstance(scores, torch.Tensor) and scores.shape == per_beam[:size].shape and _close(scores, per_beam[:size]):
        return "the best token of each beam: rank all beams x vocab extensions together"
    return None


def edge_note(case: Case, got) -> str:
    """The note for a case the Transformer's masks never create (a query with every key blocked)."""
    weights = got[1] if isinstance(got[1], torch.Tensor) else None
    empty = None if weights is None else weights.detach().to(torch.float64)[~case.info["rows_with_a_key"]]
    what = "differs there"
    if empty is not None and bool(torch.isnan(empty).any()):
        what = "gets NaN there (softmax of a row of -inf)"
    elif empty is not None and bool(((empty - 1 / empty.shape[-1]).abs() < 1e-9).all()):
        what = "gets uniform weights 1/k_len there (a finite fill such as -1e9)"
    return (f"the query with every key blocked {what}; clearformer gives it zero weights and a zero output. The "
            "Transformer's masks never block every key of a query (padding keeps the real tokens, the causal mask "
            "the diagonal), so this does not count against you; every other row matches")


def diagnose_error(exercise: str, case: Case, error: Raised) -> str | None:
    """What an exception raised in the learner's function most likely means, or None (`error`: as the child
    described it, learn/wire.py)."""
    text = error.text if error.isa("Exception") else ""
    kind = error.kind
    if exercise == "heads" and "view size is not compatible" in text:
        return ("merge_heads got a real attention output, laid out (batch, heads, seq, d_head) in memory: after "
                "transpose(1, 2) it is not contiguous, so .view() cannot regroup it. Use .reshape(...) or "
                ".contiguous().view(...)")
    if re.search(r"\.T\b", error.line):
        return ("`.T` reverses every axis of a 4-D tensor (batch, heads, seq, d_k -> d_k, seq, heads, batch): "
                "transpose the last two only, k.transpose(-2, -1)")
    if kind == "PrefixError" and "holds a" in text:
        return ("the prefix holds tensors: .argmax() returns a 0-d tensor; append int(logits.argmax()), a plain "
                "int id")
    if kind == "PrefixError" and "ids must be in" in text:
        return ("an id outside the vocabulary was fed back: .max() gives the highest score, .argmax() the id that "
                "has it")
    if kind == "PrefixError" or "must start with bos_id" in text:
        return ("the loop must start from the prefix [bos_id] (the decoder's first input is <bos>, and every "
                "chosen id is appended to it)")
    if error.isa("MemoryError") or "can't allocate memory" in text:
        return "it ran out of the memory the checker allows (an allocation that grows with a loop?)"
    if error.isa("RecursionError"):
        return "endless recursion: a function that calls itself without an end"
    if error.isa("SystemExit") or error.isa("KeyboardInterrupt"):
        return "the function must return its result, not end the program"
    if "mat1 and mat2 shapes cannot be multiplied" in text or "must match the size of tensor" in text:
        return "the shapes do not fit: check each tensor's axes against the docstring's shapes"
    return None


DIAGNOSES = {"positional-encoding": positional_encoding, "attention": attention, "causal-mask": causal_mask,
             "layer-norm": layer_norm, "heads": heads, "greedy-decode": greedy_decode,
             "label-smoothing": label_smoothing, "beam-step": beam_step}


def diagnose(exercise: str, case: Case, got, mismatch) -> str | None:
    """A sentence naming what differs, or None. Never raises: a diagnosis is a courtesy."""
    try:
        return DIAGNOSES[exercise](case, got, mismatch)
    except Exception:  # the learner's result can be anything; a failed guess must not hide the report
        return None
