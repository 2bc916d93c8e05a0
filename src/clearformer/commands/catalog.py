"""`clearformer translate --po IN.po --out OUT.po`: a gettext catalogue (.po or .pot) filled by the model.

    clearformer translate --po app.pot --out fr.po          every untranslated entry filled, marked fuzzy
    clearformer translate --po fr.po --in-place             the catalogue itself, rewritten atomically
    clearformer translate --po fr.po                        the filled catalogue on stdout
    clearformer translate --po fr.po --adapt 5 --in-place   the run adapted to fr.po's translations first

The rules (plural forms, placeholders by format flag, accelerators, the header) are catalog/fill.py's
and docs/catalogs.md's. IN is never written unless --in-place; an --out that exists is refused unless
--overwrite. Every line goes through `translate`'s own translator and engine (commands/engine.py, the one input
path: `Translator.read`); a line the model cannot read (only unknown words, too long) comes back with an
UNREADABLE note and is copied from the source, with a translator comment.
"""

from __future__ import annotations

import sys
from pathlib import Path

from clearformer.catalog.fill import CatalogueSettings, Outcome, Plan, catalogue_text, plan_catalogue, read_catalogue
from clearformer.commands import engine as engine_options
from clearformer.commands.adapt import adapt, add_adapt_argument, check_adapt
from clearformer.commands.assistant import (
    add_memory_arguments,
    comment_glossary_notes,
    fill_catalogue_from_memory,
    read_glossary_option,
    read_memory_option,
)
from clearformer.commands.options import check_not_input
from clearformer.errors import UserError
from clearformer.explain.interventions import interventions_from_args
from clearformer.generate import DecodingOptions
from clearformer.generate.result import NoteKind, Translation
from clearformer.glossary import Glossary
from clearformer.languages import Languages, run_languages
from clearformer.memory import DEFAULT_THRESHOLD, MemoryOutcome, comment_offers
from clearformer.quality import fronts as confidence_front
from clearformer.store.output import OutputTarget, check_output, write_output
from clearformer.translator import load_run

ACCELERATORS = ("auto", "none", "_", "&", "~")


def add_catalogue_arguments(parser) -> None:
    """translate's --po and the options that go with it."""
    group = parser.add_argument_group("gettext catalogues (docs/catalogs.md)")
    group.add_argument("--po", metavar="IN", help="fill every untranslated entry of the catalogue IN (.po or .pot), "
                                                  "each marked fuzzy")
    group.add_argument("--out", metavar="OUT", help="with --po: write the filled catalogue to OUT (default: stdout)")
    group.add_argument("--in-place", action="store_true", help="with --po: rewrite IN itself (atomically)")
    group.add_argument("--overwrite", action="store_true", help="with --po: replace an existing OUT")
    group.add_argument("--languages", metavar="SRC:TGT",
                       help="the model's languages, as en:fr (default: what the run's corpus records); a template's "
                            "Language and Plural-Forms come from TGT")
    add_memory_arguments(group)
    add_adapt_argument(group)
    group.add_argument("--accelerator", choices=ACCELERATORS, default="auto",
                       help="with --po: the accelerator mark (_File, &File, ~File) to take out before translating "
                            "and put back after (default auto: the catalogue's convention)")


def refuse_without_po(args) -> None:
    """The catalogue options apply to --po only: given without it, one line instead of being ignored."""
    given = [flag for flag, value in (("--out", args.out), ("--in-place", args.in_place),
                                      ("--overwrite", args.overwrite), ("--accelerator", args.accelerator != "auto"),
                                      ("--languages", args.languages), ("--memory", args.memory),
                                      ("--no-memory", args.no_memory), ("--adapt", args.adapt is not None),
                                      ("--memory-threshold", args.memory_threshold != DEFAULT_THRESHOLD))
             if value]
    if given:
        hint = "; for text, use --output" if given[0] == "--out" else ""
        raise UserError(f"{given[0]} applies to --po (a gettext catalogue){hint}")


def catalogue_output(args) -> OutputTarget | None:
    """Where the filled catalogue goes (None: stdout), checked before any work (store/output.py): --in-place
    replaces --po, an existing --out only with --overwrite."""
    source = Path(args.po)
    if args.in_place:
        if args.out:
            raise UserError("give --out OUT or --in-place, not both")
        return check_output(source, "--po")
    if not args.out:
        return None
    check_not_input(Path(args.out), source, "--po")
    return check_output(args.out, "--out", overwrite=args.overwrite,
                        exists_hint="pass --overwrite to replace it, or --in-place to fill --po itself")


