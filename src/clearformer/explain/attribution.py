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
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

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


def gradients_along(model, src, tgt_in, target, points: torch.Tensor) -> torch.Tensor:
    """grad (tgt_len, points, src_len, d_model) of every target token's f at each of `points` (points, src_len,
    d_model), in passes of at most ROWS_PER_PASS rows (a row = one point for one target token)."""
    tgt_len, count = target.shape[0], points.shape[0]
    which = torch.arange(tgt_len, device=points.device).repeat_interleave(count)  # row = t * count + k
    rows = points.repeat(tgt_len, 1, 1)
    grads = [gradients(model, src, tgt_in, target, rows[s:s + ROWS_PER_PASS], which[s:s + ROWS_PER_PASS])
             for s in range(0, len(which), ROWS_PER_PASS)]
    return torch.cat(grads).view(tgt_len, count, *points.shape[1:])


def integrated_gradients(model, src, tgt_in, target, steps: int = DEFAULT_STEPS) -> Attribution:
    x, baseline = source_inputs(model, src, tgt_in)
    alphas = (torch.arange(steps, dtype=x.dtype, device=x.device) + 0.5) / steps  # the midpoint rule
    path = baseline + alphas[:, None, None] * (x - baseline)  # (steps, src_len, d_model)
    grads = gradients_along(model, src, tgt_in, target, path).double()
    mean = grads.mean(dim=1)  # (tgt_len, src_len, d_model)
    scores = (mean * (x - baseline).double()).sum(dim=-1)  # (tgt_len, src_len)
    with torch.no_grad():
        ends = target_logprobs(model, src, tgt_in, target, torch.cat([x, baseline]))
    return Attribution("integrated-gradients", scores.float(), steps, scores.sum(dim=1).tolist(),
                       (ends[0] - ends[1]).tolist())


def gradient_x_input(model, src, tgt_in, target) -> Attribution:
    x, baseline = source_inputs(model, src, tgt_in)
    grads = gradients_along(model, src, tgt_in, target, x)[:, 0]  # (tgt_len, src_len, d_model)
    return Attribution("gradient-x-input", (grads.double() * (x - baseline)[0].double()).sum(dim=-1).float())


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
    if method == "gradient-x-input":
        return gradient_x_input(model, src, tgt_in, target)
    return integrated_gradients(model, src, tgt_in, target, steps)


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
