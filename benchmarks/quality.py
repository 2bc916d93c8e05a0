"""Translation quality after a fixed CPU time budget: en-fr-software, BLEU/chrF, and BLEU against minutes.

The run trains with `clearformer train` in segments of `--every` minutes (each one `--resume`s the
last, which continues exactly, so the segments add up to one uninterrupted run). After each
segment, outside the time budget, the model translates the first `--curve-sentences` validation
sentences greedily for the BLEU-vs-minutes curve; at the end it translates the test split with
beam search (beam 4) and greedily, with `translate`'s defaults (length penalty alpha 2, brevity
penalty 2, placeholders exact), for the final sacrebleu BLEU and chrF,
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

from benchmarks.length import ensure_length_ratio
from benchmarks.report import ROOT, markdown_table, write_section
from clearformer.evaluate import evaluate_model, score_corpus
from clearformer.generate import DecodingOptions, translate
from clearformer.generate.beam import DEFAULT_ALPHA
from clearformer.generate.brevity import DEFAULT_BREVITY
from clearformer.load import load_decoding_facts, load_model
from clearformer.train import TrainOptions, resume_options, train
from clearformer.train.corpus import read_pairs

PLOT = ROOT / "benchmarks" / "quality_bleu_vs_minutes.png"
CURVE = ROOT / "benchmarks" / "quality_curve.json"
CURVE_IN_RUN = "quality_points.json"  # the curve, kept in the run folder too (also under --no-write)
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


def quality_options(run_dir: Path, preset: str = "small", data: str = "data/en-fr-software", vocab_size: int = 8000,
                    batch_tokens: int = 2048, warmup: int = 400, lr_factor: float = 1.0,
                    arch: str = "transformer") -> TrainOptions:
    """The run's training options (also `benchmarks/claims.py`'s GRU against Transformer on this data):
    no evaluation or checkpoint inside the budget; the curve is measured between segments."""
    return TrainOptions.from_values(preset=preset, data_dir=data, run_dir=str(run_dir), tokenizer="sentencepiece",
                        vocab_size=vocab_size, batch_tokens=batch_tokens, warmup=warmup, lr_factor=lr_factor,
                        arch=arch, steps=None, minutes=None, patience=0, eval_every=10**9, save_every=10**9,
                        bleu_sentences=0, keep=2)


def train_curve(options: TrainOptions, minutes: float, every: float, valid: list[tuple[str, str]]
                ) -> tuple[list[dict], int]:
    """Train `options` (a new run in options.loop.run_dir) for `minutes` of training time, in segments of
    `every` minutes; after each, outside the budget, translate `valid` greedily for the BLEU curve.
    Returns the curve's points and the last step; the points are also kept in the run folder
    (CURVE_IN_RUN), so that `--final-only` finds them."""
    out, points, budget, step = Path(options.loop.run_dir), [], 0.0, 0
    while budget < minutes - 1e-9:
        budget = min(minutes, budget + every)
        if points:
            options = resume_options(out, "translate", minutes=budget)
        else:
            options.loop.minutes = budget
        # The first segment replaces an earlier run in the folder (train/rundir.py); the others continue it.
        result = train(options, resume=bool(points), progress=False, overwrite=not points)
        step_dir = out / "checkpoints" / f"step-{result.step:08d}"
        model, tokenizer, _ = load_model(step_dir)
        hypotheses = translate(model, tokenizer, [s for s, _ in valid], DecodingOptions(batch_size=64),
                               facts=load_decoding_facts(step_dir, tokenizer))
        bleu = score_corpus(hypotheses, [t for _, t in valid]).bleu
        points.append({"minutes": budget, "step": result.step, "train_loss": result.train_loss,
                       "valid_loss": result.valid_loss, "bleu": bleu})
        print(f"{out}: {budget:g} min: step {result.step}, valid loss {result.valid_loss:.3f}, "
              f"greedy BLEU {bleu:.2f}", flush=True)
        step = result.step
        (out / CURVE_IN_RUN).write_text(json.dumps({"points": points, "steps": step}, indent=1) + "\n",
                                        encoding="utf-8")
    return points, step


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
    parser.add_argument("--brevity", type=float, default=None,
                        help=f"brevity penalty weight (default {DEFAULT_BREVITY}: generate/brevity.py)")
    parser.add_argument("--final-only", action="store_true",
                        help="no training: evaluate the last checkpoint of --out again (the curve comes from "
                             f"--out/{CURVE_IN_RUN}) and rewrite the section")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out)
    options = quality_options(out, args.preset, args.data, args.vocab_size, args.batch_tokens, args.warmup,
                              args.lr_factor)
    valid = read_pairs((str(Path(args.data) / "valid.tsv"),), skip_bad=True)[: args.curve_sentences]
    test = read_pairs((str(Path(args.data) / "test.tsv"),), skip_bad=True)
    test = test[: args.test_sentences] if args.test_sentences else test
    points, started = [], time.monotonic()
    run_curve = out / CURVE_IN_RUN
    if args.final_only:
        saved = json.loads((run_curve if run_curve.exists() else CURVE).read_text(encoding="utf-8"))
        points, step = saved["points"], saved["steps"]
        model, tokenizer, _ = load_model(out / "checkpoints" / f"step-{step:08d}")
    else:
        points, step = train_curve(options, args.minutes, args.every, valid)
        model, tokenizer, _ = load_model(out / "checkpoints" / f"step-{step:08d}")
    alpha = args.alpha if args.alpha is not None else DEFAULT_ALPHA
    brevity = args.brevity if args.brevity is not None else DEFAULT_BREVITY
    facts, ratio_line = ensure_length_ratio(out / "checkpoints" / f"step-{step:08d}", tokenizer, args.data)
    finals = {}
    for name, beam, placeholders in ((f"beam {args.beam}", args.beam, True), ("greedy", 1, True),
                                     (f"beam {args.beam}, placeholders free", args.beam, False)):
        decoding = DecodingOptions(beam=beam, alpha=alpha, batch_size=32, brevity=brevity,
                                   placeholders="exact" if placeholders else "free")
        finals[name], _ = evaluate_model(model, tokenizer, test, decoding, facts=facts)
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
            f"brevity penalty weight {brevity:g} on <eos> (`generate/brevity.py`, {ratio_line}); "
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
