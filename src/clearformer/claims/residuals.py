"""Claim 5: "The residual connections and layer normalisation help gradients flow."

Experiment: encoder-decoder Transformers of 6 and 12 layers a side (width 64, 4 heads), post-norm
(the paper) and pre-norm, each with and without the residual connections, at initialisation.
One batch of the toy phrase set goes through the project's label-smoothed loss; measured is the
norm of the gradient of every layer's parameters (encoder layers 1..N, then decoder layers 1..N),
and the loss itself. Without residuals each Add & Norm becomes Norm(Sublayer(x)) (post) or
Sublayer(Norm(x)) (pre): the same sublayers and norms, only the skip path is gone.
Then the same measurement after training: each variant's first model trained on the toy phrase
set (the claims' QuickTrainer: the project's loss, schedule and optimizer, warm-up 100 steps) for a
few steps (quick: 30, the four variants with residuals) or briefly (full: 300, all eight), and its
gradient norm per layer taken again on the same batch. The full benchmark also trains post-norm
with and without the warm-up (benchmarks/claims.py).
"""

from __future__ import annotations

import torch
from torch import nn

from clearformer.claims.common import QuickTrainer, ToyData, batch_loss, machine, new_figure, toy_data, toy_transformer
from clearformer.data.batching import collate
from clearformer.model.layers import AddNorm
from clearformer.model.transformer import Transformer


class WithoutResidual(nn.Module):
    """An Add & Norm with the "Add" taken out: Norm(Sublayer(x)) or Sublayer(Norm(x)).

    It keeps the original's LayerNorm (same parameters), so only the skip path differs.
    """

    def __init__(self, add_norm: AddNorm) -> None:
        super().__init__()
        self.norm = add_norm.norm
        self.norm_first = add_norm.norm_first

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        """x (batch, seq, d_model) -> (batch, seq, d_model)."""
        return sublayer(self.norm(x)) if self.norm_first else self.norm(sublayer(x))


