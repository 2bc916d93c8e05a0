"""The full versions of `clearformer claims`: longer runs, and validation BLEU at equal CPU budgets.

For each claim: its experiment at full size (`run(quick=False)`: more repeats, seeds and torch's
own thread count) and, where the claim is about what a model learns, the competing models trained
for the same wall-clock minutes on the built-in toy phrase set with validation BLEU measured along
the way (greedy decoding, sacrebleu):

  1. GRU encoder-decoder vs Transformer (same width and depth)
  2. (in claims/scaling.py's own full run: toy-translate and small trained with and without
     1/sqrt(d_k) for a fixed number of steps; claim 5's full run also retrains its eight variants)
  3. positions: none / sinusoidal / learned / RoPE
  4. 1 head of width 64 vs 4 heads of width 16 (the same parameter count)
  5. 12 + 12 layers post-norm vs pre-norm, each with the schedule's warm-up and without one (warm-up 1)

Training uses the claims' continuable loop (clearformer/claims/common.py: the project's loss,
schedule, batching and optimizer; no checkpoints), not `clearformer train`, so that BLEU can be
read at several points of one run. Results: JSON and PNG per claim in --out, a section of
BENCHMARKS.md.

    python -m benchmarks.claims --minutes 5 --points 5          # every claim
    python -m benchmarks.claims --claims 1,3 --minutes 2

Claim 1(b) on real data (its own section): the GRU baseline and the Transformer trained by
`clearformer train` (`--arch rnn` / `--arch transformer`) on en-fr-software with the same
SentencePiece vocabulary, batches, seed and budget as `benchmarks/quality.py`, validation BLEU
every `--every` minutes and test BLEU at the end:

    python -m benchmarks.claims --en-fr 25                               # trains both, 2 x 25 minutes
    python -m benchmarks.claims --en-fr 25 --reuse-transformer runs/quality   # the GRU only; the
        # Transformer's curve is that of a `benchmarks.quality` run of the same settings and minutes
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer.claims import common  # noqa: E402
from clearformer.claims.registry import claim  # noqa: E402
from clearformer.store.atomic import atomic_write_text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def training_contest(builders: dict, minutes: float, points: int, seed: int = 1) -> dict:
    """{name: bleu_curve(...)} for models built by `builders[name](data)`, each for `minutes`."""
    data = common.toy_data()
    curves = {}
    for name, (build, options) in builders.items():
        torch.manual_seed(seed)
        model = build(data)
        curves[name] = {"parameters": model.num_parameters(), **common.bleu_curve(model, data, minutes, points,
                                                                                  seed=seed, **options)}
        print(f"  {name}: BLEU {curves[name]['bleu']} after {curves[name]['steps']} steps", flush=True)
    return curves


def contest_builders(number: int) -> dict:
    """The models each claim trains against each other: {name: (build(data), trainer options)}."""
    t = common.toy_transformer
    if number == 1:
        return {"transformer": (t, {}), "gru": (common.toy_rnn, {})}
    if number == 3:
        return {kind: (lambda data, kind=kind: t(data, positional=kind), {})
                for kind in ("none", "sinusoidal", "learned", "rope")}
    if number == 4:
        return {"1 head x 64": (lambda data: t(data, n_heads=1), {}),
                "4 heads x 16": (lambda data: t(data, n_heads=4), {})}
    if number == 5:
        deep = dict(n_encoder_layers=12, n_decoder_layers=12)
        return {f"{norm}, warm-up {warmup}": (lambda data, first=first: t(data, norm_first=first, **deep),
                                              {"warmup": warmup})
                for norm, first in (("post-norm", False), ("pre-norm", True)) for warmup in (400, 1)}
    return {}


def curve_figure(curves: dict, title: str):
    fig = common.new_figure(6, 4)
    axes = fig.subplots()
    for name, curve in curves.items():
        axes.plot(curve["minutes"], curve["bleu"], "o-", label=f"{name} ({curve['parameters']:,} parameters)")
    axes.set_xlabel("training minutes (wall clock, this machine)")
    axes.set_ylabel("validation BLEU (greedy)")
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return fig


def run_claim(number: int, minutes: float, points: int, out: Path) -> str:
    """Run claim `number` in full, write its files, return its markdown."""
    entry = claim(number)
    module = entry.load()
    print(f"claim {number}: {entry.statement}", flush=True)
    results = module.run(quick=False)
    if number == 1 and torch.cuda.is_available():  # the same timings on the lent GPU
        results["cuda"] = module.run(quick=False, device="cuda", threads=None)
    builders = contest_builders(number)
    if builders:
        results["training_contest"] = training_contest(builders, minutes, points)
    results["command"] = "python -m benchmarks.claims " + " ".join(sys.argv[1:])
    json_path, png_path = common.result_paths(out, number, entry.slug, quick=False)
    common.write_result(json_path, png_path, results, module.figure(results))
    lines = [f"#### {number}. \"{entry.statement}\"", "", "```", *module.summary(results), "```", ""]
    if builders:
        contest = results["training_contest"]
        curve_png = png_path.with_name(png_path.stem + "-bleu.png")
        common.write_result(curve_png.with_suffix(".json"), curve_png, contest,
                            curve_figure(contest, f"claim {number}: equal training time"))
        rows = [[name, f"{c['parameters']:,}", c["steps"][-1], f"{c['minutes'][-1]:.1f}",
                 " / ".join(f"{b:.1f}" for b in c["bleu"])] for name, c in contest.items()]
        headers = ["model", "parameters", "steps", "minutes", "validation BLEU along training"]
        lines += [markdown_table(headers, rows),
                  "", f"Figures: `{os.path.relpath(png_path, ROOT)}`, `{os.path.relpath(curve_png, ROOT)}`", ""]
    return "\n".join(lines)


EN_FR_SAME = ("preset", "data_dir", "tokenizer", "vocab_size", "placeholder_pieces", "batch_tokens", "accum",
              "lr_factor", "warmup", "label_smoothing", "seed", "tie")  # what must match to reuse a run


def en_fr_contest(minutes: float, every: float, runs: Path, reuse: Path | None) -> dict:
    """GRU against Transformer on en-fr-software at the same CPU budget: {arch: curve and test scores}."""
    from benchmarks.length import ensure_length_ratio
    from benchmarks.quality import CURVE_IN_RUN, quality_options, train_curve
    from clearformer.evaluate import evaluate_model
    from clearformer.generate import DecodingOptions
    from clearformer.load import load_model
    from clearformer.train.corpus import read_pairs
    from clearformer.train.options import TrainOptions

    data = "data/en-fr-software"
    valid = read_pairs((f"{data}/valid.tsv",), skip_bad=True)[:300]
    test = read_pairs((f"{data}/test.tsv",), skip_bad=True)
    results = {}
    for arch in ("transformer", "rnn"):
        options = quality_options(runs / arch, data=data, arch=arch)
        if arch == "transformer" and reuse is not None:
            run = reuse
            recorded = json.loads((run / "meta.json").read_text(encoding="utf-8"))["options"]
            used = TrainOptions.from_dict(recorded).values()
            differ = [k for k in EN_FR_SAME if used.get(k) != options.values()[k]]
            saved = json.loads((run / CURVE_IN_RUN).read_text(encoding="utf-8"))
            points, step = saved["points"], saved["steps"]
            if differ or used.get("arch") != "transformer" or abs(points[-1]["minutes"] - minutes) > 1e-6:
                sys.exit(f"--reuse-transformer {run}: not the same settings and minutes ({differ or 'minutes'})")
        else:
            run = Path(options.loop.run_dir)
            points, step = train_curve(options, minutes, every, valid)
        step_dir = run / "checkpoints" / f"step-{step:08d}"
        model, tokenizer, meta = load_model(step_dir)
        facts, _ = ensure_length_ratio(step_dir, tokenizer, data)  # a reused run from before the ratio was measured
        scores, _ = evaluate_model(model, tokenizer, test, DecodingOptions(batch_size=64), facts=facts)
        results[arch] = {"parameters": sum(p.numel() for p in model.parameters()), "run": str(run),
                         "reused": arch == "transformer" and reuse is not None,
                         "minutes": [p["minutes"] for p in points], "steps": [p["step"] for p in points],
                         "bleu": [p["bleu"] for p in points], "valid_loss": [p["valid_loss"] for p in points],
                         "test_bleu": scores.bleu, "test_chrf": scores.chrf, "test_ratio": scores.ratio,
                         "test_bleu_line": scores.bleu_line}
        print(f"  {arch}: step {step}, valid BLEU {points[-1]['bleu']:.2f}, test BLEU {scores.bleu:.2f}", flush=True)
    return results


def en_fr_section(results: dict, minutes: float, out: Path) -> str:
    """Write claim 1(b)'s JSON and figure; return its BENCHMARKS.md text."""
    png = out / "claim1-parallel-en-fr-bleu.png"
    names = {"transformer": "Transformer (small)", "rnn": "GRU + attention (small)"}
    curves = {names[arch]: curve for arch, curve in results.items()}
    common.write_result(png.with_suffix(".json"), png, results,
                        curve_figure(curves, f"claim 1: en-fr-software, {minutes:g} CPU minutes each"))
    rows = [[names[arch], f"{c['parameters']:,}", c["steps"][-1], f"{c['steps'][-1] / (60 * minutes):.2f}",
             " / ".join(f"{b:.1f}" for b in c["bleu"]), f"{c['valid_loss'][-1]:.3f}", f"{c['test_bleu']:.2f}",
             f"{c['test_chrf']:.2f}", f"{c['test_ratio']:.3f}"] for arch, c in results.items()]
    reused = [names[a] for a, c in results.items() if c["reused"]]
    return ("The claim's part (b): both models trained by `clearformer train` (`--arch transformer` / `--arch rnn`, "
            f"the `small` preset's width and depth) on en-fr-software for {minutes:g} minutes of training time each "
            "with the settings of `benchmarks/quality.py` (the same 8000-piece SentencePiece vocabulary, <= 2048 "
            "padded tokens per batch, seed, warmup 400, label smoothing 0.1); validation BLEU on the first 300 "
            "validation sentences between segments (greedy), test BLEU on the whole test split at the end (greedy, "
            "brevity penalty and placeholder constraint as `translate`'s defaults)"
            + (f"; the {', '.join(reused)} curve is the `benchmarks.quality` run of this session with the same "
               "settings (checked against its meta.json)" if reused else "") + ".\n\n"
            + markdown_table(["model", "parameters", "steps", "steps/s", "validation BLEU along training",
                              "validation loss (end)", "test BLEU", "test chrF", "length ratio"], rows)
            + f"\n\nFigure: `{os.path.relpath(png, ROOT)}`")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", default="1,2,3,4,5", help="comma-separated claim numbers (default all)")
    parser.add_argument("--minutes", type=float, default=5.0, help="training minutes per model in the contests")
    parser.add_argument("--points", type=int, default=5, help="BLEU measurements along each training run")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "claims"), help="folder for JSON and PNG")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default torch's own; 1 on a machine other jobs share)")
    parser.add_argument("--no-report", action="store_true", help="do not write BENCHMARKS.md")
    parser.add_argument("--en-fr", type=float, metavar="MINUTES",
                        help="only claim 1(b) on en-fr-software: GRU against Transformer, MINUTES each")
    parser.add_argument("--every", type=float, default=2.5, help="--en-fr: minutes between BLEU points")
    parser.add_argument("--runs", default="runs/claims-en-fr", help="--en-fr: run folders (replaced)")
    parser.add_argument("--reuse-transformer", help="--en-fr: take the Transformer from this benchmarks.quality run")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if args.en_fr:
        with common.thread_count(args.threads):
            results = en_fr_contest(args.en_fr, args.every, Path(args.runs),
                                    Path(args.reuse_transformer) if args.reuse_transformer else None)
        body = (f"Command: `python -m benchmarks.claims {' '.join(sys.argv[1:])}`; torch threads "
                f"{args.threads or torch.get_num_threads()}.\n\n" + en_fr_section(results, args.en_fr, out))
        if not args.no_report:
            write_section("claims_en_fr", "Claim 1(b): GRU against Transformer on en-fr-software, equal CPU minutes",
                          body)
        return
    numbers = [int(n) for n in args.claims.split(",")]
    with common.thread_count(args.threads):
        sections = [run_claim(n, args.minutes, args.points, out) for n in numbers]
    if args.no_report:
        print(json.dumps({"written": str(out)}))
        return
    # Each claim keeps its own text (claimN.md in --out), so a run of some claims leaves the others' results.
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for number, text in zip(numbers, sections, strict=True):
        run_line = (f"_Run {when}: `python -m benchmarks.claims {' '.join(sys.argv[1:])}`; training contests "
                    f"{args.minutes:g} minutes per model on the toy phrase set, BLEU at {args.points} points; "
                    f"torch threads {args.threads or torch.get_num_threads()}._")
        heading, rest = text.split("\n", 1)
        atomic_write_text(out / f"claim{number}.md", f"{heading}\n\n{run_line}\n{rest}")
    parts = [(out / f"claim{n}.md").read_text(encoding="utf-8") for n in range(1, 6) if (out / f"claim{n}.md").exists()]
    body = ("Training contests run on the toy phrase set; minutes are wall-clock time under whatever load the "
            "machine had (compare the steps column); the toy validation split is small, so BLEU is noisy. Each "
            "claim says when and by which command it last ran.\n\n" + "\n".join(parts))
    write_section("claims", "The tutorials' claims, measured (full versions)", body)
    print(json.dumps({"written": str(out)}))


if __name__ == "__main__":
    main()
