"""`translate --po FILE --adapt MINUTES`: the run learns the catalogue's own translations first, then fills it.

    clearformer translate --checkpoint runs/firefox-en-pt --po fr.po --adapt 5 --out fr-filled.po

The one-command form of `train --init RUN --data FILE --minutes MINUTES` (train/init.py, data/catalogue_pairs.py):
the translated entries of FILE are the training pairs (a tenth of them held out to choose the kept model), the
run the translation would use is the start, and the untranslated entries are then filled by the adapted run.

The adapted run is a new run folder, `runs/<run>-adapted-<catalogue>` (`-2`, `-3`... when that exists), never the
user's run: it is kept, and its path printed, so the next catalogue of the project can use it (`--checkpoint`)
without paying for the minutes again. `runs/LATEST` is left as it was: a plain `translate` later still means the
run the user trained or imported, not this catalogue's. MINUTES count training; the validations (about one an
epoch) come on top, and early stopping may end sooner (BENCHMARKS.md, "Learning from the catalogue").
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from clearformer.catalog.fill import read_catalogue
from clearformer.commands.options import apply_threads
from clearformer.commands.train import init_options
from clearformer.data.catalogue_pairs import is_catalogue, translated_entries
from clearformer.errors import UserError
from clearformer.limits import MAX_POINTER_FILE_BYTES
from clearformer.store.fixed import read_fixed, write_fixed
from clearformer.store.runs import resolve_checkpoint, runs_root
from clearformer.train import train

# Fewer translated entries than this teach little and validate on a handful (a tenth is held out): refused.
MIN_ADAPT_ENTRIES = 50
MAX_ADAPT_MINUTES = 24 * 60


def add_adapt_argument(group) -> None:
    group.add_argument("--adapt", type=float, metavar="MINUTES",
                       help="with --po: first fine-tune the run on the catalogue's own translated entries for at "
                            "most MINUTES of training (into a new run folder, printed; yours is not changed), "
                            "then fill the catalogue with the adapted run")


def check_adapt(args) -> None:
    """--adapt's value and the catalogue's translated entries, before any work: a one-line error each."""
    minutes = args.adapt
    if not 0 < minutes <= MAX_ADAPT_MINUTES:
        raise UserError(f"--adapt {minutes:g}: give minutes of training, more than 0 and at most {MAX_ADAPT_MINUTES}")
    if not is_catalogue(args.po):  # a template (.pot) holds no translations; `train --data` reads a .po
        raise UserError(f"{args.po}: --adapt learns from a catalogue's translations (a .po file), not a template")
    count = len(translated_entries(read_catalogue(Path(args.po))))
    if count < MIN_ADAPT_ENTRIES:
        raise UserError(f"{args.po}: {count} translated entr{'y' if count == 1 else 'ies'}; --adapt learns from "
                        f"at least {MIN_ADAPT_ENTRIES} (translate without --adapt, or translate more first)")


def adapted_run_dir(start: Path, catalogue: Path) -> Path:
    """runs/<run>-adapted-<catalogue stem>, numbered when taken: a new folder, never an existing run."""
    base = runs_root() / f"{start.resolve().name}-adapted-{catalogue.stem}"
    candidate, number = base, 1
    while os.path.lexists(candidate):
        number += 1
        candidate = base.with_name(f"{base.name}-{number}")
    return candidate


@contextlib.contextmanager
def latest_kept():
    """runs/LATEST as it was before (or absent, as it was): adapting for one catalogue is not the user's new run."""
    marker = runs_root() / "LATEST"
    before = read_fixed(marker, MAX_POINTER_FILE_BYTES)
    try:
        yield
    finally:
        if before is not None:
            write_fixed(marker, before.decode("utf-8"))
        elif os.path.lexists(marker):
            marker.unlink()


def adapt(args) -> str:
    """Fine-tune the run --checkpoint names (or runs/LATEST) on --po's translated entries for --adapt minutes;
    the adapted run's folder. The training log goes to stderr (stdout may be the filled catalogue)."""
    if args.threads is not None:  # training's threads too, not only the engine's (commands/engine.py)
        apply_threads(args.threads)
    start = resolve_checkpoint(args.checkpoint)
    run_dir = adapted_run_dir(start, Path(args.po))
    options = init_options({"init": str(start), "data_dir": str(args.po), "minutes": args.adapt,
                            "run_dir": str(run_dir), "device": args.device or "cpu"}, []).check()
    print(f"clearformer translate: adapting {start} to the translated entries of {args.po} "
          f"(at most {args.adapt:g} min of training) into {run_dir}", file=sys.stderr, flush=True)
    with latest_kept(), contextlib.redirect_stdout(sys.stderr):
        result = train(options, progress=sys.stderr.isatty())
    print(f"clearformer translate: the adapted run is kept in {result.run_dir}: give --checkpoint "
          f"{result.run_dir} to use it again (your run {start} is unchanged)", file=sys.stderr, flush=True)
    return str(result.run_dir)
