"""Validation loss of the attention variants after the same CPU training budget on the LM corpus.

Every variant (MHA, GQA, MQA, MLA) is trained from the same seed for the same number of steps,
batch and window on the en-web corpus (World English Bible) with one shared SentencePiece
vocabulary, then evaluated on the same validation windows. The table gives the validation loss,
its difference from MHA, the KV-cache bytes per token, and the training tokens/s and MFU (against
this machine's measured fp32 matmul peak) from the training log.

    python benchmarks/lm_variants.py --steps 500                          # one variant after another
    python benchmarks/lm_variants.py --steps 500 --jobs 4 --threads 4     # four processes at once
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer.config import (  # noqa: E402
    VARIANTS,
    preset,  # noqa: E402
    variant_overrides,
)
from clearformer.data import lm as lm_data  # noqa: E402
from clearformer.model.cache import kv_cache_bytes_per_token  # noqa: E402
from clearformer.model.lm import LanguageModel  # noqa: E402
from clearformer.tokenize import load_tokenizer  # noqa: E402
from clearformer.train import (
    mfu,  # noqa: E402
    train,  # noqa: E402
)
from clearformer.train.lm import LMOptions  # noqa: E402


def train_variant(variant: str, args, tokenizer_dir: Path, log_path: Path) -> dict:
    """Train one variant; returns its numbers (and writes its training log to `log_path`)."""
    if args.threads:
        torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(tokenizer_dir)
    train_lines, valid_lines = lm_data.load_corpus(Path(args.corpus))
    streams = lm_data.build_streams(tokenizer, train_lines, valid_lines)
    base = preset(args.preset, tgt_vocab_size=len(tokenizer))
    config = preset(args.preset, tgt_vocab_size=len(tokenizer),
                    **variant_overrides(variant, base.d_model, base.n_heads))
    torch.manual_seed(args.seed)
    model = LanguageModel(config)
    run_dir = Path(tempfile.mkdtemp(prefix=f"lm-{variant}-"))
    options = LMOptions.from_values(preset=args.preset, corpus=args.corpus, steps=args.steps, batch_size=args.batch,
                        block_size=args.block, lr=args.lr, eval_every=args.steps, save_every=args.steps,
                        eval_batches=args.eval_batches, log_every=args.log_every, seed=args.seed,
                        minutes=args.minutes or None, run_dir=str(run_dir))
    started = time.perf_counter()
    # The one trainer (clearformer.train.loop); its metrics.csv is the training log.
    result = train(options, progress=False, fresh=lambda: (tokenizer, model, train_lines, valid_lines))
    log_path.write_text((run_dir / "metrics.csv").read_text(encoding="utf-8"), encoding="utf-8")
    cache = kv_cache_bytes_per_token(config)
    return {"variant": variant, "steps": result.step, "parameters": model.num_parameters(),
            "val_loss": result.valid_loss, "train_loss": result.train_loss,
            "tokens_per_second": result.tokens_per_second, "mfu": result.mfu,
            "minutes": (time.perf_counter() - started) / 60, "cache_bytes": cache["bytes_total"],
            "cache_fraction": cache["fraction_of_mha"], "train_tokens": len(streams.train),
            "peak": mfu.matmul_peak(refresh=False)}


def report(results: list[dict], args) -> str:
    by_variant = {r["variant"]: r for r in results}
    mha = by_variant["mha"]
    rows = []
    for r in results:
        delta = 100 * (r["val_loss"] - mha["val_loss"]) / mha["val_loss"]
        cache = f"{r['cache_bytes']:,} ({100 * r['cache_fraction']:.1f}%)"
        rows.append([r["variant"].upper(), r["steps"], f"{r['parameters']:,}", cache,
                     f"{r['val_loss']:.4f}", f"{delta:+.2f}%", f"{r['train_loss']:.4f}",
                     f"{r['tokens_per_second']:,.0f}", f"{100 * r['mfu']:.1f}%", f"{r['minutes']:.1f}"])
    table = markdown_table(["variant", "steps", "parameters", "KV cache bytes/token (of MHA)", "val loss",
                            "vs MHA", "train loss (last window)", "train tokens/s (mean)", "MFU (mean)",
                            "minutes"], rows)
    tokens = args.steps * args.batch * args.block
    text = (f"Preset {args.preset} ({mha['parameters']:,} parameters with MHA), SentencePiece vocabulary "
            f"{args.vocab}, corpus {args.corpus} ({mha['train_tokens']:,} training tokens). "
            f"Budget per variant: "
            f"{args.steps} steps x {args.batch} x {args.block} tokens = {tokens:,} tokens "
            f"({tokens / mha['train_tokens']:.1f} epochs), AdamW lr {args.lr} with warmup and cosine decay, "
            f"seed {args.seed}, {args.threads or torch.get_num_threads()} CPU threads per variant"
            f"{f', {args.jobs} variants trained at once' if args.jobs > 1 else ''}. Validation loss: mean "
            f"next-token cross-entropy (nats/token) over the same {args.eval_batches * args.batch} "
            f"windows of "
            f"the validation chapters. MFU = tokens/s x model FLOPs per token / measured fp32 matmul peak "
            f"({mha['peak'] / 1e9:.0f} GFLOP/s at this thread count).\n\n{table}")
    if "mla" in by_variant:
        mla = by_variant["mla"]
        gap = 100 * (mla["val_loss"] - mha["val_loss"]) / mha["val_loss"]
        ok = gap <= 3 and mla["cache_fraction"] <= 0.30
        text += (f"\n\nMLA vs MHA: validation loss {gap:+.2f}% while caching "
                 f"{100 * mla['cache_fraction']:.1f}% "
                 f"of MHA's bytes — target (within 3%, at most 30%): {'met' if ok else 'NOT met'}.")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help="corpus directory or file (default data/en-web, built if missing)")
    parser.add_argument("--preset", default="lm-small")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--eval-batches", type=int, default=20)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, default=0.0, help="cap on each variant's training time")
    parser.add_argument("--threads", type=int, help="torch threads per variant")
    parser.add_argument("--jobs", type=int, default=1, help="variants trained at the same time (processes)")
    parser.add_argument("--logs", help="folder for each variant's training log (default: a temporary one)")
    parser.add_argument("--only", help=argparse.SUPPRESS)  # internal: train one variant, print JSON
    parser.add_argument("--tokenizer-dir", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md alone")
    args = parser.parse_args()
    args.corpus = str(args.corpus or lm_data.default_corpus())
    logs = Path(args.logs or tempfile.mkdtemp(prefix="lm-variants-"))
    logs.mkdir(parents=True, exist_ok=True)
    if args.only:
        result = train_variant(args.only, args, Path(args.tokenizer_dir), logs / f"{args.only}.log")
        print("RESULT " + json.dumps(result), flush=True)
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    # Measured here, alone: the training processes measure again side by side (slower), and the
    # stored peak keeps the best of all.
    mfu.matmul_peak()
    tokenizer_dir = logs / "tokenizer"
    train_lines, _ = lm_data.load_corpus(Path(args.corpus))
    tokenizer_dir.mkdir(exist_ok=True)
    lm_data.train_tokenizer(train_lines, args.vocab).save(tokenizer_dir)
    results = []
    if args.jobs <= 1:
        results = [train_variant(v, args, tokenizer_dir, logs / f"{v}.log") for v in args.variants]
    else:
        forwarded = [a for a in sys.argv[1:] if a not in ("--no-write",)]
        pending = list(args.variants)
        running: list[tuple[subprocess.Popen, Path]] = []
        while pending or running:
            while pending and len(running) < args.jobs:
                variant = pending.pop(0)
                command = [sys.executable, __file__, *forwarded, "--only", variant,
                           "--tokenizer-dir", str(tokenizer_dir), "--logs", str(logs),
                           "--corpus", args.corpus]
                output = logs / f"{variant}.out"
                with open(output, "w", encoding="utf-8") as stream:
                    child = subprocess.Popen(command, stdout=stream, stderr=subprocess.STDOUT)
                running.append((child, output))
            process, output = running.pop(0)
            if process.wait():
                raise SystemExit(f"a variant failed (exit {process.returncode}); see {output}")
            lines = output.read_text(encoding="utf-8").splitlines()
            results += [json.loads(line[7:]) for line in lines if line.startswith("RESULT ")]
        results.sort(key=lambda r: list(VARIANTS).index(r["variant"]))
    body = report(results, args)
    print(body)
    (logs / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    if not args.no_write:
        write_section("lm-variants", "Language model: attention variants after the same CPU training budget",
                      body)


if __name__ == "__main__":
    main()
