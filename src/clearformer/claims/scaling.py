"""Claim 2: "Why scale by sqrt(d_k)? Large dot products push softmax into regions with tiny gradients."

Experiment: for d_k = 4 .. 512, queries and keys from two sources -
  * "unit": q, k with independent N(0, 1) entries, the paper's own assumption (footnote 4: then
    q.k has variance d_k);
  * "init": Q and K recorded from a freshly initialised `MultiHeadAttention` (one head of width
    d_k) on unit-variance input, i.e. what the model computes at its first step;
  * "trained" (full version only): Q and K recorded from the encoder self-attention of a model
    trained on the toy phrase set (its one head width);
then `explicit_attention` with scale 1/sqrt(d_k) and with scale 1. Measured: the softmax entropy
(nats; ln(n) is uniform attention) and the norm of the gradient that reaches Q and K from a
fixed random upstream gradient on the attention output (mean over query rows of the row norm).

Then what it costs in training: the same model trained twice on the toy phrase set, with the
same seed, batches and step count, once as the paper has it and once with
`ModelConfig.scale_attention=False` (scores Q K^T, scale 1; `clearformer train --set
scale_attention=false` trains the same). Measured: the training loss along the way, the validation
loss and greedy BLEU at the end, and the mean entropy of every attention row of the trained model.
The quick version trains toy-translate (d_k 16) for 150 steps; the full one toy-translate and
`small` (d_k 64).
"""

from __future__ import annotations

import math

import torch

from clearformer.claims.common import (
    QuickTrainer,
    ToyData,
    bleu,
    machine,
    new_figure,
    quick_train,
    toy_data,
    toy_transformer,
    valid_nll,
)
from clearformer.config import ModelConfig
from clearformer.data.batching import collate
from clearformer.model.attention import MultiHeadAttention, explicit_attention
from clearformer.record.trace import Recorder

QUICK_DIMS = (4, 8, 16, 32, 64, 128, 256, 512)
# The training contest: {preset: (steps, QuickTrainer options)}; the full version also caps each run's time.
QUICK_CONTEST = {"toy-translate": (150, {})}
FULL_CONTEST = {"toy-translate": (1500, {}), "small": (800, dict(warmup=400, lr_factor=1.0))}
SCALES = ("scaled", "unscaled")
STATISTICS = ("entropy", "softmax_gain", "grad_q", "grad_k")


def attention_statistics(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                         upstream: torch.Tensor) -> dict:
    """q, k, v (batch, heads, n, d) -> {"entropy", "max_weight", "grad_q", "grad_k"} at this scale.

    entropy: mean over query rows of -sum_j w_ij ln w_ij; max_weight: mean of each row's largest
    weight; grad_q / grad_k: mean over rows of ||dL/dq_i|| for L = sum(output * upstream);
    softmax_gain: how much of the gradient arriving at the weights the softmax lets through to its
    input s (the scaled scores): mean over rows of ||dL/ds_i|| / ||dL/dw_i||, where
    dL/ds = w * (g - <w, g>) and g = dL/dw = upstream V^T. Near 0: a saturated softmax.
    """
    q, k = q.detach().clone().requires_grad_(True), k.detach().clone().requires_grad_(True)
    output, weights = explicit_attention(q, k, v.detach(), scale=scale)
    (output * upstream).sum().backward()
    weights = weights.detach()
    entropy = -(weights * weights.clamp_min(1e-30).log()).sum(-1)
    grad_weights = upstream @ v.detach().transpose(-2, -1)  # (batch, heads, n, n)
    grad_scores = weights * (grad_weights - (weights * grad_weights).sum(-1, keepdim=True))
    return {"entropy": entropy.mean().item(), "max_weight": weights.amax(-1).mean().item(),
            "softmax_gain": (grad_scores.norm(dim=-1) / grad_weights.norm(dim=-1)).mean().item(),
            "grad_q": q.grad.norm(dim=-1).mean().item(), "grad_k": k.grad.norm(dim=-1).mean().item()}


