"""Translation quality after a fixed CPU time budget: en-fr-software, BLEU/chrF, and BLEU against minutes.

The run trains with `clearformer train` in segments of `--every` minutes (each one `--resume`s the
last, which continues exactly, so the segments add up to one uninterrupted run). After each
segment, outside the time budget, the model translates the first `--curve-sentences` validation
sentences greedily for the BLEU-vs-minutes curve; at the end it translates the test split with
beam search (beam 4, length penalty 0.6) and greedily for the final sacrebleu BLEU and chrF,
signatures included, the length ratio overall and by reference length, and the share of sentences
whose placeholders come out exactly (with the placeholder constraint, and beam 4 without it).

    python -m benchmarks.quality --minutes 25                  # the full run
    python -m benchmarks.quality --minutes 2 --every 1 --test-sentences 200   # a smoke test

Writes its BENCHMARKS.md section, the curve as JSON (benchmarks/quality_curve.json) and
benchmarks/quality_bleu_vs_minutes.png (with the MarianMTModel peer's curve, once
`python -m benchmarks.quality_marian` has run).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from benchmarks.report import ROOT, markdown_table, write_section
from clearformer.checkpoint import load_model
from clearformer.evaluate import evaluate_model, score_corpus
from clearformer.generate import translate
from clearformer.generate.beam import DEFAULT_ALPHA
from clearformer.train import TrainOptions, resume_options, train
from clearformer.train.corpus import read_pairs

PLOT = ROOT / "benchmarks" / "quality_bleu_vs_minutes.png"
CURVE = ROOT / "benchmarks" / "quality_curve.json"
PEER_CURVE = ROOT / "benchmarks" / "quality_marian_curve.json"  # written by benchmarks/quality_marian.py


def plot_curves(path: Path = PLOT) -> None:
    """BLEU against training minutes for clearformer and, when its run exists, the MarianMTModel peer."""

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.2))
    for curve, label in ((CURVE, "clearformer"), (PEER_CURVE, "Hugging Face MarianMTModel (same size)")):
        if curve.exists():
            points = json.loads(curve.read_text(encoding="utf-8"))["points"]
            axes.plot([p["minutes"] for p in points], [p["bleu"] for p in points], "o-", label=label)
    axes.set_xlabel("training time (minutes, CPU)")
    axes.set_ylabel("validation BLEU (greedy, sacrebleu)")
    axes.set_title("en-fr-software: BLEU against CPU training minutes")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=25.0, help="training time budget")
    parser.add_argument("--every", type=float, default=2.5, help="minutes between points of the curve")
    parser.add_argument("--preset", default="small")
    parser.add_argument("--data", default="data/en-fr-software")
    parser.add_argument("--out", default="runs/quality", help="run directory (replaced)")
    parser.add_argument("--batch-tokens", type=int, default=2048)
    parser.add_argument("--warmup", type=int, default=400, help="short: a CPU run makes ~1000 steps")
    parser.add_argument("--lr-factor", type=float, default=1.0)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--curve-sentences", type=int, default=300)
    parser.add_argument("--test-sentences", type=int, default=0, help="0 = the whole test split")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=None,
                        help="beam search length penalty (default: translate's default)")
    parser.add_argument("--final-only", action="store_true",
                        help="no training: evaluate the last checkpoint of --out again (the curve comes from "
                             "benchmarks/quality_curve.json) and rewrite the section")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    options = TrainOptions(preset=args.preset, data_dir=args.data, run_dir=str(out),
                           tokenizer="sentencepiece", vocab_size=args.vocab_size,
                           batch_tokens=args.batch_tokens, warmup=args.warmup,
                           lr_factor=args.lr_factor, steps=None, minutes=None, patience=0, eval_every=10**9,
                           save_every=10**9, bleu_sentences=0, keep=2)
    valid = read_pairs((str(Path(args.data) / "valid.tsv"),), skip_bad=True)[: args.curve_sentences]
    test = read_pairs((str(Path(args.data) / "test.tsv"),), skip_bad=True)
    test = test[: args.test_sentences] if args.test_sentences else test
    points, budget, started = [], 0.0, time.monotonic()
    if args.final_only:
        saved = json.loads(CURVE.read_text(encoding="utf-8"))
        points, step = saved["points"], saved["steps"]
        model, tokenizer, _ = load_model(out / "checkpoints" / f"step-{step:08d}")
    else:
        while budget < args.minutes - 1e-9:
            budget = min(args.minutes, budget + args.every)
            if points:
                options = resume_options(out, minutes=budget)
            else:
                options.minutes = budget
            # The first segment replaces an earlier run in --out (train/rundir.py); the others continue it.
            result = train(options, resume=bool(points), progress=False, overwrite=not points)
            model, tokenizer, _ = load_model(out / "checkpoints" / f"step-{result.step:08d}")
            hypotheses = translate(model, tokenizer, [s for s, _ in valid], beam=1, batch_size=64)
            bleu = score_corpus(hypotheses, [t for _, t in valid]).bleu
            points.append({"minutes": budget, "step": result.step, "train_loss": result.train_loss,
                           "valid_loss": result.valid_loss, "bleu": bleu})
            print(f"{budget:g} min: step {result.step}, valid loss {result.valid_loss:.3f}, "
                  f"greedy BLEU {bleu:.2f}", flush=True)
        step = result.step
    alpha = args.alpha if args.alpha is not None else DEFAULT_ALPHA
    finals = {}
    for name, beam, placeholders in ((f"beam {args.beam}", args.beam, True), ("greedy", 1, True),
                                     (f"beam {args.beam}, placeholders free", args.beam, False)):
        finals[name], _ = evaluate_model(model, tokenizer, test, beam=beam, alpha=alpha, batch_size=32,
                                         placeholders=placeholders)
        print(name, finals[name].bleu_line, finals[name].chrf_line, finals[name].summary(), sep="\n", flush=True)
    final = finals[f"beam {args.beam}"]
    wall = (time.monotonic() - started) / 60
    if args.no_write:
        return

    CURVE.write_text(json.dumps({"system": f"clearformer {args.preset}", "points": points, "steps": step,
                                 "test_bleu": final.bleu, "test_chrf": final.chrf,
                                 "test": {name: {"bleu": e.bleu, "chrf": e.chrf, "ratio": e.ratio,
                                                 "buckets": {b.name: [b.sentences, b.ratio] for b in e.buckets},
                                                 "placeholders": [e.placeholders.kept, e.placeholders.total]}
                                          for name, e in finals.items()}}, indent=1) + "\n",
                     encoding="utf-8")
    plot_curves()
    rows = [[f"{p['minutes']:g}", p["step"], f"{p['train_loss']:.3f}", f"{p['valid_loss']:.3f}",
             f"{p['bleu']:.2f}"] for p in points]
    body = (f"`{args.preset}` preset trained for {args.minutes:g} minutes of training time on "
            f"en-fr-software ({args.vocab_size}-piece joint SentencePiece vocabulary with the frequent "
            f"placeholders as single pieces, <eos> after every source, <= {args.batch_tokens} "
            f"padded tokens per batch, warmup {args.warmup}, label smoothing 0.1, dropout as the preset), "
            f"{torch.get_num_threads()} threads; "
            + (f"{wall:.0f} minutes of wall time with the evaluations.\n\n" if not args.final_only else
               "the final evaluation below was rerun on the last checkpoint (`--final-only`).\n\n")
            + f"Final test scores ({len(test)} test sentences; beam search with length penalty alpha {alpha:g}; "
            f"placeholders exact = the decoding constraint of `generate/constraints.py`, on by default):\n\n"
            + "".join(f"**{name}**\n\n- `{e.bleu_line}`\n- `{e.chrf_line}`\n"
                      + "".join(f"- {line}\n" for line in e.summary().splitlines()) + "\n"
                      for name, e in finals.items())
            + "Length ratio by reference length (13a tokens; sentences in brackets):\n\n"
            + markdown_table(["decoding", "overall", *[b.name for b in final.buckets]],
                             [[name, f"{e.ratio:.3f}", *[f"{b.ratio:.2f} ({b.sentences})" for b in e.buckets]]
                              for name, e in finals.items()]) + "\n\n"
            f"BLEU against training minutes (greedy, first {len(valid)} validation sentences; "
            f"plot: `benchmarks/{PLOT.name}`):\n\n"
            + markdown_table(["minutes", "step", "train loss", "valid loss (smoothed)", "valid BLEU"], rows))
    write_section("quality", f"Translation quality after {args.minutes:g} CPU minutes (en-fr-software)", body)


if __name__ == "__main__":
    main()