def remove_residuals(model: nn.Module) -> nn.Module:
    """Replace every AddNorm of `model` (in place) by its WithoutResidual twin; returns the model."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, AddNorm):
                setattr(parent, name, WithoutResidual(child))
    return model


def build(data: ToyData, depth: int, norm_first: bool, residual: bool, seed: int) -> Transformer:
    """The toy-translate model with `depth` layers a side, post- or pre-norm, with or without residuals."""
    torch.manual_seed(seed)
    model = toy_transformer(data, n_encoder_layers=depth, n_decoder_layers=depth, norm_first=norm_first)
    return model if residual else remove_residuals(model)


def layer_gradient_norms(model: Transformer, batch) -> tuple[list[float], float]:
    """(gradient norm of each layer's parameters, encoder layers first then decoder layers; loss per label)."""
    model.train()
    model.zero_grad(set_to_none=True)
    loss, _, labels = batch_loss(model, batch)
    (loss / labels).backward()
    norms = []
    for stack in (model.encoder.layers, model.decoder.layers):
        for layer in stack:
            grads = [p.grad.norm() for p in layer.parameters() if p.grad is not None]
            norms.append(torch.stack(grads).norm().item() if grads else 0.0)
    return norms, loss.item() / labels


FLOOR = 1e-16  # a gradient of exactly 0 is drawn here on the log axis

@torch.no_grad()
def memory_spread(model: Transformer, batch) -> float:
    """How different the encoder's output rows of one sentence are: mean over real positions of
    ||m_i - mean_j m_j|| / mean ||m_i||, averaged over sentences. Near 0: every word has become the
    same vector (rank collapse), and cross-attention no longer depends on where it looks."""
    model.eval()
    memory, _ = model.encode(batch.src)
    spreads = []
    for row, real in zip(memory, batch.src != batch.pad_id, strict=True):
        rows = row[real]
        spreads.append(((rows - rows.mean(0)).norm(dim=-1).mean() / rows.norm(dim=-1).mean()).item())
    return sum(spreads) / len(spreads)


VARIANTS = {"post-norm": (False, True), "pre-norm": (True, True),
            "post-norm, no residual": (False, False), "pre-norm, no residual": (True, False)}


def run(quick: bool = True, depths=(6, 12), sentences: int = 32, seeds: int | None = None,
        train_steps: int | None = None) -> dict:
    """Gradient norm per layer at initialisation for every variant and depth (median over seeds), and
    after `train_steps` of training (default 30 quick, 300 full; the first seed's model only; the quick
    version trains only the variants with residuals)."""
    seeds = seeds or (1 if quick else 5)
    train_steps = train_steps or (30 if quick else 300)
    trained = [v for v, (_, residual) in VARIANTS.items() if residual or not quick]
    data = toy_data()
    tok = data.tokenizer
    batch = collate(data.train[:sentences], tok.pad_id, tok.bos_id, tok.eos_id)
    results = {"claim": 5, "quick": quick, "machine": machine(), "sentences": sentences, "seeds": seeds,
               "depths": list(depths), "norms": {}, "loss": {}, "memory_spread": {},
               "after_training": {"steps": train_steps, "norms": {}, "loss": {}, "train_loss": {}, "memory_spread": {}}}
    for depth in depths:
        for variant, (norm_first, residual) in VARIANTS.items():
            models = [build(data, depth, norm_first, residual, seed) for seed in range(seeds)]
            runs = [layer_gradient_norms(model, batch) for model in models]
            key = f"{variant}, {depth} layers"
            results["memory_spread"][key] = max(memory_spread(model, batch) for model in models)
            results["norms"][key] = torch.tensor([r[0] for r in runs]).median(dim=0).values.tolist()
            results["loss"][key] = float(torch.tensor([r[1] for r in runs]).median())
            if variant in trained:
                record_trained(results["after_training"], key, models[0], data, batch, train_steps)
    return results


def record_trained(after: dict, key: str, model: Transformer, data: ToyData, batch, steps: int) -> None:
    """Train `model` for `steps` updates, then store its gradient norm per layer, loss and memory spread
    on `batch` under `key` of `after`."""
    trainer = QuickTrainer(model, data)
    trainer.advance(float("inf"), steps)
    norms, loss = layer_gradient_norms(model, batch)
    after["norms"][key], after["loss"][key] = norms, loss
    after["train_loss"][key] = trainer.report()["last_loss"]
    after["memory_spread"][key] = memory_spread(model, batch)


def spread(norms: list[float]) -> float:
    """Largest over smallest layer gradient norm (how unevenly the layers learn); inf if one is 0."""
    return max(norms) / min(norms) if min(norms) > 0 else float("inf")


def norm_table(norms_by_key: dict, spreads: dict) -> list[str]:
    """One line per variant: first/last encoder and decoder layer norms, max/min, memory spread."""
    lines = [f"{'variant':>34} {'first enc':>10} {'last enc':>10} {'first dec':>10} {'last dec':>10} "
             f"{'max/min':>8} {'memory spread':>13}"]
    for key, norms in norms_by_key.items():
        depth = len(norms) // 2
        picks = (norms[0], norms[depth - 1], norms[depth], norms[-1])
        lines.append(f"{key:>34} " + " ".join(f"{v:>10.2e}" for v in picks) + f" {spread(norms):>8.1f}"
                     f" {spreads[key]:>13.1e}")
    return lines


def summary(results: dict) -> list[str]:
    lines = [f"gradient norm per layer at initialisation (one batch of {results['sentences']} toy sentences):",
             *norm_table(results["norms"], results["memory_spread"])]
    after = results.get("after_training")
    if after:
        lines += [f"the same after {after['steps']} training steps (warm-up 100):",
                  *norm_table(after["norms"], after["memory_spread"])]
    lines.append("memory spread: how different the encoder's output rows are (0 = all words one vector)")
    return lines


COLORS = {"post-norm": "tab:blue", "pre-norm": "tab:orange",
          "post-norm, no residual": "tab:blue", "pre-norm, no residual": "tab:orange"}


def norm_axes(ax, norms_by_key: dict, depth: int, title: str) -> None:
    """One panel: every variant's gradient norm per layer at one depth (the variants measured)."""
    for variant in VARIANTS:
        if f"{variant}, {depth} layers" not in norms_by_key:
            continue
        norms = [max(n, FLOOR) for n in norms_by_key[f"{variant}, {depth} layers"]]
        style = "--" if "no residual" in variant else "-"
        ax.plot(range(1, len(norms) + 1), norms, style, marker="o", ms=3, color=COLORS[variant], label=variant)
    ax.axvline(depth + 0.5, color="gray", lw=0.8)
    ax.text(depth / 2 + 0.5, 1.02, "encoder", transform=ax.get_xaxis_transform(), ha="center")
    ax.text(depth * 1.5 + 0.5, 1.02, "decoder", transform=ax.get_xaxis_transform(), ha="center")
    ax.set_yscale("log")
    ax.set_xlabel("layer (encoder 1..N, then decoder 1..N)")
    ax.set_ylabel("gradient norm of the layer's parameters")
    ax.set_title(f"{depth} + {depth} layers, {title}", pad=16)
    ax.grid(alpha=0.3)
    ax.axhline(FLOOR, color="gray", ls=":", lw=0.8)


def figure(results: dict):
    after = results.get("after_training")
    rows = [(results["norms"], "at initialisation")]
    if after:
        rows.append((after["norms"], f"after {after['steps']} training steps"))
    fig = new_figure(12, 4.5 * len(rows))
    axes = fig.subplots(len(rows), len(results["depths"]), squeeze=False)
    for row, (norms_by_key, title) in zip(axes, rows, strict=True):
        for ax, depth in zip(row, results["depths"], strict=True):
            norm_axes(ax, norms_by_key, depth, title)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"points on the dotted line at {FLOOR:g}: gradient exactly 0 in float32", fontsize=9)
    return fig
