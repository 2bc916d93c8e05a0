"""Claim 4: "Multiple heads capture different patterns."

Experiment: the toy-translate model (4 heads of width 16 in every attention) trained briefly on
the built-in phrase set. Measured, for every attention module (encoder self-attention, decoder
self-attention, cross-attention, per layer):
  * how different its heads' attention maps are: the Jensen-Shannon distance (base 2, 0 = the
    same distribution, 1 = disjoint) between the weight rows of every pair of heads, averaged over
    pairs and over the real query rows of the validation sentences - before and after training, as
    fresh random heads already differ;
  * what each head is worth: the rise in validation loss (nll per token) when that head alone is
    removed (its slice of W^O zeroed, so nothing it computes reaches the output).
The full version also trains one head of width d_model against 4 heads at the same parameter count
and reports BLEU (benchmarks/claims.py, through the real trainer).
"""

from __future__ import annotations

import itertools

import torch

from clearformer.claims.common import machine, new_figure, quick_train, toy_data, toy_transformer, valid_nll
from clearformer.data.batching import collate
from clearformer.model.attention import MultiHeadAttention
from clearformer.model.transformer import Transformer
from clearformer.record.trace import Recorder


def js_distance(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon distance (base 2) between distributions along the last axis: (..., k) -> (...)."""
    m = 0.5 * (p + q)

    def kl(a: torch.Tensor) -> torch.Tensor:
        return torch.where(a > 0, a * (a.clamp_min(1e-30).log2() - m.clamp_min(1e-30).log2()), 0.0).sum(-1)

    return (0.5 * kl(p) + 0.5 * kl(q)).clamp_min(0.0).sqrt()


def mean_pairwise_js(weights: torch.Tensor, rows: torch.Tensor) -> float:
    """weights (batch, heads, q_len, k_len), rows (batch, q_len) bool = real query rows
    -> mean JS distance over head pairs and real rows (nan with one head)."""
    pairs = list(itertools.combinations(range(weights.shape[1]), 2))
    if not pairs:
        return float("nan")
    distances = torch.stack([js_distance(weights[:, a], weights[:, b]) for a, b in pairs])  # (pairs, batch, q)
    return distances[:, rows].mean().item()


def attention_modules(model: Transformer) -> dict[str, MultiHeadAttention]:
    """Every multi-head attention of the model by its trace name (encoder.layers.0.self_attention, ...)."""
    return {m.trace_name: m for m in model.modules() if isinstance(m, MultiHeadAttention)}


@torch.no_grad()
def head_diversity(model: Transformer, batch) -> dict[str, float]:
    """{attention module: mean pairwise JS distance of its heads} on one teacher-forced batch."""
    with Recorder() as recorder:
        model(batch.src, batch.tgt_in)
    src_rows, tgt_rows = batch.src != batch.pad_id, batch.tgt_in != batch.pad_id
    return {name: mean_pairwise_js(recorder.get(f"{name}.weights"), src_rows if "encoder" in name else tgt_rows)
            for name in attention_modules(model)}


@torch.no_grad()
def ablation_costs(model: Transformer, data) -> dict[str, list[float]]:
    """{attention module: [validation nll rise when head h is removed, for each h]}."""
    base = valid_nll(model, data)
    costs = {}
    for name, attention in attention_modules(model).items():
        costs[name] = []
        for head in range(attention.n_heads):
            columns = slice(head * attention.d_head, (head + 1) * attention.d_head)
            saved = attention.w_o.weight[:, columns].clone()
            attention.w_o.weight[:, columns] = 0.0
            costs[name].append(valid_nll(model, data) - base)
            attention.w_o.weight[:, columns] = saved
    return costs


def run(quick: bool = True, steps: int | None = None, n_heads: int = 4, seed: int = 1,
        seconds: float = 600.0) -> dict:
    """Train the toy model `steps` updates (at most `seconds`); head diversity before and after, and each
    head's ablation cost. A step count, not a time budget, so that a rerun gives the same model."""
    steps = steps or (300 if quick else 3000)
    data = toy_data()
    tok = data.tokenizer
    torch.manual_seed(seed)
    model = toy_transformer(data, n_heads=n_heads).eval()
    batch = collate(data.valid, tok.pad_id, tok.bos_id, tok.eos_id)
    before = head_diversity(model, batch)
    training = quick_train(model, data, seconds, max_steps=steps, seed=seed)
    after = head_diversity(model, batch)
    return {"claim": 4, "quick": quick, "machine": machine(), "n_heads": n_heads, "training": training,
            "valid_nll": valid_nll(model, data), "js_at_init": before, "js_trained": after,
            "ablation_nll_rise": ablation_costs(model, data)}


def short(name: str) -> str:
    """encoder.layers.0.self_attention -> enc0 self."""
    parts = name.split(".")
    return f"{parts[0][:3]}{parts[2]} {parts[3].split('_')[0]}"


def summary(results: dict) -> list[str]:
    t = results["training"]
    lines = [f"toy-translate, {results['n_heads']} heads, trained {t['steps']} steps ({t['seconds']} s, "
             f"loss {t['first_loss']:.2f} -> {t['last_loss']:.2f}): "
             f"validation nll {results['valid_nll']:.3f}",
             f"{'attention':>12} {'JS at init':>11} {'JS trained':>11}   nll rise when head h is removed"]
    for name, after in results["js_trained"].items():
        costs = " ".join(f"{c:+.3f}" for c in results["ablation_nll_rise"][name])
        lines.append(f"{short(name):>12} {results['js_at_init'][name]:>11.3f} {after:>11.3f}   {costs}")
    every = [c for costs in results["ablation_nll_rise"].values() for c in costs]
    lines.append(f"head removal costs: largest {max(every):+.3f}, smallest {min(every):+.3f} nats/token")
    return lines


def figure(results: dict):
    fig = new_figure(11, 4)
    left, right = fig.subplots(1, 2)
    names = list(results["js_trained"])
    x = torch.arange(len(names)).numpy()
    left.bar(x - 0.2, [results["js_at_init"][n] for n in names], 0.4, label="at initialisation", color="tab:gray")
    left.bar(x + 0.2, [results["js_trained"][n] for n in names], 0.4, label="trained", color="tab:blue")
    left.set_xticks(x, [short(n) for n in names], rotation=30, fontsize=8)
    left.set_ylabel("mean pairwise JS distance between heads")
    left.set_title("how different the heads' attention maps are")
    left.legend(fontsize=8)
    costs = [results["ablation_nll_rise"][n] for n in names]
    image = right.imshow(costs, cmap="magma", aspect="auto")
    right.set_yticks(range(len(names)), [short(n) for n in names], fontsize=8)
    right.set_xticks(range(len(costs[0])), [f"head {h}" for h in range(len(costs[0]))])
    for row, values in enumerate(costs):
        for col, value in enumerate(values):
            bright = value > 0.6 * max(max(r) for r in costs)
            right.text(col, row, f"{value:+.2f}", ha="center", va="center", fontsize=7,
                       color="black" if bright else "white")
    right.set_title("validation nll rise when one head is removed")
    fig.colorbar(image, ax=right)
    return fig