def unit_qkv(batch: int, length: int, d_k: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """q, k, v (batch, 1, length, d_k) with independent N(0, 1) entries."""
    return tuple(torch.randn(batch, 1, length, d_k, generator=generator) for _ in range(3))


def recorded_qkv(attention: MultiHeadAttention, x: torch.Tensor, mask=None) -> tuple[torch.Tensor, ...]:
    """The Q, K, V that `attention` computes on x (batch, n, d_model), read from the recorder."""
    with Recorder() as recorder, torch.no_grad():
        attention(x, mask=mask)
    return tuple(recorder.get(f"{attention.trace_name}.{name}") for name in ("Q", "K", "V"))


def init_qkv(batch: int, length: int, d_k: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Q, K, V of a freshly initialised one-head attention of width d_k, on N(0, 1) input."""
    torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=generator)))
    attention = MultiHeadAttention(ModelConfig(d_model=d_k, n_heads=1))
    object.__setattr__(attention, "trace_name", "attention")
    return recorded_qkv(attention, torch.randn(batch, length, d_k, generator=generator))


def compare_scales(q, k, v, generator: torch.Generator) -> dict:
    """{"scaled": stats with 1/sqrt(d_k), "unscaled": stats with 1}, same upstream gradient."""
    upstream = torch.randn(q.shape[:-1] + v.shape[-1:], generator=generator)
    return {name: attention_statistics(q, k, v, scale, upstream)
            for name, scale in (("scaled", 1.0 / math.sqrt(q.shape[-1])), ("unscaled", 1.0))}


def run(quick: bool = True, dims=None, length: int = 32, batch: int = 8, seed: int = 0,
        trained_seconds: float = 120.0, contest: dict | None = None, contest_seconds: float = 600.0) -> dict:
    """Entropy and gradients with and without the scaling for every d_k (and a trained model when not
    quick), then the training contest (`contest`: {preset: (steps, trainer options)}, default
    QUICK_CONTEST or FULL_CONTEST; each run also stops after `contest_seconds`)."""
    dims = list(dims or QUICK_DIMS)
    generator = torch.Generator().manual_seed(seed)
    sources = {"unit": unit_qkv, "init": init_qkv}
    results = {"claim": 2, "quick": quick, "machine": machine(), "dims": dims, "length": length,
               "batch": batch, "uniform_entropy": math.log(length)}
    for source, make in sources.items():
        per_dim = [compare_scales(*make(batch, length, d, generator), generator) for d in dims]
        results[source] = {scale: {stat: [row[scale][stat] for row in per_dim] for stat in per_dim[0][scale]}
                           for scale in ("scaled", "unscaled")}
    if not quick:
        results["trained"] = trained_statistics(trained_seconds, generator)
    contest = (QUICK_CONTEST if quick else FULL_CONTEST) if contest is None else contest
    results["training_without_scaling"] = {name: train_with_and_without(name, steps, contest_seconds, options)
                                           for name, (steps, options) in contest.items()}
    return results


def train_with_and_without(preset_name: str, steps: int, seconds: float, options: dict, seed: int = 1) -> dict:
    """The preset trained on the toy phrase set with and without the scaling: the same initial weights,
    batches and steps -> {"d_k", "scaled": outcome, "unscaled": outcome} (see `outcome`)."""
    data = toy_data()
    results = {}
    for name, scaled in (("scaled", True), ("unscaled", False)):
        torch.manual_seed(seed)  # the switch holds no weights: both runs start from the same ones
        model = toy_transformer(data, preset_name, scale_attention=scaled)
        trainer = QuickTrainer(model, data, seed=seed, **options)
        trainer.advance(seconds, steps)
        results[name] = outcome(model, data, trainer)
    results["d_k"] = model.config.head_dim
    return results


def outcome(model, data: ToyData, trainer) -> dict:
    """What a contest run reached: QuickTrainer.report(), its loss every step, validation nll, greedy BLEU
    and the mean attention entropy (nats) over every attention row of the validation sentences."""
    return {**trainer.report(), "losses": [round(x, 4) for x in trainer.losses], "valid_nll": valid_nll(model, data),
            "bleu": bleu(model, data), "attention_entropy": attention_entropy(model, data)}


@torch.no_grad()
def attention_entropy(model, data: ToyData, sentences: int = 16) -> float:
    """Mean softmax entropy (nats) of every attention row the model computes, teacher forced, on the first
    `sentences` validation pairs one at a time (no padding), all layers and heads together."""
    tok = data.tokenizer
    model.eval()
    rows = []
    for example in data.valid[:sentences]:
        src = torch.tensor([example.src])
        tgt = torch.tensor([(tok.bos_id, *example.tgt)])
        with Recorder() as recorder:
            model(src, tgt)
        for record in recorder.records:
            if record.name.endswith(".weights"):
                w = record.value
                rows.append(-(w * w.clamp_min(1e-30).log()).sum(-1).flatten())
    return torch.cat(rows).mean().item()


def trained_statistics(seconds: float, generator: torch.Generator) -> dict:
    """Scaled vs unscaled statistics on Q, K, V of a toy model trained for `seconds` (encoder layer 0)."""
    data = toy_data()
    tok = data.tokenizer
    model = toy_transformer(data)
    training = quick_train(model, data, seconds)
    batch = collate(data.valid[:64], tok.pad_id, tok.bos_id, tok.eos_id)
    attention = model.encoder.layers[0].self_attention
    x = model.src_embed(batch.src)
    q, k, v = recorded_qkv(attention, x)
    stats = compare_scales(q, k, v, generator)  # padded keys included: the same for both scales
    return {"d_k": attention.d_head, "training": training, **stats}


def summary(results: dict) -> list[str]:
    lines = [f"softmax over {results['length']} keys (uniform entropy ln {results['length']} = "
             f"{results['uniform_entropy']:.2f} nats); q, k with N(0,1) entries:",
             f"{'d_k':>5} {'entropy scaled':>15} {'unscaled':>9} {'gain scaled':>15} {'unscaled':>9}"
             f" {'|dL/dq| scaled':>15} {'unscaled':>9}"]
    unit = results["unit"]
    for i, d in enumerate(results["dims"]):
        row = [unit[scale][stat][i] for stat in ("entropy", "softmax_gain", "grad_q") for scale in SCALES]
        lines.append(f"{d:>5} {row[0]:>15.3f} {row[1]:>9.3f} {row[2]:>15.4f} {row[3]:>9.4f} "
                     f"{row[4]:>15.4f} {row[5]:>9.4f}")
    init = results["init"]
    lines.append(f"freshly initialised attention, d_k {results['dims'][-1]}: entropy "
                 f"{init['scaled']['entropy'][-1]:.3f} scaled vs {init['unscaled']['entropy'][-1]:.3f} unscaled")
    if "trained" in results:
        t = results["trained"]
        lines.append(f"trained toy model (d_k {t['d_k']}, {t['training']['steps']} steps): entropy "
                     f"{t['scaled']['entropy']:.3f} scaled vs {t['unscaled']['entropy']:.3f} unscaled")
    for name, contest in results.get("training_without_scaling", {}).items():
        lines.append(f"training {name} (d_k {contest['d_k']}) with / without the scaling, same seed and batches:")
        for scale in SCALES:
            r = contest[scale]
            lines.append(f"  {scale:>8}: {r['steps']} steps in {r['seconds']:.0f} s, train loss "
                         f"{r['first_loss']:.2f} -> {r['last_loss']:.3f}, valid nll {r['valid_nll']:.3f}, "
                         f"BLEU {r['bleu']:.1f}, attention entropy {r['attention_entropy']:.3f} nats")
    return lines


def smoothed(values: list[float], window: int = 10) -> list[float]:
    """Running mean over the last `window` values (the first ones over what there is)."""
    return [sum(values[max(0, i - window + 1): i + 1]) / (i + 1 - max(0, i - window + 1)) for i in range(len(values))]


def contest_axes(ax, results: dict) -> None:
    """The training losses of the contest: scaled solid, unscaled dashed, one colour per preset."""
    for (name, contest), color in zip(results.get("training_without_scaling", {}).items(),
                                      ("tab:green", "tab:purple", "tab:brown"), strict=False):
        for scale, line in (("scaled", "-"), ("unscaled", "--")):
            losses = contest[scale]["losses"]
            ax.plot(range(1, len(losses) + 1), smoothed(losses), line, color=color,
                    label=f"{name} (d_k {contest['d_k']}), {'/sqrt(d_k)' if scale == 'scaled' else 'no scaling'}")
    ax.set_xlabel("training step")
    ax.set_title("training loss (smoothed over 10 steps)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def figure(results: dict):
    fig = new_figure(20, 4)
    axes = fig.subplots(1, 5)
    contest_axes(axes[4], results)
    axes = axes[:4]
    styles = {("unit", "scaled"): ("tab:blue", "-"), ("unit", "unscaled"): ("tab:red", "-"),
              ("init", "scaled"): ("tab:blue", "--"), ("init", "unscaled"): ("tab:red", "--")}
    for (source, scale), (color, line) in styles.items():
        values = results[source][scale]
        label = f"{'/sqrt(d_k)' if scale == 'scaled' else 'no scaling'}, {source}"
        for ax, stat in zip(axes, STATISTICS, strict=True):
            ax.plot(results["dims"], values[stat], line, marker="o", color=color, label=label)
    axes[0].axhline(results["uniform_entropy"], color="gray", lw=0.8, ls=":", label="uniform")
    titles = ("softmax entropy (nats)", "softmax gain |dL/ds| / |dL/dw|", "gradient reaching Q (row norm)",
              "gradient reaching K (row norm)")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d_k")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    for ax in axes[1:]:
        ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    return fig
