"""`clearformer translate`: text from an argument, stdin or a file, one translation per line.

    clearformer translate "I love you"
    clearformer translate "I love you" "the dog sleeps"      # two sentences, two lines out
    echo "I love you" | clearformer translate
    clearformer translate --file sentences.txt --beam 4 --output translations.txt
    clearformer translate --po app.pot --out fr.po      (a gettext catalogue: commands/catalog.py)

Greedy decoding (stop at <eos>) by default; `--beam N` for beam search. Several text arguments are
several sentences, one translation per line, as the same sentences on stdin are (quote a sentence of
several words). Input lines keep their order; empty lines stay empty. Inputs are read as every entry point reads them
(`generate.source.prepare_sources`): an input of more than 25 words is cut into its sentences, and every
piece is checked before any is translated: an empty sentence (given as an argument), one of only unknown
words, or one longer than the model's maximum length is a one-line error naming the file, the line and
the sentence.
"""

from __future__ import annotations

import sys
from pathlib import Path

from clearformer.commands import catalog, options
from clearformer.commands import engine as engine_options
from clearformer.commands.assistant import add_glossary_argument, read_glossary_option
from clearformer.commands.options import check_not_input
from clearformer.errors import UserError
from clearformer.explain.interventions import add_ablate_argument, interventions_from_args
from clearformer.generate import DecodingOptions
from clearformer.generate.result import NoteKind, Translation
from clearformer.generate.source import Pieces
from clearformer.generate.translator import Translator
from clearformer.limits import MAX_TEXT_FILE_BYTES, has_surrogates
from clearformer.quality import fronts as confidence_front
from clearformer.store import output as store_output
from clearformer.store import safeio
from clearformer.store.output import check_output
from clearformer.translator import load_run


def decode_lines(data: bytes, name: str) -> list[str]:
    """UTF-8 bytes -> lines; bytes that are not UTF-8 are a UserError naming `name` and the line."""
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise UserError(f"{name}:{line}: not UTF-8 text") from None


def check_text_lines(lines: list[str], name: str) -> list[str]:
    """Lines already decoded by Python (with lone surrogates for bad bytes): the first bad one is an error."""
    for number, line in enumerate(lines, start=1):
        if has_surrogates(line):
            raise UserError(f"{name}:{number}: not UTF-8 text")
    return lines


def read_lines(path: Path) -> list[str]:
    """The lines of a file of sentences, read through the bounded reader (also /dev/zero or a FIFO)."""
    return decode_lines(safeio.read_bytes(path, MAX_TEXT_FILE_BYTES), str(path))


def read_stdin() -> list[str]:
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is not None:
        return decode_lines(safeio.read_stream(buffer, MAX_TEXT_FILE_BYTES, "<stdin>"), "<stdin>")
    try:
        text = sys.stdin.read(MAX_TEXT_FILE_BYTES + 1)
    except UnicodeDecodeError:
        raise UserError("<stdin>: not UTF-8 text") from None
    if len(text) > MAX_TEXT_FILE_BYTES:
        raise UserError(f"<stdin>: larger than {safeio.megabytes(MAX_TEXT_FILE_BYTES)}, the most clearformer reads")
    return check_text_lines(text.splitlines(), "<stdin>")


def gather_input(args) -> tuple[list[str], str, bool]:
    """(sentences, name for messages, whether lines may be empty) from the argument, --file or stdin."""
    if args.text and args.file:
        raise UserError("give the text as an argument or --file, not both")
    if args.text:  # each argument is one sentence, as each line of stdin is
        return list(args.text), "argument" if len(args.text) == 1 else "arguments", False
    if args.file:
        return read_lines(Path(args.file)), str(args.file), True
    if sys.stdin is None or sys.stdin.isatty():
        raise UserError("nothing to translate: give text as an argument, --file PATH, "
                        "or pipe sentences on stdin")
    return read_stdin(), "<stdin>", True


def read_sentences(translator: Translator, sentences: list[str], name: str, lines_may_be_empty: bool,
                   split: bool) -> Pieces:
    """Every sentence read and checked piece by piece before any is translated (unknown words: one warning
    line per input), by the one input path (`Translator.read`, `prepare_sources`)."""
    if not lines_may_be_empty:  # an empty argument
        for index, text in enumerate(sentences):
            if not text.strip():
                at = f"argument {index + 1}: " if len(sentences) > 1 else ""
                raise UserError(f"{at}empty sentence (nothing to translate)")

    return translator.read([s.strip() for s in sentences], split, where=lambda index: input_label(name, index),
                           warn=warn)


