"""The `clearformer info` report of a model or a config: its one-line summary, its parameters by part and
the decoding cache's bytes per token (by formula, model/cache.py)."""

from __future__ import annotations

from torch import nn

from clearformer.config import ModelConfig
from clearformer.model.cache import describe_kv_cache, kv_cache_bytes_per_token


def summary(config: ModelConfig) -> str:
    """One line of the sizes and switches of a config (`clearformer info`)."""
    c = config
    if c.architecture == "rnn":
        return (f"GRU encoder-decoder with attention (--arch rnn): d_model={c.d_model}, GRU layers="
                f"{c.n_encoder_layers}+{c.n_decoder_layers}, dropout={c.dropout}, vocab={c.tgt_vocab_size}, "
                f"tied embeddings={c.tie_embeddings}")
    return (f"d_model={c.d_model}, heads={c.n_heads}, layers={c.n_encoder_layers}+"
            f"{c.n_decoder_layers}, d_ff={c.d_ff}, dropout={c.dropout}, vocab={c.tgt_vocab_size}, "
            f"tied embeddings={c.tie_embeddings}, positions={c.positional}, "
            f"{'pre' if c.norm_first else 'post'}-norm")


def kv_cache_bytes(config: ModelConfig) -> dict | None:
    """The decoder self-attention cache's bytes per token (`kv_cache_bytes_per_token`); None for the GRU,
    whose decoder carries one state vector per layer, not a cache that grows per token."""
    return None if config.architecture == "rnn" else kv_cache_bytes_per_token(config)


def parameter_breakdown(model: nn.Module) -> dict[str, int]:
    """Parameters per top-level part (embeddings, encoder, decoder, output), tied tensors counted once."""
    seen: set[int] = set()
    parts: dict[str, int] = {}
    for name, parameter in model.named_parameters():
        if id(parameter) in seen:
            continue
        seen.add(id(parameter))
        part = name.split(".")[0]
        parts[part] = parts.get(part, 0) + parameter.numel()
    return parts


def describe(model: nn.Module, name: str, tokenizer=None, facts=None) -> dict:
    """The config, parameter counts and cache size of a model (`clearformer info --format json`); with a
    checkpoint's tokenizer, its kind, size and facts (source_eos, mask_placeholders: tokenize/facts.py), and with
    its decoding facts (generate/facts.py: decoding.json) theirs."""
    config = model.config
    info = {"name": name, "config": config.to_dict(), "parameters": model.num_parameters(),
            "parameters_by_part": parameter_breakdown(model)}
    if tokenizer is not None:
        info["tokenizer"] = {"kind": tokenizer.kind, "vocab_size": len(tokenizer), **tokenizer.facts()}
    if facts is not None:
        info["decoding"] = facts.to_dict()
    cache = kv_cache_bytes(config)
    if cache is not None:
        info["kv_cache_bytes_per_token"] = cache
    return info


def info_lines(info: dict, config: ModelConfig) -> list[str]:
    """`describe`'s report of a model of `config`, as `clearformer info` prints it."""
    lines = [f"{info['name']}: {summary(config)}"]
    lines += [f"  {part:<12} {count:>14,}" for part, count in info["parameters_by_part"].items()]
    total = info["parameters"]
    lines.append(f"  {'total':<12} {total:>14,}  ({total / 1e6:.1f}M parameters)")
    if "tokenizer" in info:
        t = info["tokenizer"]
        lines.append(f"  tokenizer: {t['kind']}, {t['vocab_size']:,} tokens, sources end in <eos>: "
                     f"{'yes' if t['source_eos'] else 'no'}, "
                     f"placeholders masked: {'yes' if t.get('mask_placeholders') else 'no'}")
    if "decoding" in info:
        d = info["decoding"]
        lines.append(f"  decoding: length ratio {d['length_ratio'] or 'not measured'}, length limit "
                     f"{str(d['max_length_factor']) + ' x source' if d['max_length_factor'] else 'source + 50'}, "
                     f"shortlist {'yes' if d['shortlist'] else 'none'}")
    if "kv_cache_bytes_per_token" in info:
        lines.append(f"  KV cache (decoder self-attention): {describe_kv_cache(info['kv_cache_bytes_per_token'])}")
    return lines
