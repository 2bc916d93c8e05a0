"""`clearformer lm explain`: what a language model computes for one text, read from the recorder.

For "The dog ran" it shows, as the seed's 6x6 "life is short eat dessert first" example does:
the causal mask, each head's scaled scores (future cells -inf) and attention weights, and the
distribution over the next token. For MLA layers it adds the latent c_KV, the decoupled RoPE key,
the up-projected keys and values, and what the cache keeps per token. Every number comes from
the same forward pass the model uses to generate (a `Recorder` around `model(ids)`).
"""

from __future__ import annotations

import math

import torch

from clearformer.config import attention_variant
from clearformer.model.cache import kv_cache_bytes_per_token
from clearformer.trace import Recorder


def token_labels(tokenizer, ids: list[int]) -> list[str]:
    """A short printable label per id (the subword piece or word)."""
    labels = []
    for index in ids:
        if hasattr(tokenizer, "id_to_token"):
            label = tokenizer.id_to_token(index)
        else:
            label = tokenizer.decode([index]) or f"#{index}"
        labels.append(label.replace("\u2581", "_") if label else f"#{index}")
    return labels


def format_number(x: float, decimals: int) -> str:
    if math.isinf(x):
        return "-∞" if x < 0 else "∞"
    return f"{x:.{decimals}f}"


def format_matrix(values: torch.Tensor, rows: list[str], cols: list[str], decimals: int = 2,
                  max_cols: int = 12) -> str:
    """A labelled text table of a 2-D tensor; columns beyond `max_cols` are cut with a note."""
    values = values.double()
    shown = min(values.shape[1], max_cols)
    cells = [[format_number(float(v), decimals) for v in row[:shown]] for row in values]
    heads = [c[:10] for c in cols[:shown]]
    width = max([len(h) for h in heads] + [len(c) for row in cells for c in row] + [1])
    label_width = max(len(r[:12]) for r in rows)
    lines = [" " * label_width + "  " + " ".join(h.rjust(width) for h in heads)
             + (f"  … +{values.shape[1] - shown} columns" if values.shape[1] > shown else "")]
    for label, row in zip(rows, cells, strict=True):
        lines.append(label[:12].ljust(label_width) + "  " + " ".join(c.rjust(width) for c in row))
    return "\n".join(lines)


def record_forward(model, ids: list[int]) -> tuple[Recorder, torch.Tensor]:
    """Run the model once over `ids` with a recorder: (records, logits (seq, vocab))."""
    model.eval()
    device = next(model.parameters()).device
    with torch.no_grad(), Recorder() as recorder:
        logits = model(torch.tensor([ids], device=device))
    return recorder, logits[0]


def explain_data(model, tokenizer, ids: list[int], top: int = 10) -> dict:
    """Everything the explain view shows, as plain data (also the --format json output)."""
    recorder, logits = record_forward(model, ids)
    labels = token_labels(tokenizer, ids)
    config = model.config
    layers = []
    for index in range(config.n_decoder_layers):
        prefix = f"decoder.layers.{index}.self_attention"
        layer = {"layer": index, "scaled": recorder.get(f"{prefix}.scaled")[0],
                 "weights": recorder.get(f"{prefix}.weights")[0]}
        if config.attention == "mla":
            layer["latent"] = recorder.get(f"{prefix}.latent")[0]
            layer["K_nope"] = recorder.get(f"{prefix}.K_nope")[0]
            layer["V"] = recorder.get(f"{prefix}.V")[0]
            if config.qk_rope_head_dim:
                layer["K_rope"] = recorder.get(f"{prefix}.K_rope")[0]
        layers.append(layer)
    mask = recorder.get("decoder.layers.0.self_attention.mask")[0]
    probs = torch.softmax(logits[-1].double(), dim=-1)
    values, indices = torch.topk(probs, min(top, probs.shape[0]))
    return {
        "tokens": labels, "ids": ids, "variant": attention_variant(config), "mask": mask, "layers": layers,
        "next_token": [{"token": token_labels(tokenizer, [int(i)])[0], "id": int(i), "probability": float(p)}
                       for p, i in zip(values, indices, strict=True)],
        "cache": kv_cache_bytes_per_token(config),
    }


