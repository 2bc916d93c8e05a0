"""`translate --glossary FILE` and `translate --po --memory MEM`: the translator's own words, read before any work.

    clearformer translate --glossary terms.csv "Save the file"         each term of a source as the glossary says
    clearformer translate --po fr.pot --memory old-fr.po --out fr.po   exact matches filled verbatim, fuzzy ones
                                                                       from 90% marked fuzzy, with their score
    clearformer translate --po fr.po --in-place                        the catalogue's own entries are a memory

The glossary is clearformer/glossary.py's and generate/glossary.py's; the memory clearformer/memory.py's.
"""

from __future__ import annotations

import polib

from clearformer.catalog.fill import COMMENT, Plan
from clearformer.errors import UserError
from clearformer.generate.result import NoteKind, Translation
from clearformer.glossary import Glossary, read_glossary
from clearformer.memory import (
    DEFAULT_THRESHOLD,
    Memory,
    MemoryOutcome,
    add_comment,
    catalogue_memory,
    fill_from_memory,
    read_memory,
)
from clearformer.translator import engine_class


def add_glossary_argument(parser) -> None:
    parser.add_argument("--glossary", metavar="FILE",
                        help="the project's terms (CSV source,target; TBX; Weblate's TSV): each term of a source "
                             "comes out as the glossary says, capitalised at a sentence start; a term that could "
                             "not be placed is a warning line (with --po, a '# clearformer:' comment)")


def add_memory_arguments(group) -> None:
    group.add_argument("--memory", metavar="MEM", action="append",
                       help="with --po: a translation memory (a .po catalogue or a .tmx file; repeat for more): "
                            "exact matches filled verbatim, fuzzy ones from --memory-threshold marked fuzzy with "
                            "their score in a '# clearformer:' comment; the catalogue's own translated entries "
                            "are a memory too")
    group.add_argument("--memory-threshold", metavar="PERCENT", type=float, default=DEFAULT_THRESHOLD,
                       help=f"with --po: the similarity from which a fuzzy match fills an entry (default "
                            f"{DEFAULT_THRESHOLD}; below, the model translates it and the comment names the match; "
                            f"101: exact matches only)")
    group.add_argument("--no-memory", action="store_true",
                       help="with --po: no memory at all, not even the catalogue's own entries")


def read_glossary_option(args, engine: str) -> Glossary | None:
    """--glossary FILE read (one line for a bad file), for an engine that enforces it in its decoding."""
    if not args.glossary:
        return None
    if not engine_class(engine).enforces_glossary:
        raise UserError(f"--glossary is enforced by clearformer's own decoder; --engine {engine} does not take it")
    return read_glossary(args.glossary)


def read_memory_option(args, target_language: str | None) -> Memory | None:
    """--memory files read (one line for a bad one); None with --no-memory."""
    if args.no_memory:
        if args.memory:
            raise UserError("give --memory MEM or --no-memory, not both")
        return None
    if not 0 <= args.memory_threshold <= 101:
        raise UserError(f"--memory-threshold {args.memory_threshold:g}: a similarity in percent, 0 to 101")
    return read_memory(args.memory or (), target_language)


def fill_catalogue_from_memory(po: polib.POFile, files: Memory | None, threshold: float) -> MemoryOutcome:
    """The catalogue's entries filled from its own translated entries and the --memory files (None: no memory)."""
    if files is None:
        return MemoryOutcome()
    return fill_from_memory(po, catalogue_memory(po).plus(files), threshold)


def comment_glossary_notes(plan: Plan, results: list[Translation]) -> int:
    """A `# clearformer:` comment on each filled entry for each glossary term its translation does not use (the
    entry is fuzzy already: every filled entry is); the number of terms named."""
    named = 0
    for slot in plan.slots:
        lines = slot.singular + (slot.plural or [])
        details = [note.detail for line in lines if line.job is not None and line.job < len(results)
                   for note in results[line.job].notes if note.kind is NoteKind.GLOSSARY_TERM_MISSING]
        for detail in dict.fromkeys(details):
            add_comment(slot.entry, f"{COMMENT} {detail}")
            named += 1
    return named
