"""Why translations come out short: the length ablation of issue 13 (en-fr-software).

Trains one model per training variant for the same minutes from the same seed, and translates
the test split with several decoding settings. For each (variant, decoding) it reports BLEU,
the length ratio (hypothesis / reference tokens, sacrebleu's 13a) overall and by reference
length (0-4, 5-9, ..., 30+ tokens), and the share of sentences whose placeholders came out
exactly.

Training variants (everything else as `benchmarks/quality.py`: `small`, 8000-piece joint
SentencePiece vocabulary, <= 2048 padded tokens per batch, warmup 400):

    landed              sources without an end marker, placeholders split like any text
    source-eos          <eos> appended to every source (the tokenizer's source_eos), as Marian/fairseq
    source-eos+pieces   and the frequent placeholders kept as single pieces (--placeholder-pieces)

Decodings: greedy; beam 4 with the GNMT length penalty at alpha 0.6 and 1.0 (early stop
"current"), and at alpha 0.6 with the exact "bound" stopping rule; for the pieces variant also
with the placeholder constraint off (`--placeholders free`).

    python -m benchmarks.length --minutes 18 --parallel     # the recorded run
    python -m benchmarks.length --minutes 1 --test-sentences 100 --no-write   # a smoke test
    python -m benchmarks.length --checkpoint runs/quality --alphas 0.6 1 1.5 2   # decoding only, one model
    python -m benchmarks.length --checkpoint runs/quality --split valid --alphas 2 --brevities 0 1 2 3 4 8 \\
        --forms quadratic log        # the brevity penalty's weight and form, tuned on valid

`--parallel` trains the variants at the same time, one process and one thread each, so that
every variant gets the same share of a shared machine; without it they train one after another
with all threads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from benchmarks.report import ROOT, markdown_table, write_section

VARIANTS = {
    "landed": {"source_eos": False, "placeholder_pieces": False},
    "source-eos": {"source_eos": True, "placeholder_pieces": False},
    "source-eos+pieces": {"source_eos": True, "placeholder_pieces": True},
}
DECODINGS = {  # name -> (beam, alpha, stop, placeholders)
    "greedy": (1, 0.6, "current", True),
    "beam 4, alpha 0.6": (4, 0.6, "current", True),
    "beam 4, alpha 1.0": (4, 1.0, "current", True),
    "beam 4, alpha 0.6, bound": (4, 0.6, "bound", True),
    "beam 4, alpha 0.6, placeholders free": (4, 0.6, "current", False),
}
RESULTS = ROOT / "benchmarks" / "length_results.json"


def train_variant(name: str, args) -> dict:
    """Train one variant into OUT/name (replaced); returns what the trainer reported."""
    from clearformer.train import TrainOptions, train

    settings = VARIANTS[name]
    options = TrainOptions.from_values(preset="small", data_dir=args.data, run_dir=str(Path(args.out) / name),
                           tokenizer="sentencepiece", vocab_size=8000, batch_tokens=2048, warmup=400,
                           placeholder_pieces=settings["placeholder_pieces"],
                           source_eos=settings["source_eos"], seed=args.seed,
                           steps=None, minutes=args.minutes, patience=0, eval_every=10**9, save_every=10**9,
                           bleu_sentences=0, keep=1)
    result = train(options, resume=False, progress=False, overwrite=True)
    return {"step": result.step, "train_loss": result.train_loss, "valid_loss": result.valid_loss}


def evaluate_variant(name: str, args, test) -> list[dict]:
    from clearformer.evaluate import evaluate_model
    from clearformer.generate import DecodingOptions
    from clearformer.load import load_model

    model, tokenizer, _ = load_model(Path(args.out) / name)
    rows = []
    for decoding, (beam, alpha, stop, placeholders) in DECODINGS.items():
        if not placeholders and not VARIANTS[name]["placeholder_pieces"]:
            continue  # without placeholder pieces there is nothing to constrain
        started = time.monotonic()
        decoding = DecodingOptions(beam=beam, alpha=alpha, stop=stop, batch_size=32,
                                   placeholders="exact" if placeholders else "free")
        result, _ = evaluate_model(model, tokenizer, test, decoding)
        rows.append({"variant": name, "decoding": decoding, "bleu": result.bleu, "chrf": result.chrf,
                     "ratio": result.ratio, "bleu_line": result.bleu_line,
                     "buckets": {b.name: [b.sentences, b.ratio] for b in result.buckets},
                     "placeholders": [result.placeholders.kept, result.placeholders.total],
                     "seconds": time.monotonic() - started})
        print(f"{name:18} {decoding:38} BLEU {result.bleu:5.2f} ratio {result.ratio:.3f} "
              f"placeholders {100 * result.placeholders.share:.1f}%", flush=True)
    return rows


def log_bonus(t: int, expected: torch.Tensor, weight: float) -> torch.Tensor:
    """The brevity penalty's first form, BLEU's: w * min(0, log(t / expected)) (kept here to compare)."""
    if t == 0:
        return torch.full_like(expected, float("-inf"))
    return weight * torch.log(t / expected).clamp(max=0.0)


@contextlib.contextmanager
def brevity_form(form: str):
    """Decode with the brevity penalty's "quadratic" (the project's) or "log" form."""
    from clearformer.generate import brevity

    kept = brevity.eos_bonus
    brevity.eos_bonus = log_bonus if form == "log" else kept
    try:
        yield
    finally:
        brevity.eos_bonus = kept


def ensure_length_ratio(run: str | Path, tokenizer, data_dir: str | Path):
    """(the run's decoding facts, a line saying where its length ratio came from): a model trained before the
    length ratio was measured gets it measured now (a new record; the run folder is not changed), by the same
    function `clearformer train` uses, on its training split."""
    from dataclasses import replace

    from clearformer.load import load_decoding_facts
    from clearformer.train.corpus import encode_pairs, length_ratio, read_pairs

    facts = load_decoding_facts(run, tokenizer)
    if facts.length_ratio > 0:
        return facts, f"length ratio {facts.length_ratio:.4f} (measured by train)"
    train_pairs = read_pairs((str(Path(data_dir) / "train.tsv"),), skip_bad=True)
    facts = replace(facts, length_ratio=length_ratio(encode_pairs(tokenizer, train_pairs), tokenizer.source_eos))
    return facts, f"length ratio {facts.length_ratio:.4f} (measured now on {data_dir}/train.tsv)"


def decoding_ablation(args, pairs) -> None:
    """Greedy and beam 4 at several length penalties and brevity weights for one trained model
    (`--checkpoint`), on `--split`."""
    from clearformer.evaluate import evaluate_model
    from clearformer.generate import DecodingOptions
    from clearformer.load import load_model

    model, tokenizer, meta = load_model(args.checkpoint)
    facts, ratio_line = ensure_length_ratio(args.checkpoint, tokenizer, args.data)
    print(ratio_line, flush=True)
    table = []
    weights = [(form, w) for form in args.forms for w in args.brevities if w > 0]
    weights = [("—", 0.0)] * (0.0 in args.brevities) + weights
    settings = [(1, 0.0, *w) for w in weights] + [(4, a, *w) for a in args.alphas for w in weights]
    for beam, alpha, form, weight in settings:
        started = time.monotonic()
        with brevity_form(form):
            result, _ = evaluate_model(model, tokenizer, pairs,
                                       DecodingOptions(beam=beam, alpha=alpha, batch_size=32, brevity=weight),
                                       facts=facts)
        name = "greedy" if beam == 1 else f"beam 4, alpha {alpha:g}"
        kept, total = result.placeholders.kept, result.placeholders.total
        table.append([name, form, f"{weight:g}", f"{result.bleu:.2f}", f"{result.chrf:.2f}", f"{result.ratio:.3f}",
                      *[f"{b.ratio:.2f}" if b.sentences else "—" for b in result.buckets],
                      f"{100 * kept / max(total, 1):.1f}%", f"{time.monotonic() - started:.0f}"])
        print(" | ".join(table[-1]), flush=True)
    if args.no_write:
        return
    buckets = [f"{b.name} ({b.sentences})" for b in result.buckets]
    body = (f"Checkpoint `{args.checkpoint}` (step {meta.get('step', '?')}); the {len(pairs)} sentences of the "
            f"{args.split} split of en-fr-software; {torch.get_num_threads()} threads; {ratio_line}. Beam search "
            "with the GNMT length penalty ((5 + n) / 6)^alpha, early stop \"current\", placeholders exact; "
            "penalty on <eos> after `length` tokens, e = ratio x source length: quadratic = "
            "-w * max(0, e - length)^2 / e (`generate/brevity.py`, the default), log = w * min(0, log(length / e)) "
            "(BLEU's and Sockeye's form, tried first), weight 0 = off. "
            "Length ratio = hypothesis / reference tokens (13a), overall and "
            "by reference length (sentences in brackets).\n\n"
            f"Command: `python -m benchmarks.length --checkpoint {args.checkpoint} --split {args.split} "
            f"--alphas {' '.join(f'{a:g}' for a in args.alphas)} "
            f"--brevities {' '.join(f'{w:g}' for w in args.brevities)} --forms {' '.join(args.forms)}`\n\n"
            + markdown_table(["decoding", "penalty form", "weight", "BLEU", "chrF", "ratio", *buckets, "placeholders",
                              "seconds"], table))
    write_section("length_decoding" if args.split == "test" else "length_decoding_valid",
                  f"Translation length: length penalty and brevity penalty on one trained model ({args.split})", body)


def report(args, trained: dict, rows: list[dict], test_count: int, wall: float) -> None:
    buckets = list(rows[0]["buckets"])
    table = []
    for row in rows:
        by_bucket = [f"{ratio:.2f}" if count else "—" for count, ratio in row["buckets"].values()]
        kept, total = row["placeholders"]
        table.append([row["variant"], row["decoding"], f"{row['bleu']:.2f}", f"{row['chrf']:.2f}",
                      f"{row['ratio']:.3f}", *by_bucket, f"{100 * kept / max(total, 1):.1f}% ({kept}/{total})"])
    counts = ", ".join(f"{name} {count}" for name, (count, _) in rows[0]["buckets"].items())
    steps = ", ".join(f"{name} {info['step']} steps (valid loss {info['valid_loss']:.3f})"
                      for name, info in trained.items())
    how = ("all variants at once, one process and one thread each" if args.parallel
           else f"one after another, {torch.get_num_threads()} threads")
    body = (f"`small` preset, {args.minutes:g} minutes of training each ({how}), seed {args.seed}, on "
            f"en-fr-software; {test_count} test sentences (by reference length: {counts}); "
            f"{wall:.0f} minutes of wall time. Trained: {steps}.\n\n"
            "Length ratio = hypothesis / reference tokens (sacrebleu 13a), overall and by reference length; "
            "placeholders = share of the test sentences with a placeholder in the source whose translation "
            "holds exactly the source's placeholders (`clearformer.tokenize.placeholders`).\n\n"
            + markdown_table(["variant", "decoding", "BLEU", "chrF", "ratio", *buckets, "placeholders"], table))
    write_section("length", "Translation length: the ablation", body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=18.0, help="training minutes per variant")
    parser.add_argument("--data", default="data/en-fr-software")
    parser.add_argument("--out", default="runs/length", help="run directories (replaced)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--test-sentences", type=int, default=0, help="0 = the whole test split")
    parser.add_argument("--parallel", action="store_true", help="train the variants at once, 1 thread each")
    parser.add_argument("--checkpoint", help="decoding only: evaluate this trained model at --alphas")
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.6, 1.0, 1.5, 2.0])
    parser.add_argument("--brevities", type=float, nargs="+", default=[0.0],
                        help="brevity penalty weights to try (generate/brevity.py)")
    parser.add_argument("--forms", nargs="+", choices=("quadratic", "log"), default=["quadratic"],
                        help="brevity penalty forms to try (log: the first form, compared)")
    parser.add_argument("--split", choices=("valid", "test"), default="test",
                        help="decoding only: the split to translate (tune on valid, report test)")
    parser.add_argument("--train-one", help=argparse.SUPPRESS)  # a worker of --parallel
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.train_one:
        torch.set_num_threads(1)
        info = train_variant(args.train_one, args)
        (Path(args.out) / f"{args.train_one}.json").write_text(json.dumps(info), encoding="utf-8")
        return
    from clearformer.train.corpus import read_pairs

    if args.checkpoint:
        pairs = read_pairs((str(Path(args.data) / f"{args.split}.tsv"),), skip_bad=True)
        decoding_ablation(args, pairs[: args.test_sentences] if args.test_sentences else pairs)
        return
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        sys.exit(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    started = time.monotonic()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if args.parallel:
        workers = [subprocess.Popen([sys.executable, "-m", "benchmarks.length", "--train-one", name,
                                     "--minutes", str(args.minutes), "--data", args.data, "--out", args.out,
                                     "--seed", str(args.seed)]) for name in names]
        if any(w.wait() != 0 for w in workers):
            sys.exit("a training worker failed")
        trained = {n: json.loads((Path(args.out) / f"{n}.json").read_text(encoding="utf-8")) for n in names}
    else:
        trained = {n: train_variant(n, args) for n in names}
    test = read_pairs((str(Path(args.data) / "test.tsv"),), skip_bad=True)
    test = test[: args.test_sentences] if args.test_sentences else test
    rows = [row for name in names for row in evaluate_variant(name, args, test)]
    if args.no_write:
        return
    RESULTS.write_text(json.dumps({"trained": trained, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    report(args, trained, rows, len(test), (time.monotonic() - started) / 60)


if __name__ == "__main__":
    main()
