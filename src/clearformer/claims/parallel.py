"""Claim 1: "Transformers process all tokens in parallel, unlike RNNs which go step by step."

Experiment: the time of one training step (forward + backward through the project's loss) against
the sequence length, for the GRU encoder-decoder with attention (model/rnn.py) and our
Transformer at the same width and depth, on random token ids. Next to it, the number of steps
that must run one after another along the sequence: n per GRU layer, one per Transformer layer.
Growth is compared within one run (time at the longest length / time at the shortest), never
against fixed timings.
"""

from __future__ import annotations

import functools

import torch

from clearformer.claims.common import machine, median_seconds, new_figure, thread_count
from clearformer.config import ModelConfig, preset
from clearformer.model.build import build_model
from clearformer.train.loss import label_smoothed_loss

QUICK_LENGTHS = (8, 16, 32, 64, 128, 256, 512)


def build_models(d_model: int, layers: int, vocab: int, max_len: int) -> dict[str, torch.nn.Module]:
    """The two contenders at one width and depth: {"transformer": ..., "gru": ...}."""
    sizes = dict(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, n_encoder_layers=layers,
                 n_decoder_layers=layers, dropout=0.0, max_len=max_len)
    transformer = build_model(preset("toy-translate", n_heads=4, d_ff=2 * d_model, **sizes))
    gru = build_model(ModelConfig(architecture="rnn", **sizes))
    return {"transformer": transformer, "gru": gru}


def training_step(model, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor) -> None:
    """One forward + backward through the project's label-smoothed loss (no optimizer update)."""
    model.zero_grad(set_to_none=True)
    loss, _, labels = label_smoothed_loss(model(src, tgt_in), tgt_out, model.config.pad_id)
    (loss / labels).backward()


def sequential_steps(name: str, layers: int, length: int) -> int:
    """Steps that must run one after another: each GRU layer walks the sequence (the encoder's two
    directions run side by side), each Transformer layer takes all positions at once."""
    return 2 * layers * (length if name == "gru" else 1)


def graph_depth(model, src: torch.Tensor, tgt: torch.Tensor) -> int:
    """Steps that must run one after another, measured rather than counted by hand: the longest chain of
    operations in the autograd graph of one forward pass, from the logits back to the parameters. A step
    can start only when the one before it on this chain has finished, whatever the hardware's width."""
    logits = model(src, tgt)  # on the CPU, nn.GRU runs its cell per position (no fused kernel hides the loop)
    longest: dict = {}
    entered, stack = set(), [logits.grad_fn]
    while stack:  # iterative post-order: a GRU's chain is thousands of nodes deep
        node = stack.pop()
        if node is None or node in longest:
            continue
        if node in entered:
            longest[node] = 1 + max((longest.get(nxt, 0) for nxt, _ in node.next_functions if nxt), default=0)
            continue
        entered.add(node)
        stack.append(node)
        stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None and nxt not in longest)
    return longest[logits.grad_fn]


def time_lengths(models: dict, lengths, batch: int, vocab: int, repeats: int, device: str) -> dict:
    """{name: [seconds per training step at each length]} on random ids (no padding)."""
    generator = torch.Generator().manual_seed(0)
    times: dict[str, list[float]] = {name: [] for name in models}
    for length in lengths:
        src, tgt = (torch.randint(4, vocab, (batch, length), generator=generator).to(device) for _ in range(2))
        for name, model in models.items():
            model.to(device).train()
            step = functools.partial(_synchronised_step, model, src, tgt, device)
            times[name].append(median_seconds(step, repeats))
    return times


def _random_pair(length: int, batch: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(length)
    return tuple(torch.randint(4, vocab, (batch, length), generator=generator) for _ in range(2))


def _synchronised_step(model, src, tgt, device: str) -> None:
    training_step(model, src, tgt, tgt)
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run(quick: bool = True, lengths=None, batch: int = 4, d_model: int = 64, layers: int = 2,
        vocab: int = 200, repeats: int | None = None, device: str = "cpu", threads: int | None = 1) -> dict:
    """Time both models over `lengths`; return the numbers and what they say.

    `threads=1` (the quick default) times on one CPU thread: on a shared machine two threads wait
    for each other at every one of the GRU's small steps and the times stop meaning anything;
    None keeps torch's thread count (the full benchmark, on a quiet machine).
    """
    lengths = list(lengths or QUICK_LENGTHS)
    repeats = repeats or (3 if quick else 7)
    torch.manual_seed(0)
    models = build_models(d_model, layers, vocab, max(lengths))
    with thread_count(threads):
        times = time_lengths(models, lengths, batch, vocab, repeats, device)
    growth = {name: t[-1] / t[0] for name, t in times.items()}
    return {
        "claim": 1, "quick": quick, "device": device, "machine": machine(),
        "setup": dict(batch=batch, d_model=d_model, layers_each_side=layers, vocab=vocab, repeats=repeats,
                      threads=threads or torch.get_num_threads()),
        "parameters": {name: m.num_parameters() for name, m in models.items()},
        "lengths": lengths, "step_seconds": times,
        "sequential_steps": {name: [sequential_steps(name, layers, n) for n in lengths] for name in models},
        "graph_depth": {name: [graph_depth(model, *_random_pair(n, batch, vocab)) for n in lengths]
                        for name, model in models.items()},
        "growth": growth, "length_ratio": lengths[-1] / lengths[0],
        "gru_over_transformer": [g / t for g, t in zip(times["gru"], times["transformer"], strict=True)],
    }


def summary(results: dict) -> list[str]:
    lines = [f"training step (forward + backward), batch {results['setup']['batch']}, "
             f"d_model {results['setup']['d_model']}, on {results['device']}:",
             f"{'length':>7} {'GRU ms':>9} {'Transformer ms':>15} {'GRU/Transformer':>16}"]
    for i, n in enumerate(results["lengths"]):
        gru, ours = results["step_seconds"]["gru"][i], results["step_seconds"]["transformer"][i]
        lines.append(f"{n:>7} {gru * 1e3:>9.2f} {ours * 1e3:>15.2f} {gru / ours:>16.2f}")
    g = results["growth"]
    lines.append(f"length x{results['length_ratio']:.0f}: GRU time x{g['gru']:.1f}, Transformer time "
                 f"x{g['transformer']:.1f} (sequential steps: x{results['length_ratio']:.0f} against x1)")
    return lines


def figure(results: dict):
    fig = new_figure(10, 4)
    left, right = fig.subplots(1, 2)
    colors = {"gru": "tab:red", "transformer": "tab:blue"}
    labels = {"gru": "GRU seq2seq + attention", "transformer": "Transformer"}
    for name, times in results["step_seconds"].items():
        left.plot(results["lengths"], [t * 1e3 for t in times], "o-", color=colors[name], label=labels[name])
        right.plot(results["lengths"], results["sequential_steps"][name], "o-", color=colors[name],
                   label=labels[name])
    for axes in (left, right):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xlabel("sequence length (source = target)")
        axes.legend()
        axes.grid(alpha=0.3)
    left.set_ylabel("ms per training step")
    left.set_title(f"measured step time ({results['device']})")
    right.set_ylabel("steps that run one after another")
    right.set_title("sequential steps along the sequence")
    return fig
