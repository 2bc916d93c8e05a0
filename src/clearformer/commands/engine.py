"""`--engine` and `--quantize` of `clearformer translate` and `clearformer evaluate`, and their progress bar.

    clearformer translate --engine ctranslate2 "I love you"
    clearformer translate --engine ctranslate2 --quantize int8 --beam 4 --file in.txt
    clearformer evaluate --engine ctranslate2 --quantize int8 --beam 4
    clearformer evaluate --engine all --beam 4      # pytorch, ctranslate2 float32 and int8 side by side

`pytorch` (the default) is clearformer's own decoder; `ctranslate2` exports the run once into
RUN/ctranslate2 (RUN/ctranslate2-int8 with `--quantize int8`) and decodes with CTranslate2
(`interop/ct2_engine.py` says what it shares with the PyTorch path and what it cannot do). Both are a
`Translator` (clearformer/translator.py, `ENGINES`): the command line chooses one by name here, asks it what it
takes and refuses before any work (`EngineChoice`), and the commands call only its `translate`.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from clearformer.errors import UserError
from clearformer.generate.options import DecodingOptions
from clearformer.translator import ENGINES, EngineSettings, LoadedRun, Translator, engine_class

# `evaluate --engine all`: every engine, side by side.
ALL = (("pytorch", "none"), ("pytorch", "int8"), ("ctranslate2", "none"), ("ctranslate2", "int8"))


def add_engine_arguments(parser, allow_all: bool = False) -> None:
    choices = tuple(ENGINES) + (("all",) if allow_all else ())
    also = "; 'all': each of pytorch, pytorch int8, ctranslate2 and ctranslate2 int8, side by side" if allow_all \
        else ""
    parser.add_argument("--engine", choices=choices, default="pytorch",
                        help="who decodes: 'pytorch' (default, clearformer's own decoder) or 'ctranslate2' (the "
                             "run exported once into RUN/ctranslate2; alpha 0 and no brevity penalty, placeholders "
                             f"kept by choosing among the n best){also}")
    parser.add_argument("--quantize", choices=("none", "int8"), default="none",
                        help="'int8': int8 linear layers on the CPU (clearformer's own, generate/int8.py; with --engine"
                             " ctranslate2, CTranslate2's: RUN/ctranslate2-int8); default none")


@dataclass(frozen=True)
class EngineChoice:
    """An engine chosen on the command line, checked before any work: its name, its settings, and the decoding
    options it will decode by (the user's, with the engine's own defaults where the user gave none)."""

    engine: str
    settings: EngineSettings
    decoding: DecodingOptions

    def open(self, run: LoadedRun, command: str) -> Translator:
        """The engine on `run` (what opening it did, e.g. an export, said on stderr)."""
        return run.open(self.engine, self.settings,
                        lambda line: print(f"clearformer {command}: {line}", file=sys.stderr))


def engine_choices(args, decoding: DecodingOptions) -> list[EngineChoice]:
    """The engine(s) the command line asks for (`--engine all`: each of ALL), each checked: its settings
    (--quantize, --threads, --ablate) and the decoding options it takes, a one-line error before any work."""
    named = {"all": ALL}.get(args.engine, ((args.engine, args.quantize),))
    if len(named) > 1 and args.quantize != "none":
        raise UserError(f"--quantize {args.quantize} applies to one engine; --engine all runs each")
    given = set(DecodingOptions.given(args))
    choices = []
    for engine, quantize in named:
        settings = EngineSettings(quantize=quantize, threads=getattr(args, "threads", None),
                                  ablate=tuple(getattr(args, "ablate", None) or ()))
        engine_type = engine_class(engine)
        engine_type.check_settings(settings)
        choices.append(EngineChoice(engine, settings, engine_type.decoding(decoding, given)))
    return choices


def engine_choice(args, decoding: DecodingOptions) -> EngineChoice:
    """`engine_choices` of a command that runs one engine (translate, translate --po)."""
    return engine_choices(args, decoding)[0]


def terminal_size() -> tuple[int, int]:
    """The terminal's (columns, rows); 80 x 24 where the terminal does not say (a pseudo-terminal of size 0 x 0,
    as `script`, editors and CI runners make one: tqdm would draw its bar in 0 columns and 0 rows, that is
    nothing, which is how `translate --po`'s bar went missing under a terminal)."""
    size = shutil.get_terminal_size((80, 24))
    return size.columns or 80, size.lines or 24


@contextmanager
def progress_bar(total: int, description: str, unit: str = "sentence", shown: bool = True) -> Iterator:
    """A bar on stderr counting `total` units while inside, when stderr is a terminal (and `shown`): yields its
    `update(n)`, or None. It stays on screen when done (a finished bar says how long the work took)."""
    from tqdm import tqdm

    if not shown or not sys.stderr.isatty():
        yield None
        return
    columns, rows = terminal_size()
    with tqdm(total=total, unit=unit, desc=description, file=sys.stderr, ncols=columns, nrows=rows,
              mininterval=0.2) as bar:
        yield bar.update


def comparison_table(rows) -> str:
    lines = [f"{'engine':18s} {'BLEU':>6s} {'chrF':>6s} {'ratio':>6s} {'placeholders':>13s} {'seconds':>8s}"]
    for name, result, seconds in rows:
        kept = f"{100 * result.placeholders.share:.1f}%" if result.placeholders and result.placeholders.total else "-"
        lines.append(f"{name:18s} {result.bleu:6.2f} {result.chrf:6.2f} {result.ratio:6.3f} {kept:>13s} "
                     f"{seconds:8.1f}")
    return "\n".join(lines)
