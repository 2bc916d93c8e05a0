"""Attribution: how much each source token drives each target token of a translation.

The translation is teacher-forced (`model(src, tgt)`, the call training makes); target token t's output
is f_t = log p(y_t | y_<t, source). The source is read at the recorded name `src_embed.X` (token
embedding + positions, (1, src_len, d_model)), the input x; the baseline x' is the same source with every
token embedding set to zero and the positions kept (a hook at the token embedding's output writes the zeros).

  integrated-gradients  a_ti = (x_i - x'_i) · mean_k grad_i f_t(x' + alpha_k (x - x')),
                        alpha_k = (k - 1/2) / m, k = 1..m (the midpoint rule, m = `steps`); complete:
                        sum_i a_ti = f_t(x) - f_t(x') up to the rule's error (reported; tests/explain/test_why.py).
                        (Gauss-Legendre points did worse: ReLU makes the path's gradient piecewise.)
  gradient-x-input      a_ti = (x_i - x'_i) · grad_i f_t(x): the first-order change of f_t when token i's
                        embedding goes away
  attention             a_ti = the cross-attention weight of target t on source i, averaged over every
                        decoder layer and head

Every interpolated x is written at `src_embed.X` by a hook (`record/trace.py`), so the gradients flow
through the very modules that translate.

The work grows with steps x target tokens (the rows: one path point for one target token) x the cost of one
teacher-forced pass. Before it starts, `attribution_cost` estimates both from the sizes alone: the rows go
through in passes small enough for `ATTRIBUTION_PASS_BYTES` of activations (memory stays bounded whatever
--steps says: the mean gradient is summed pass by pass, never stacked), and work over
`MAX_ATTRIBUTION_ROW_TOKENS` (what a small model's time follows: its many small products cost per token,
not per operation) or `MAX_ATTRIBUTION_FLOPS` (what a large model's time follows) is refused in one line
naming the figures and the --steps that would fit (clearformer.limits).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from clearformer.errors import UserError
from clearformer.limits import ATTRIBUTION_PASS_BYTES, MAX_ATTRIBUTION_FLOPS, MAX_ATTRIBUTION_ROW_TOKENS
from clearformer.record.trace import Hooks, Point, Recorder

METHODS = ("integrated-gradients", "gradient-x-input", "attention")
DEFAULT_STEPS = 128  # the midpoint rule's points: completeness within 1% on the toy model (tests/explain/test_why.py)
ROWS_PER_PASS = 256  # rows (a path point for one target token) per forward and backward pass
INPUT = "src_embed.X"


@dataclass
class Attribution:
    """scores (tgt_len, src_len): target t's score per source token; for integrated gradients the
    completeness check per target token: `sums` (of its scores) against `differences` f_t(x) - f_t(x')."""

    method: str
    scores: torch.Tensor
    steps: int | None = None
    sums: list[float] | None = None
    differences: list[float] | None = None


def token_embedding_name(model) -> str:
    """The recorded name of the source token embedding (scaled by sqrt(d_model) when the model does that)."""
    return "src_embed.tokens." + ("scaled" if model.src_embed.tokens.scale else "lookup")


def source_inputs(model, src: torch.Tensor, tgt_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, x'): the input at `src_embed.X` of src (1, src_len) and of its baseline (zero token embeddings)."""
    seen: dict[str, torch.Tensor] = {}

    def keep(value: torch.Tensor, point: Point) -> None:
        seen[point.name] = value.detach().clone()

    with torch.no_grad(), Hooks({INPUT: keep}):
        model(src, tgt_in)
        x = seen[INPUT]
        with Hooks({token_embedding_name(model): lambda value, point: torch.zeros_like(value)}):
            model(src, tgt_in)
    return x, seen[INPUT]


def target_logprobs(model, src: torch.Tensor, tgt_in: torch.Tensor, target: torch.Tensor,
                    inputs: torch.Tensor) -> torch.Tensor:
    """f (rows, tgt_len): log p of each target token, with `inputs` (rows, src_len, d_model) written at src_embed.X."""
    rows = inputs.shape[0]
    with Hooks({INPUT: lambda value, point: inputs}):
        logits = model(src.expand(rows, -1), tgt_in.expand(rows, -1))
    return torch.log_softmax(logits.double(), dim=-1).gather(2, target.expand(rows, -1)[..., None])[..., 0]


def gradients(model, src, tgt_in, target, inputs: torch.Tensor, which: torch.Tensor) -> torch.Tensor:
    """grad (rows, src_len, d_model): row r's d f_which[r] / d inputs[r], for inputs (rows, src_len, d_model) and
    which (rows,) target positions. The rows are independent, so one backward pass gives every row's gradient."""
    inputs = inputs.detach().requires_grad_(True)
    f = target_logprobs(model, src, tgt_in, target, inputs)
    return torch.autograd.grad(f[torch.arange(len(which)), which].sum(), inputs)[0]


@dataclass(frozen=True)
class AttributionCost:
    """What an attribution will take, from the sizes alone: `rows` (a path point for one target token),
    `row_tokens` (rows x the tokens of a pass: source and target), the floating-point operations of their
    forward and backward passes, and the rows per pass that keep one pass's activations under
    ATTRIBUTION_PASS_BYTES."""

    rows: int
    row_tokens: int
    flops: float
    rows_per_pass: int

    def over_limit(self) -> float:
        """How many times over the larger of the two limits (at most 1: within both)."""
        return max(self.row_tokens / MAX_ATTRIBUTION_ROW_TOKENS, self.flops / MAX_ATTRIBUTION_FLOPS)


def attribution_cost(config, src_len: int, tgt_len: int, points: int) -> AttributionCost:
    """The cost of attributing a source of `src_len` and a target of `tgt_len` tokens,
    `points` path points (1 for gradient x input). Per row: 6 x (weights a token passes) x tokens for the
    matrix products forward and backward, the attention products, and the output layer over the vocabulary;
    activations: what autograd keeps per token and layer (about 12 d_model + 2 d_ff floats), the attention
    weights, and the logits in float32 and float64 (the log-softmax)."""
    d, ff, heads, vocab = config.d_model, config.d_ff, config.n_heads, config.tgt_vocab_size
    encoder, decoder = config.n_encoder_layers, config.n_decoder_layers
    matmul = 6 * (src_len * encoder * (4 * d * d + 2 * d * ff) + tgt_len * decoder * (8 * d * d + 2 * d * ff)
                  + tgt_len * d * vocab)
    attention = 12 * d * (encoder * src_len ** 2 + decoder * (tgt_len ** 2 + tgt_len * src_len))
    activations = 4 * ((src_len * encoder + tgt_len * decoder) * (12 * d + 2 * ff)
                       + heads * (encoder * src_len ** 2 + decoder * (tgt_len ** 2 + 2 * tgt_len * src_len)))
    per_row_bytes = activations + 20 * tgt_len * vocab
    rows = points * tgt_len
    return AttributionCost(rows, rows * (src_len + tgt_len), float(rows) * (matmul + attention),
                           max(1, min(ROWS_PER_PASS, ATTRIBUTION_PASS_BYTES // max(per_row_bytes, 1))))


def check_cost(cost: AttributionCost, points: int, src_len: int, tgt_len: int) -> None:
    """Refuse, before any work, an attribution over either limit (one line: the figures and a way out)."""
    over = cost.over_limit()
    if over <= 1:
        return
    fitting = int(points / over)
    way_out = f"use at most --steps {fitting} here" if fitting >= 1 and points > 1 else "attribute a shorter sentence"
    raise UserError(f"attribution of {points} path point(s) x {tgt_len} target x {src_len} source tokens is "
                    f"{cost.row_tokens:,} row-tokens and about {cost.flops / 1e12:,.1f} TFLOP of work, over the limit "
                    f"of {MAX_ATTRIBUTION_ROW_TOKENS:,} row-tokens and {MAX_ATTRIBUTION_FLOPS / 1e12:g} TFLOP "
                    f"(clearformer.limits): {way_out}")


def mean_gradients(model, src, tgt_in, target, points: torch.Tensor, rows_per_pass: int) -> torch.Tensor:
    """The mean over `points` (points, src_len, d_model) of every target token's gradient: (tgt_len, src_len,
    d_model) in float64, summed pass by pass of at most `rows_per_pass` rows (a row = one point for one target
    token), so memory holds one pass and the sum whatever the number of points."""
    tgt_len, count = target.shape[0], points.shape[0]
    total = torch.zeros(tgt_len, *points.shape[1:], dtype=torch.float64, device=points.device)
    for start in range(0, tgt_len * count, rows_per_pass):
        row = torch.arange(start, min(start + rows_per_pass, tgt_len * count), device=points.device)
        which = row // count  # row = t * count + k
        grads = gradients(model, src, tgt_in, target, points[row % count], which)
        total.index_add_(0, which, grads.double())
    return total / count


def integrated_gradients(model, src, tgt_in, target, steps: int = DEFAULT_STEPS,
                         rows_per_pass: int = ROWS_PER_PASS) -> Attribution:
    x, baseline = source_inputs(model, src, tgt_in)
    alphas = (torch.arange(steps, dtype=x.dtype, device=x.device) + 0.5) / steps  # the midpoint rule
    path = baseline + alphas[:, None, None] * (x - baseline)  # (steps, src_len, d_model)
    mean = mean_gradients(model, src, tgt_in, target, path, rows_per_pass)  # (tgt_len, src_len, d_model)
    scores = (mean * (x - baseline).double()).sum(dim=-1)  # (tgt_len, src_len)
    with torch.no_grad():
        ends = target_logprobs(model, src, tgt_in, target, torch.cat([x, baseline]))
    return Attribution("integrated-gradients", scores.float(), steps, scores.sum(dim=1).tolist(),
                       (ends[0] - ends[1]).tolist())


def gradient_x_input(model, src, tgt_in, target, rows_per_pass: int = ROWS_PER_PASS) -> Attribution:
    x, baseline = source_inputs(model, src, tgt_in)
    grads = mean_gradients(model, src, tgt_in, target, x, rows_per_pass)  # (tgt_len, src_len, d_model)
    return Attribution("gradient-x-input", (grads * (x - baseline)[0].double()).sum(dim=-1).float())


def attention_scores(model, src, tgt_in) -> Attribution:
    with torch.no_grad(), Recorder() as recorder:
        model(src, tgt_in)
    weights = [r.value[0] for r in recorder.find("cross_attention.weights")]  # each (heads, tgt_len, src_len)
    return Attribution("attention", torch.stack(weights).mean(dim=(0, 1)).float())


def attribute(model, src_ids: list[int], translation: list[int], bos_id: int, method: str = METHODS[0],
              steps: int = DEFAULT_STEPS) -> Attribution:
    """Scores (len(translation), len(src_ids)) of `method` for the translation's ids (<eos> last) teacher-forced
    after <bos> on the source ids (as the model reads them)."""
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device)
    target = torch.tensor(translation, device=device)
    tgt_in = torch.tensor([[bos_id, *translation[:-1]]], device=device)
    model.eval()
    if method == "attention":
        return attention_scores(model, src, tgt_in)
    points = steps if method == "integrated-gradients" else 1
    cost = attribution_cost(model.config, len(src_ids), len(translation), points)
    check_cost(cost, points, len(src_ids), len(translation))  # before any work
    if method == "gradient-x-input":
        return gradient_x_input(model, src, tgt_in, target, cost.rows_per_pass)
    return integrated_gradients(model, src, tgt_in, target, steps, cost.rows_per_pass)


def alignments(scores: torch.Tensor, source_words: list[int], target_words: list[int]) -> list[tuple[int, int]]:
    """Pharaoh links (i, j): each target position j of `target_words` to the source position i of
    `source_words` it scores highest (special tokens such as <eos> left out of both lists by the caller)."""
    if not source_words:
        return []
    links = []
    for j in target_words:
        row = scores[j, source_words]
        links.append((source_words[int(row.argmax())], j))
    return sorted(links)
