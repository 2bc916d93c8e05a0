"""`clearformer translate --po IN.po --out OUT.po`: a gettext catalogue (.po or .pot) filled by the model.

    clearformer translate --po app.pot --out fr.po          every untranslated entry filled, marked fuzzy
    clearformer translate --po fr.po --in-place             the catalogue itself, rewritten atomically
    clearformer translate --po fr.po                        the filled catalogue on stdout

The rules (plural forms, placeholders by format flag, accelerators, the header) are catalog/fill.py's
and docs/catalogs.md's. IN is never written unless --in-place; an --out that exists is refused unless
--overwrite. Every line goes through the one input path (`generate.source.prepare_sources`); a line the
model cannot read (only unknown words, too long) is copied from the source, with a translator comment.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clearformer.catalog.fill import CatalogueSettings, Outcome, catalogue_text, plan_catalogue, read_catalogue
from clearformer.commands import engine as engine_options
from clearformer.errors import UserError
from clearformer.explain.interventions import interventions_from_args
from clearformer.generate import DecodingOptions, checks
from clearformer.generate.result import Note
from clearformer.generate.source import Pieces, prepare_sources
from clearformer.generate.translate import translate_checked
from clearformer.languages import Languages, run_languages
from clearformer.store.output import OutputTarget, check_output, write_output

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
    group.add_argument("--accelerator", choices=ACCELERATORS, default="auto",
                       help="with --po: the accelerator mark (_File, &File, ~File) to take out before translating "
                            "and put back after (default auto: the catalogue's convention)")


def refuse_without_po(args) -> None:
    """The catalogue options apply to --po only: given without it, one line instead of being ignored."""
    given = [flag for flag, value in (("--out", args.out), ("--in-place", args.in_place),
                                      ("--overwrite", args.overwrite), ("--accelerator", args.accelerator != "auto"),
                                      ("--languages", args.languages))
             if value]
    if given:
        hint = "; for text, use --output" if given[0] == "--out" else ""
        raise UserError(f"{given[0]} applies to --po (a gettext catalogue){hint}")


@dataclass(frozen=True)
class TranslateParts:
    """What `translate --po` shares with `translate` (commands/translate.py owns them, and passes them in):
    loading the checkpoint, and refusing an output that is the input."""

    load_translator: Callable  # (checkpoint, device) -> (model, tokenizer, meta, directory)
    check_not_input: Callable[[Path | None, Path, str], None]


def catalogue_output(args, parts: TranslateParts) -> OutputTarget | None:
    """Where the filled catalogue goes (None: stdout), checked before any work (store/output.py): --in-place
    replaces --po, an existing --out only with --overwrite."""
    source = Path(args.po)
    if args.in_place:
        if args.out:
            raise UserError("give --out OUT or --in-place, not both")
        return check_output(source, "--po")
    if not args.out:
        return None
    parts.check_not_input(Path(args.out), source, "--po")
    return check_output(args.out, "--out", overwrite=args.overwrite,
                        exists_hint="pass --overwrite to replace it, or --in-place to fill --po itself")


def merged_pieces(parts: list[Pieces]) -> Pieces:
    """Several inputs' `Pieces` as one (one input each), so that they are decoded in the same batches."""
    merged = Pieces(count=len(parts))
    for index, part in enumerate(parts):
        merged.texts += part.texts
        merged.sources += part.sources
        merged.masks += part.masks
        merged.owners += [index] * len(part.sources)
    return merged


def readable_pieces(tokenizer, texts: list[str], max_len: int, split: bool) -> tuple[list[int], Pieces]:
    """(the texts the model can read, their pieces): a text `prepare_sources` refuses is left out (copied)."""
    kept, parts = [], []
    for index, text in enumerate(texts):
        try:
            parts.append(prepare_sources(tokenizer, [text], max_len, split))
        except UserError:
            continue
        kept.append(index)
    return kept, merged_pieces(parts)


def run(args, parts: TranslateParts) -> int:
    """`translate --po`: read, plan, translate, fill, write."""
    from tqdm import tqdm

    if args.text or args.file or args.output:
        raise UserError("--po translates a catalogue: give no text, --file or --output with it (use --out)")
    decoding = DecodingOptions.from_args(args)
    engine_options.check_engine_arguments(args)
    if args.engine == "ctranslate2":
        decoding = engine_options.engine_decoding(args, decoding)
    output = catalogue_output(args, parts)
    given = Languages.parse(args.languages) if args.languages else None
    po = read_catalogue(Path(args.po))
    model, tokenizer, meta, directory = parts.load_translator(args.checkpoint, args.device)
    changes = interventions_from_args(model, args)
    languages = given or run_languages(meta)
    settings = CatalogueSettings(language=languages.target if languages else None, accelerator=args.accelerator,
                                 model_masks=bool(tokenizer.mask_placeholders),
                                 model_patterns=tuple(tokenizer.placeholder_patterns))
    plan = plan_catalogue(po, settings, str(args.po))
    kept, pieces = readable_pieces(tokenizer, plan.texts, model.config.max_len, decoding.split)
    engine = engine_options.open_engine(args, model, tokenizer, directory, "translate") \
        if args.engine == "ctranslate2" else None
    bar = tqdm(total=len(kept), unit="line", desc=f"translating {Path(args.po).name}", file=sys.stderr,
               disable=None, leave=False)
    try:
        if engine is not None:
            outputs = engine_options.translate_with_engine(engine, model, pieces, decoding, progress=bar.update)
            results = checks.translations([plan.texts[i] for i in kept], range(len(kept)), len(kept), outputs)
        else:
            with changes:
                results = translate_checked(model, tokenizer, pieces, decoding, progress=bar.update)
    finally:
        bar.close()
    translations: list[str | None] = [None] * len(plan.texts)
    found: list[tuple[Note, ...]] = [()] * len(plan.texts)
    for index, result in zip(kept, results, strict=True):
        translations[index], found[index] = result.text, result.notes
    outcome = plan.fill(translations, found=found)
    text = catalogue_text(po)
    if output is not None:
        write_output(output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    report(outcome, output)
    return 0


def report(outcome: Outcome, output: OutputTarget | None) -> None:
    where = f" -> {output.path}" if output is not None else ""
    notes = []
    if outcome.copied:
        notes.append(f"{outcome.copied} line(s) copied from the source (the model cannot read them, or wrote nothing)")
    if outcome.moved_accelerators:
        notes.append(f"{outcome.moved_accelerators} accelerator(s) on another letter")
    if outcome.noted:
        notes.append(f"{outcome.noted} entr{'y' if outcome.noted == 1 else 'ies'} the checks flagged (a placeholder "
                     f"placed by the search, a numeral or tag the source lacks, a sentence missing, the source copied)")
    extra = f"; {', '.join(notes)}: see the '# clearformer:' comments" if notes else ""
    print(f"clearformer translate: {outcome.filled} entr{'y' if outcome.filled == 1 else 'ies'} filled, "
          f"marked fuzzy{where}{extra}", file=sys.stderr)
