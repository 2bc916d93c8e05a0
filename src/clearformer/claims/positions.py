"""Claim 3: "Without position information, the model can't distinguish word order."

Experiment: one freshly initialised encoder-decoder Transformer per kind of position ("none",
"sinusoidal", "learned", "rope"; the same seed, so the same weights elsewhere) reads
"dog bites man" and "man bites dog". Measured:
  * the encoder outputs: is the output for "man bites dog" the output for "dog bites man" with its
    rows permuted (max |difference| after the permutation)? Self-attention and the feed-forward
    network treat positions alike, so without positions it must be, up to float rounding;
  * the decoder's next-token probabilities after the same target prefix: cross-attention sums
    over the memory's rows, which ignores their order, so without positions the two sources give
    the same translation, word for word.
The full version also trains the toy model with each kind at the same budget and reports
validation BLEU (benchmarks/claims.py, through the real trainer).
"""

from __future__ import annotations

import torch

from clearformer.claims.common import machine, new_figure
from clearformer.config import preset
from clearformer.model.build import build_model
from clearformer.model.transformer import Transformer

KINDS = ("none", "sinusoidal", "learned", "rope")
VOCAB = ("<pad>", "<unk>", "<bos>", "<eos>", "dog", "bites", "man", "le", "chien", "mord", "l'", "homme")
FIRST, SECOND = "dog bites man", "man bites dog"
PREFIX = "le chien mord"  # the decoder's input after <bos>: the same for both sources


def ids(sentence: str) -> list[int]:
    return [VOCAB.index(word) for word in sentence.split()]


def order_of(first: str, second: str) -> list[int]:
    """perm with second.split()[i] == first.split()[perm[i]] (both sentences use each word once)."""
    words = first.split()
    return [words.index(word) for word in second.split()]


def build(kind: str, seed: int, d_model: int = 64) -> Transformer:
    """A toy-translate sized model with `kind` positions, seeded so that only the positions differ."""
    torch.manual_seed(seed)
    config = preset("toy-translate", d_model=d_model, src_vocab_size=len(VOCAB), tgt_vocab_size=len(VOCAB),
                    positional=kind)
    return build_model(config).eval()


@torch.no_grad()
def compare(model: Transformer, first: str = FIRST, second: str = SECOND) -> dict:
    """How far apart the model keeps the two word orders (encoder rows permuted; next-token probabilities)."""
    sources = torch.tensor([ids(first), ids(second)])
    memory, src_mask = model.encode(sources)
    permuted = memory[0, order_of(first, second)]
    prefix = torch.tensor([[VOCAB.index("<bos>")] + ids(PREFIX)] * 2)
    probabilities = torch.softmax(model.project(model.decode(prefix, memory, src_mask)), dim=-1)
    return {
        "encoder_permutation_gap": (memory[1] - permuted).abs().max().item(),
        "encoder_scale": memory.abs().max().item(),
        "decoder_probability_gap": (probabilities[0] - probabilities[1]).abs().max().item(),
    }


def run(quick: bool = True, seeds: int | None = None, d_model: int = 64) -> dict:
    """compare() for every kind of position over a few seeds (the largest gap over seeds is kept)."""
    seeds = seeds or (3 if quick else 10)
    gaps = {kind: [compare(build(kind, seed, d_model)) for seed in range(seeds)] for kind in KINDS}
    results = {"claim": 3, "quick": quick, "machine": machine(), "sentences": [FIRST, SECOND],
               "target_prefix": PREFIX, "seeds": seeds, "d_model": d_model,
               "float_eps": torch.finfo(torch.float32).eps}
    for kind, rows in gaps.items():
        results[kind] = {key: max(row[key] for row in rows) for key in rows[0]}
        results[kind]["min_encoder_permutation_gap"] = min(row["encoder_permutation_gap"] for row in rows)
        results[kind]["min_decoder_probability_gap"] = min(row["decoder_probability_gap"] for row in rows)
    return results


def summary(results: dict) -> list[str]:
    lines = [f"'{FIRST}' vs '{SECOND}', fresh toy-translate models, {results['seeds']} seeds:",
             f"{'positions':>11} {'encoder rows, permuted: max |diff|':>36} {'next-token p: max |diff|':>26}"]
    for kind in KINDS:
        r = results[kind]
        lines.append(f"{kind:>11} {r['min_encoder_permutation_gap']:>16.2e} .. {r['encoder_permutation_gap']:<16.2e}"
                     f" {r['min_decoder_probability_gap']:>11.2e} .. {r['decoder_probability_gap']:<11.2e}")
    tolerance = 1e-5
    none = results["none"]
    blind = none["encoder_permutation_gap"] < tolerance and none["decoder_probability_gap"] < tolerance
    seeing = [k for k in KINDS[1:] if results[k]["min_decoder_probability_gap"] > tolerance]
    verdict = "a permutation, same next-token probabilities" if blind else "NOT a permutation"
    lines.append(f"without positions: {verdict} (tolerance {tolerance:g}); "
                 f"orders told apart by: {', '.join(seeing) or 'none'}")
    return lines


def figure(results: dict):
    fig = new_figure(10, 4)
    left, right = fig.subplots(1, 2)
    keys = (("encoder_permutation_gap", "min_encoder_permutation_gap", left,
             "encoder output rows, after permuting: max |diff|"),
            ("decoder_probability_gap", "min_decoder_probability_gap", right,
             "next-token probabilities: max |diff|"))
    floor = 1e-12  # a gap of exactly 0 still shows on the log axis
    for high, low, axes, title in keys:
        tops = [max(results[k][high], floor) for k in KINDS]
        bottoms = [max(results[k][low], floor) for k in KINDS]
        colors = ["tab:red" if k == "none" else "tab:blue" for k in KINDS]
        axes.bar(KINDS, tops, color=colors, alpha=0.8, label="largest over seeds")
        axes.scatter(KINDS, bottoms, color="black", zorder=3, label="smallest over seeds")
        axes.axhline(results["float_eps"], color="gray", ls=":", label="float32 epsilon")
        axes.set_yscale("log")
        axes.set_title(title, fontsize=10)
        axes.legend(fontsize=7)
    fig.suptitle(f"'{FIRST}' vs '{SECOND}' (fresh models)")
    return fig
