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
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer.claims import common  # noqa: E402
from clearformer.claims.registry import claim  # noqa: E402

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
    lines = [f"### {number}. \"{entry.statement}\"", "", "```", *module.summary(results), "```", ""]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", default="1,2,3,4,5", help="comma-separated claim numbers (default all)")
    parser.add_argument("--minutes", type=float, default=5.0, help="training minutes per model in the contests")
    parser.add_argument("--points", type=int, default=5, help="BLEU measurements along each training run")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "claims"), help="folder for JSON and PNG")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default torch's own; 1 on a machine other jobs share)")
    parser.add_argument("--no-report", action="store_true", help="do not write BENCHMARKS.md")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    numbers = [int(n) for n in args.claims.split(",")]
    with common.thread_count(args.threads):
        sections = [run_claim(n, args.minutes, args.points, out) for n in numbers]
    body = (f"Claims {args.claims}; training contests: {args.minutes:g} minutes per model on the toy phrase set, "
            f"BLEU at {args.points} points (greedy, validation split); torch threads: "
            f"{args.threads or torch.get_num_threads()}. Minutes are wall-clock time under whatever load the "
            f"machine had (compare the steps column); the toy validation split is small, so BLEU is noisy.\n\n"
            + "\n".join(sections))
    if not args.no_report:
        write_section("claims", "The tutorials' claims, measured (full versions)", body)
    print(json.dumps({"written": str(out)}))


if __name__ == "__main__":
    main()