def input_label(name: str, index: int) -> str | None:
    """How a message names input `index` of `name` (the one argument: nothing; "argument 2"; "FILE:3")."""
    if name == "argument":
        return None
    return f"argument {index + 1}" if name == "arguments" else f"{name}:{index + 1}"


def warn(message: str) -> None:
    print(f"clearformer translate: warning: {message}", file=sys.stderr)


def warn_notes(results: list[Translation], name: str, unknown: set[int]) -> None:
    """One warning line per note of a translation (generate/checks.py), naming its line or argument; an input
    whose unknown words were already named (`unknown`) is not told again that its translation holds <unk>."""
    for index, result in enumerate(results):
        where = "" if name == "argument" else \
            (f"argument {index + 1}: " if name == "arguments" else f"{name}:{index + 1}: ")
        for note in result.notes:
            if not (index in unknown and note.kind is NoteKind.UNWRITABLE_SPAN):
                warn(f"{where}{note.detail}")


def run(args) -> int:
    wants_confidence = confidence_front.check_confidence_arguments(args)  # before any work
    if args.po:  # a gettext catalogue: commands/catalog.py
        return catalog.run(args)
    catalog.refuse_without_po(args)
    choice = engine_options.engine_choice(args, DecodingOptions.from_args(args))  # every refusal before any work
    check_not_input(Path(args.output) if args.output else None, args.file, "--file")  # before: a link to it
    output = check_output_path(args.output)
    sentences, name, lines_may_be_empty = gather_input(args)
    glossary = read_glossary_option(args, choice.engine)  # a bad file: one line, before the model loads
    run_folder = load_run(args.checkpoint, args.device)
    translator = choice.open(run_folder, "translate")
    changes = interventions_from_args(translator.model, args)  # what-if: --ablate NAME, checked before any work
    pieces = read_sentences(translator, sentences, name, lines_may_be_empty, choice.decoding.split)
    rater = confidence_front.rater(run_folder.directory, warn) if wants_confidence else None
    with engine_options.progress_bar(len(sentences), "translating", shown=bool(args.file)) as bar, changes:
        results = translator.translate(pieces, choice.decoding, progress=bar, confidence=rater,
                                         glossary=glossary)
    warn_notes(results, name, set(pieces.unknown))
    if args.format == "json":
        text = confidence_front.json_lines(results)
    elif wants_confidence:
        text = confidence_front.text_lines(results)
    else:
        text = "".join(result.text + "\n" for result in results)
    if output is not None:
        write_output(output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def check_output_path(output: str | None) -> Path | None:
    """--output PATH, checked before any work (store/output.py: a file in a folder that exists and takes
    it, or a stream such as /dev/stdout; never a folder, a link, a FIFO)."""
    if not output:
        return None
    check_output(output, "--output")
    return Path(output)


def write_output(path: Path, text: str) -> None:
    """Through store/output.py: atomically for a file, as a stream for a device; one line for any failure."""
    store_output.write_output(check_output(path, "--output"), text)


def add_decoding_options(parser) -> None:
    """--checkpoint, every `DecodingOptions` flag (shared with `evaluate`), --threads."""
    options.add_checkpoint(parser)
    DecodingOptions.add_arguments(parser, defaults=False)  # what was given matters to --engine ctranslate2
    options.add_threads(parser)
    options.add_device(parser)  # the PyTorch engine decodes there (CTranslate2 runs on the CPU)


def register(subparsers) -> None:
    parser = subparsers.add_parser("translate", help="translate text with a trained model",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("text", nargs="*",
                        help="the sentences to translate, one per argument and one translation per line out "
                             "(quote a sentence of several words; default: stdin or --file)")
    parser.add_argument("--file", metavar="PATH",
                        help="translate every line of PATH (empty lines stay empty)")
    parser.add_argument("--output", metavar="PATH", help="write the translations to PATH instead of stdout")
    add_decoding_options(parser)
    add_glossary_argument(parser)
    add_ablate_argument(parser)
    engine_options.add_engine_arguments(parser)
    catalog.add_catalogue_arguments(parser)
    confidence_front.add_confidence_arguments(parser)
    parser.set_defaults(func=run)