def run(args) -> int:
    """`translate --po`: read, plan, translate, fill, write; the engine, its options and its refusals are
    `translate`'s own (commands/engine.py), and so is the run read back (clearformer/translator.py `load_run`)."""
    if args.text or args.file or args.output:
        raise UserError("--po translates a catalogue: give no text, --file or --output with it (use --out)")
    choice = engine_options.engine_choice(args, DecodingOptions.from_args(args))  # every refusal before any work
    output = catalogue_output(args)
    given = Languages.parse(args.languages) if args.languages else None
    glossary = read_glossary_option(args, choice.engine)  # bad files: one line, before any work
    memory = read_memory_option(args, given.target if given else None)
    if args.adapt is not None:
        check_adapt(args)  # too few translated entries: one line, before any training
    po = read_catalogue(Path(args.po))
    # --adapt: the run first learns the catalogue's translated entries, into a new run folder (commands/adapt.py)
    run_folder = load_run(adapt(args) if args.adapt is not None else args.checkpoint, args.device)
    translator = choice.open(run_folder, "translate")
    changes = interventions_from_args(translator.model, args)
    languages = given or run_languages(run_folder.meta)
    tokenizer = translator.tokenizer
    settings = CatalogueSettings(language=languages.target if languages else None, accelerator=args.accelerator,
                                 model_masks=bool(tokenizer.mask_placeholders),
                                 model_patterns=tuple(tokenizer.placeholder_patterns),
                                 contexts=glossary.contexts if glossary is not None else frozenset())
    remembered = fill_catalogue_from_memory(po, memory, args.memory_threshold)  # before the model: what is left
    plan = plan_catalogue(po, settings, str(args.po))
    rater = confidence_front.rater(run_folder.directory, warn) if confidence_front.check_confidence_arguments(args) \
        else None
    with engine_options.progress_bar(len(plan.texts), f"translating {Path(args.po).name}", unit="line") as bar, \
            changes:
        results = translate_plan(translator, plan, choice.decoding, bar, rater, glossary)
    translations = [None if any(note.kind is NoteKind.UNREADABLE for note in result.notes) else result.text
                    for result in results]
    # what the checks found: a `# clearformer:` comment each (the glossary's own notes: comment_glossary_notes)
    shown_apart = (NoteKind.UNREADABLE, NoteKind.GLOSSARY_TERM_MISSING)
    found = [tuple(note for note in result.notes if note.kind not in shown_apart) for result in results]
    outcome = plan.fill(translations, found=found)
    comment_offers(po, remembered)
    terms_missing = comment_glossary_notes(plan, results)
    if rater is not None:  # a comment per filled entry; under --min-confidence, left untranslated
        outcome.untranslated = confidence_front.annotate_catalogue(plan, [r.confidence for r in results],
                                                                   args.min_confidence)
        outcome.filled -= outcome.untranslated
    text = catalogue_text(po)
    if output is not None:
        write_output(output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    report(outcome, output, remembered, terms_missing)
    return 0


def translate_plan(translator, plan: Plan, decoding: DecodingOptions, progress, rater,
                   glossary: Glossary | None) -> list[Translation]:
    """Every text of the plan translated, those of a msgctxt some glossary term is restricted to with that
    context's terms (`Glossary.in_context`), the others with the unrestricted terms: one call per context (a
    translation does not depend on its batch). A line the model cannot read is not refused: it comes back with
    an UNREADABLE note, and is copied."""
    results: list[Translation] = [Translation("")] * len(plan.texts)
    groups: dict[str, list[int]] = {}
    for job, context in enumerate(plan.contexts):
        groups.setdefault(context, []).append(job)
    for context, jobs in groups.items():
        pieces = translator.read([plan.texts[job] for job in jobs], decoding.split, unreadable="note")
        terms = glossary.in_context(context) if glossary is not None else None
        found = translator.translate(pieces, decoding, progress=progress, confidence=rater, glossary=terms)
        for job, result in zip(jobs, found, strict=True):
            results[job] = result
    return results


def warn(line: str) -> None:
    print(f"clearformer translate: warning: {line}", file=sys.stderr)


def report(outcome: Outcome, output: OutputTarget | None, remembered: MemoryOutcome | None = None,
           terms_missing: int = 0) -> None:
    where = f" -> {output.path}" if output is not None else ""
    notes = []
    if remembered is not None and remembered.exact + remembered.fuzzy:
        notes.append(f"{remembered.exact} entr{'y' if remembered.exact == 1 else 'ies'} filled from memory "
                     f"exactly, {remembered.fuzzy} from fuzzy matches (marked fuzzy)")
    if terms_missing:
        notes.append(f"{terms_missing} glossary term(s) not used")
    if outcome.copied:
        notes.append(f"{outcome.copied} line(s) copied from the source (the model cannot read them, or wrote nothing)")
    if outcome.moved_accelerators:
        notes.append(f"{outcome.moved_accelerators} accelerator(s) on another letter")
    if outcome.untranslated:
        notes.append(f"{outcome.untranslated} entr{'y' if outcome.untranslated == 1 else 'ies'} under "
                     f"--min-confidence left untranslated")
    if outcome.noted:
        notes.append(f"{outcome.noted} entr{'y' if outcome.noted == 1 else 'ies'} the checks flagged (a placeholder "
                     f"placed by the search, a numeral or tag the source lacks, a sentence missing, the source copied)")
    extra = f"; {', '.join(notes)}: see the '# clearformer:' comments" if notes else ""
    print(f"clearformer translate: {outcome.filled} entr{'y' if outcome.filled == 1 else 'ies'} filled, "
          f"marked fuzzy{where}{extra}", file=sys.stderr)