def full_walkthrough(model, tokenizer, ids: list[int], layer: int | None, head: int | None,
                     decimals: int, top: int) -> str:
    """Every recorded step of the forward pass (embeddings to probabilities), through the same
    walkthrough renderer as `clearformer explain`."""
    from clearformer.explain.render import render as render_walkthrough
    from clearformer.explain.walkthrough import build_walkthrough

    recorder, _ = record_forward(model, ids)
    labels = token_labels(tokenizer, ids)
    vocab = token_labels(tokenizer, list(range(len(tokenizer))))
    walk = build_walkthrough(recorder.records, f"language model on {labels}", labels, labels, vocab, top=top)
    return render_walkthrough(walk, decimals, layer, head)


def jsonable(data):
    """`explain_data` as JSON-ready lists and dicts (tensors become nested lists; -inf becomes null)."""
    if isinstance(data, torch.Tensor):
        values = data.double() if data.is_floating_point() or data.dtype == torch.bool else data
        return _finite(values.tolist())
    if isinstance(data, dict):
        return {key: jsonable(value) for key, value in data.items()}
    if isinstance(data, list):
        return [jsonable(value) for value in data]
    return data


def _finite(value):
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return None if isinstance(value, float) and math.isinf(value) else value


def render(data: dict, layer: int | None = 0, head: int | None = None, decimals: int = 2) -> str:
    """The explain view as text."""
    tokens = data["tokens"]
    out = [f"tokens: {tokens}   (ids {data['ids']}; the text starts after <eos>, as lines did in training)",
           "", "Causal mask (row = query token, column = key token; 1 = may attend, 0 = future, set to -∞):",
           format_matrix(data["mask"].long(), tokens, tokens, 0)]
    chosen = data["layers"] if layer is None else [data["layers"][layer]]
    for entry in chosen:
        heads = range(entry["weights"].shape[0]) if head is None else [head]
        out.append(f"\n=== layer {entry['layer']} self-attention ({data['variant'].upper()}) ===")
        if "latent" in entry:
            out += _render_mla(entry, tokens, head if head is not None else 0, decimals)
        for h in heads:
            out.append(f"\nhead {h}: scaled scores QKᵀ/√d with the mask applied (-∞ = blocked)")
            masked = entry["scaled"][h].masked_fill(~data["mask"], float("-inf"))
            out.append(format_matrix(masked, tokens, tokens, decimals))
            out.append(f"head {h}: attention weights = softmax(row) (each row sums to 1, future = 0)")
            out.append(format_matrix(entry["weights"][h], tokens, tokens, decimals))
    out.append(f"\nNext-token distribution after {tokens[-1]!r} (top {len(data['next_token'])}):")
    for item in data["next_token"]:
        bar = "█" * max(1, round(40 * item["probability"])) if item["probability"] >= 0.0125 else ""
        out.append(f"  {item['token'][:16]:<16} {item['probability']:8.4f}  {bar}")
    cache = data["cache"]
    out.append(f"\nKV cache per token: {cache['bytes_total']:,} bytes over {cache['layers']} layers "
               f"({cache['elements_per_layer']} numbers per layer; "
               f"{100 * cache['fraction_of_mha']:.0f}% of MHA's)")
    return "\n".join(out)


def _render_mla(entry: dict, tokens: list[str], head: int, decimals: int) -> list[str]:
    latent = entry["latent"]
    lines = [f"\nlatent c_KV = RMSNorm(W^DKV x): {tuple(latent.shape)} — the only per-token vector cached "
             "besides the RoPE key", format_matrix(latent, tokens, [f"c{j}" for j in range(latent.shape[1])],
                                                   decimals, 8)]
    if "K_rope" in entry:
        rope = entry["K_rope"]
        lines += [f"\nRoPE key k^R = RoPE(W^KR x): {tuple(rope.shape)}, shared by every head",
                  format_matrix(rope, tokens, [f"r{j}" for j in range(rope.shape[1])], decimals, 8)]
    k_nope, v = entry["K_nope"][head], entry["V"][head]
    lines += [f"\nhead {head} keys up-projected from the latent, k^C = W^UK c_KV: {tuple(k_nope.shape)}",
              format_matrix(k_nope, tokens, [f"k{j}" for j in range(k_nope.shape[1])], decimals, 8),
              f"\nhead {head} values up-projected from the latent, v^C = W^UV c_KV: {tuple(v.shape)}",
              format_matrix(v, tokens, [f"v{j}" for j in range(v.shape[1])], decimals, 8)]
    return lines
