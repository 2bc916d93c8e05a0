"""`--engine` and `--quantize` of `clearformer translate` and `clearformer evaluate`.

    clearformer translate --engine ctranslate2 "I love you"
    clearformer translate --engine ctranslate2 --quantize int8 --beam 4 --file in.txt
    clearformer evaluate --engine ctranslate2 --quantize int8 --beam 4
    clearformer evaluate --engine all --beam 4      # pytorch, ctranslate2 float32 and int8 side by side

`pytorch` (the default) is clearformer's own decoder; `ctranslate2` exports the run once into
RUN/ctranslate2 (RUN/ctranslate2-int8 with `--quantize int8`) and decodes with CTranslate2
(`interop/ct2_engine.py` says what it shares with the PyTorch path and what it cannot do).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from clearformer.errors import UserError
from clearformer.evaluate import score_corpus
from clearformer.generate.options import DecodingOptions
from clearformer.generate.source import Pieces, prepare_sources
from clearformer.generate.translate import encode_sources, join_pieces, per_input_progress
from clearformer.interop.ct2_engine import (
    EngineSettings,
    check_options,
    export_folder,
    load_engine,
    with_engine_defaults,
)

ENGINES = ("pytorch", "ctranslate2")


def add_engine_arguments(parser, allow_all: bool = False) -> None:
    choices = ENGINES + (("all",) if allow_all else ())
    also = "; 'all': each of pytorch, ctranslate2 and ctranslate2 int8, side by side" if allow_all else ""
    parser.add_argument("--engine", choices=choices, default="pytorch",
                        help="who decodes: 'pytorch' (default, clearformer's own decoder) or 'ctranslate2' (the "
                             "run exported once into RUN/ctranslate2; alpha 0 and no brevity penalty, placeholders "
                             f"kept by choosing among the n best){also}")
    parser.add_argument("--quantize", choices=("none", "int8"), default="none",
                        help="--engine ctranslate2: 'int8' runs int8 weights (RUN/ctranslate2-int8); default none")


def check_engine_arguments(args) -> None:
    if args.quantize != "none" and args.engine != "ctranslate2":
        raise UserError(f"--quantize {args.quantize} applies only to --engine ctranslate2")
    cores = os.cpu_count() or 1
    threads = getattr(args, "threads", None)
    if args.engine in ("ctranslate2", "all") and threads is not None and threads > cores:
        # CTranslate2 starts all its threads at once, and a count the system refuses ends in a native abort
        # ("Thread creation failed"), not an error clearformer could catch.
        raise UserError(f"--threads {threads}: --engine ctranslate2 starts that many threads at once; this machine "
                        f"has {cores} cores: give at most {cores}")


def engine_decoding(args, decoding: DecodingOptions) -> DecodingOptions:
    """The options CTranslate2 decodes by: the user's, with the engine's alpha and brevity (0) where the
    command line gave none; a one-line error naming a choice the engine cannot honour (ct2_engine.py)."""
    return check_options(with_engine_defaults(decoding, set(DecodingOptions.given(args))))


def engine_settings(args, quantize: str | None = None):
    import torch

    threads = args.threads if args.threads is not None else torch.get_num_threads()
    return EngineSettings(quantize=quantize or args.quantize, threads=threads)


def open_engine(args, model, tokenizer, directory: Path, command: str, quantize: str | None = None):
    """The run's CTranslate2 engine, exported first if needed (said on stderr)."""
    settings = engine_settings(args, quantize)
    engine, exported = load_engine(Path(directory), model, tokenizer, settings)
    if exported:
        print(f"clearformer {command}: exported the run for CTranslate2 into "
              f"{export_folder(Path(directory), settings.quantize)}", file=sys.stderr)
    return engine


def translate_with_engine(engine, model, pieces: Pieces, decoding: DecodingOptions, progress=None) -> list[str]:
    """`generate.translate_pieces` with CTranslate2 decoding: the pieces every entry point reads
    (`generate.source.prepare_sources`: long inputs split into sentences unless --whole, `encode_source`),
    cut to max_len as `evaluate` does (checked pieces already fit), joined back into one per input."""
    max_len = model.config.max_len
    outputs = engine.translate_ids([ids[:max_len] for ids in pieces.sources], decoding,
                                   progress=per_input_progress(progress, pieces.count, len(pieces.sources)))
    return join_pieces(pieces.restore(outputs), pieces.owners, pieces.count)


def translate_texts_with_engine(engine, model, tokenizer, sentences: list[str], decoding: DecodingOptions,
                                check: bool = True, progress=None) -> list[str]:
    """Texts through `prepare_sources` (checked, as `translate` reads them; unchecked for a scored corpus),
    then `translate_with_engine`."""
    pieces = prepare_sources(tokenizer, sentences, model.config.max_len, decoding.split, check=check)
    return translate_with_engine(engine, model, pieces, decoding, progress)


def evaluate_engine(engine, model, tokenizer, pairs, decoding: DecodingOptions, progress=None):
    """(Evaluation, sources cut to max_len) of the CTranslate2 engine on `pairs`, as `evaluate_model`."""
    texts = [source for source, _ in pairs]
    sources, _, _ = encode_sources(model, tokenizer, texts, decoding.split)
    truncated = sum(len(ids) > model.config.max_len for ids in sources)
    hypotheses = translate_texts_with_engine(engine, model, tokenizer, texts, decoding, check=False,
                                             progress=progress)
    return score_corpus(hypotheses, [target for _, target in pairs], texts), truncated


def compare_engines(args, decoding: DecodingOptions, model, tokenizer, directory: Path, pairs,
                    pytorch_run) -> list[tuple[str, object, float]]:
    """`evaluate --engine all`: [(engine name, Evaluation, seconds)] for pytorch, ctranslate2, ctranslate2 int8.
    `pytorch_run()` returns the PyTorch path's (Evaluation, truncated)."""
    rows = []
    start = time.perf_counter()
    result, _ = pytorch_run()
    rows.append(("pytorch", result, time.perf_counter() - start))
    decoding = engine_decoding(args, decoding)
    for quantize in ("none", "int8"):
        engine = open_engine(args, model, tokenizer, directory, "evaluate", quantize)
        start = time.perf_counter()
        result, _ = evaluate_engine(engine, model, tokenizer, pairs, decoding)
        name = "ctranslate2" if quantize == "none" else f"ctranslate2 {quantize}"
        rows.append((name, result, time.perf_counter() - start))
    return rows


def comparison_table(rows) -> str:
    lines = [f"{'engine':18s} {'BLEU':>6s} {'chrF':>6s} {'ratio':>6s} {'placeholders':>13s} {'seconds':>8s}"]
    for name, result, seconds in rows:
        kept = f"{100 * result.placeholders.share:.1f}%" if result.placeholders and result.placeholders.total else "-"
        lines.append(f"{name:18s} {result.bleu:6.2f} {result.chrf:6.2f} {result.ratio:6.3f} {kept:>13s} "
                     f"{seconds:8.1f}")
    return "\n".join(lines)
