"""`clearformer evaluate`: BLEU and chrF of a checkpoint on a corpus split, with sacrebleu's signatures.

    clearformer evaluate --checkpoint runs/small --split test --beam 4

Prints the two scores in sacrebleu's own format (signature = score) and writes the hypotheses,
one per line in corpus order, to --output (default: hypotheses.SPLIT.txt in the checkpoint).
"""

from __future__ import annotations

import sys
from pathlib import Path

from clearformer.commands import engine as engine_options
from clearformer.commands import options
from clearformer.commands.translate import (
    add_decoding_options,
    check_not_input,
    check_output_path,
    load_translator,
    write_output,
)
from clearformer.errors import UserError
from clearformer.evaluate import evaluate_model, load_pairs, split_file
from clearformer.generate import DecodingOptions


def run(args) -> int:
    decoding = DecodingOptions.from_args(args)
    engine_options.check_engine_arguments(args)
    if args.engine != "pytorch":
        engine_options.engine_decoding(args, decoding)  # a choice CTranslate2 cannot honour, before any work
    if args.engine == "ctranslate2":
        decoding = engine_options.engine_decoding(args, decoding)
    if args.engine == "all" and args.output:
        raise UserError("--output applies to one engine; with --engine all the hypotheses go to "
                        "CHECKPOINT/hypotheses.SPLIT.ENGINE.txt")
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1, not {args.limit}")
    options.apply_threads(args.threads)
    check_output_path(args.output)
    if args.output and args.data:  # the corpus is never replaced by the hypotheses
        check_not_input(Path(args.output), split_file(args.split, args.data, {}), "--data")
    model, tokenizer, meta, directory = load_translator(args.checkpoint, args.device)
    pairs, name = load_pairs(args.split, args.data, meta)
    if args.limit:
        pairs = pairs[: args.limit]

    from tqdm import tqdm

    def run_pytorch(progress=None):
        return evaluate_model(model, tokenizer, pairs, decoding, progress=progress)

    if args.engine == "all":
        return report_engines(args, decoding, model, tokenizer, directory, pairs, name, run_pytorch)
    engine = None
    if args.engine == "ctranslate2":
        engine = engine_options.open_engine(args, model, tokenizer, directory, "evaluate")
    with tqdm(total=len(pairs), unit="sentence", desc=f"translating {args.split}", file=sys.stderr,
              disable=None, leave=False) as bar:
        if engine is not None:
            result, truncated = engine_options.evaluate_engine(engine, model, tokenizer, pairs, decoding, bar.update)
        else:
            result, truncated = run_pytorch(bar.update)
    if truncated:
        print(f"clearformer evaluate: warning: {truncated} source sentence(s) longer than the model's "
              f"maximum length ({model.config.max_len} tokens) were cut to it", file=sys.stderr)
    output = Path(args.output) if args.output else directory / f"hypotheses.{args.split}.txt"
    write_output(output, "".join(line + "\n" for line in result.hypotheses))
    described = decoding.describe()
    if args.engine == "ctranslate2":
        described += f", engine ctranslate2 ({engine_settings_name(args.quantize)})"
    print(f"{name}: {len(pairs)} sentences, {described}")
    print(result.bleu_line)
    print(result.chrf_line)
    print(result.summary())
    print(f"hypotheses: {output}")
    return 0


def engine_settings_name(quantize: str) -> str:
    return "float32" if quantize == "none" else quantize


def report_engines(args, decoding, model, tokenizer, directory, pairs, name, run_pytorch) -> int:
    """`--engine all`: BLEU, chrF, length ratio and placeholders of each engine, one line each."""
    rows = engine_options.compare_engines(args, decoding, model, tokenizer, directory, pairs, run_pytorch)
    for engine, result, _ in rows:
        suffix = "" if engine == "pytorch" else "." + engine.replace(" ", "-")
        write_output(directory / f"hypotheses.{args.split}{suffix}.txt",
                     "".join(line + "\n" for line in result.hypotheses))
    search = "greedy" if decoding.beam == 1 else f"beam {decoding.beam}, alpha {decoding.alpha}"
    print(f"{name}: {len(pairs)} sentences, {search}, placeholders {decoding.placeholders} "
          f"(pytorch: brevity {decoding.brevity}, early stop {decoding.stop}; ctranslate2: "
          f"{engine_options.engine_decoding(args, decoding).describe()})")
    print(engine_options.comparison_table(rows))
    print(f"hypotheses: {directory}/hypotheses.{args.split}[.ENGINE].txt")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("evaluate",
                                   help="BLEU and chrF (sacrebleu) of a checkpoint on a corpus split",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="test", help="train, valid or test (default test)")
    parser.add_argument("--data", metavar="PATH",
                        help="a source<TAB>target .tsv file, or a folder with SPLIT.tsv "
                             "(default: the checkpoint's corpus, else data/en-fr-software)")
    parser.add_argument("--output", metavar="PATH",
                        help="where to write the hypotheses (default: CHECKPOINT/hypotheses.SPLIT.txt)")
    parser.add_argument("--limit", type=int, metavar="N", help="evaluate only the first N pairs")
    add_decoding_options(parser)
    engine_options.add_engine_arguments(parser, allow_all=True)
    parser.set_defaults(func=run)
