"""KV-cache size and decode speed of each attention variant: MHA, GQA, MQA, MLA (naive and absorbed).

1. Bytes per token per layer, read from the real cache tensors after decoding, against DeepSeek-V2's
   formulas (MHA 2 n_h d_h, GQA 2 n_g d_h, MQA 2 d_h, MLA d_c + d_h^R elements).
2. Decode tokens/s at 1k and 4k tokens of context, batch 8: the cache is filled to the context
   length (random values: speed does not depend on them), then `--steps` tokens are decoded one
   at a time through the model with its cache (`model(ids, cache, position)`), as `lm generate` does.

Model: d_model=512, 8 heads (d_h = 64), d_ff=2048, `--layers` layers, vocabulary 4000; MLA with the
paper's proportions d_c = 4 d_h = 256, d_h^R = d_h / 2 = 32; GQA with 2 key/value heads.

    python benchmarks/kv_cache.py                  # CPU (writes its section of BENCHMARKS.md)
    python benchmarks/kv_cache.py --device cuda
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer.config import (
    preset,  # noqa: E402
    variant_overrides,  # noqa: E402
)
from clearformer.model.cache import kv_cache_bytes_per_token, measured_bytes_per_token  # noqa: E402
from clearformer.model.lm import LanguageModel  # noqa: E402

VARIANTS = [("MHA", "mha", None), ("GQA (2 kv heads)", "gqa", None), ("MQA", "mqa", None),
            ("MLA naive", "mla", False), ("MLA absorbed", "mla", True)]
FORMULAS = {"mha": "2 n_h d_h", "gqa": "2 n_g d_h", "mqa": "2 d_h", "mla": "d_c + d_h^R"}


def build(variant: str, layers: int, max_len: int, device) -> LanguageModel:
    torch.manual_seed(0)
    config = preset("lm-base", tgt_vocab_size=4000, n_decoder_layers=layers, max_len=max_len,
                    **variant_overrides(variant, 512, 8, kv_heads=2))
    return LanguageModel(config).to(device).eval()


@torch.inference_mode()
def measured_bytes(model: LanguageModel, device) -> float:
    """Decode 16 tokens for a batch of 2 and read the per-token bytes off the cache tensors."""
    cache = model.new_cache()
    ids = torch.randint(4, 4000, (2, 16), device=device)
    model(ids[:, :4], cache, 0)
    for t in range(4, 16):
        model(ids[:, t:t + 1], cache, t)
    per_layer = measured_bytes_per_token(cache, 2, 16)
    assert len(set(per_layer)) == 1
    return per_layer[0]


@torch.inference_mode()
def filled_cache(model: LanguageModel, batch: int, context: int, device):
    """A cache holding `context` tokens: one real step gives each tensor's shape, then it is widened."""
    cache = model.new_cache()
    model(torch.randint(4, 4000, (batch, 1), device=device), cache, 0)
    for layer in cache:
        entries = layer.self_attention
        for field in dataclasses.fields(entries):
            tensor = getattr(entries, field.name)
            shape = list(tensor.shape)
            shape[-2] = context  # every cache tensor has time second-to-last (model/cache.py)
            setattr(entries, field.name, torch.randn(shape, device=device, dtype=tensor.dtype))
    return cache


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


@torch.inference_mode()
def decode_speed(model: LanguageModel, batch: int, context: int, steps: int, device) -> float:
    cache = filled_cache(model, batch, context, device)
    token = torch.randint(4, 4000, (batch, 1), device=device)
    for warm in range(2):
        model(token, cache, context + warm)
    sync(device)
    start = time.perf_counter()
    for step in range(steps):
        model(token, cache, context + 2 + step)
    sync(device)
    return batch * steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--contexts", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--steps", type=int, default=16, help="decode steps timed per measurement")
    parser.add_argument("--threads", type=int, help="torch threads on CPU")
    parser.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md alone")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    max_len = max(args.contexts) + args.steps + 8
    rows_bytes, rows_speed = [], []
    mha_bytes = None
    for label, variant, absorb in VARIANTS:
        model = build(variant, args.layers, max_len, args.device)
        model.set_mla_path(absorb)
        info = kv_cache_bytes_per_token(model.config)
        if absorb is not False:  # the naive and absorbed paths share one cache
            measured = measured_bytes(model, args.device)
            assert measured == info["bytes_per_layer"], (label, measured, info)
            mha_bytes = mha_bytes or measured
            elements = info["elements_per_layer"]
            rows_bytes.append([label.replace(" absorbed", ""), FORMULAS[variant], f"{elements} = "
                               f"{elements / 64:g} d_h", f"{measured:,.0f}", f"{measured * args.layers:,.0f}",
                               f"{100 * measured / mha_bytes:.1f}%"])
        speeds = [decode_speed(model, args.batch, context, args.steps, args.device)
                  for context in args.contexts]
        rows_speed.append([label] + [f"{speed:,.1f}" for speed in speeds])
        print(label, rows_speed[-1][1:], flush=True)
        del model
    table_bytes = markdown_table(["variant", "formula (elements/token/layer)", "elements",
                                  "bytes/token/layer (measured, fp32)", f"bytes/token ({args.layers} layers)",
                                  "of MHA"], rows_bytes)
    table_speed = markdown_table(["variant"] + [f"tokens/s at {c:,} context" for c in args.contexts],
                                 rows_speed)
    where = "GPU" if torch.device(args.device).type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    body = (f"Model: d_model=512, 8 heads (d_h=64), {args.layers} layers, fp32; GQA n_g=2; "
            f"MLA d_c=4 d_h=256, d_h^R=d_h/2=32, no query compression. Bytes are read from the real cache "
            f"tensors after decoding "
            f"and asserted equal to the formulas.\n\n{table_bytes}\n\n"
            f"Decode speed ({where}): batch {args.batch}, cache filled to the context, then {args.steps} "
            f"single-token steps timed (after 2 warm-up steps) through the model with its cache "
            f"(`model/cache.py`); every cache grows by torch.cat.\n\n{table_speed}")
    if torch.device(args.device).type == "cuda":
        body += ("\n\nAt this model size a decode step on the GPU is bound by kernel launches (about 2 ms "
                 "per step whatever the variant), not by reading the cache, so these rows do not show the "
                 "cache sizes; the CPU section does.")
    print(body)
    if not args.no_write:
        kind = torch.device(args.device).type
        name = "kv-cache" if kind == "cpu" else f"kv-cache-{kind}"
        write_section(name, f"KV cache per attention variant ({where.split(',')[0]})", body)


if __name__ == "__main__":
    main()
