"""`clearformer evaluate`: BLEU and chrF of a checkpoint on a corpus split, with sacrebleu's signatures.

    clearformer evaluate --checkpoint runs/small --split test --beam 4

Prints the two scores in sacrebleu's own format (signature = score) and writes the hypotheses,
one per line in corpus order, to --output (default: hypotheses.SPLIT.txt in the checkpoint).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from clearformer.commands import engine as engine_options
from clearformer.commands.options import check_not_input
from clearformer.commands.translate import add_decoding_options, check_output_path, load_translator, write_output
from clearformer.errors import UserError
from clearformer.evaluate import evaluate_translator, load_pairs, split_file
from clearformer.generate import DecodingOptions


def run(args) -> int:
    choices = engine_options.engine_choices(args, DecodingOptions.from_args(args))  # every refusal before any work
    if len(choices) > 1 and args.output:
        raise UserError("--output applies to one engine; with --engine all the hypotheses go to "
                        "CHECKPOINT/hypotheses.SPLIT.ENGINE.txt")
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be at least 1, not {args.limit}")
    check_output_path(args.output)
    if args.output and args.data:  # the corpus is never replaced by the hypotheses
        check_not_input(Path(args.output), split_file(args.split, args.data, {}), "--data")
    run_folder = load_translator(args.checkpoint, args.device)
    pairs, name = load_pairs(args.split, args.data, run_folder.meta)
    if args.limit:
        pairs = pairs[: args.limit]
    if len(choices) > 1:
        return report_engines(args, choices, run_folder, pairs, name)
    choice = choices[0]
    translator = choice.open(run_folder, "evaluate")
    with engine_options.progress_bar(len(pairs), f"translating {args.split}") as bar:
        result, truncated = evaluate_translator(translator, pairs, choice.decoding, bar)
    if truncated:
        print(f"clearformer evaluate: warning: {truncated} source sentence(s) longer than the model's "
              f"maximum length ({run_folder.model.config.max_len} tokens) were cut to it", file=sys.stderr)
    output = Path(args.output) if args.output else run_folder.directory / f"hypotheses.{args.split}.txt"
    write_output(output, "".join(line + "\n" for line in result.hypotheses))
    print(f"{name}: {len(pairs)} sentences, {choice.decoding.describe()}{translator.described}")
    print(result.bleu_line)
    print(result.chrf_line)
    print(result.summary())
    print(f"hypotheses: {output}")
    return 0


def report_engines(args, choices, run_folder, pairs, name) -> int:
    """`--engine all`: BLEU, chrF, length ratio and placeholders of each engine, one line each."""
    rows, described = [], []
    for index, choice in enumerate(choices):  # the first, clearformer's own, writes the plain file name
        translator = choice.open(run_folder, "evaluate")
        start = time.perf_counter()
        result, _ = evaluate_translator(translator, pairs, choice.decoding)
        rows.append((translator.label, result, time.perf_counter() - start))
        described.append(f"{translator.label}: {choice.decoding.describe()}")
        suffix = "." + translator.label.replace(" ", "-") if index else ""
        write_output(run_folder.directory / f"hypotheses.{args.split}{suffix}.txt",
                     "".join(line + "\n" for line in result.hypotheses))
    print(f"{name}: {len(pairs)} sentences; {'; '.join(described)}")
    print(engine_options.comparison_table(rows))
    print(f"hypotheses: {run_folder.directory}/hypotheses.{args.split}[.ENGINE].txt")
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
