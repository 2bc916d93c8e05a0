"""`clearformer translate`: text from an argument, stdin or a file, one translation per line.

    clearformer translate "I love you"
    echo "I love you" | clearformer translate
    clearformer translate --file sentences.txt --beam 4 --output translations.txt

Greedy decoding (stop at <eos>) by default; `--beam N` for beam search. Input lines keep their
order; empty lines stay empty. Every sentence is checked before any is translated: an empty
sentence (given as an argument), one of only unknown words, or one longer than the model's
maximum length is a one-line error naming the file and line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from clearformer.atomic import atomic_write_text
from clearformer.checkpoint import load_model
from clearformer.commands import engine as engine_options
from clearformer.commands import options
from clearformer.errors import UserError
from clearformer.generate import encode_source, translate
from clearformer.generate.beam import DEFAULT_ALPHA
from clearformer.generate.brevity import DEFAULT_BREVITY
from clearformer.limits import MAX_SENTENCE_CHARS
from clearformer.runs import resolve_checkpoint
from clearformer.validation import require_finite, shorten


def load_translator(checkpoint: str | None):
    """(model, tokenizer, meta, directory) of an encoder-decoder checkpoint (--checkpoint or latest run)."""
    directory = resolve_checkpoint(checkpoint)
    model, tokenizer, meta = load_model(directory)
    config = model.config
    if config.n_encoder_layers == 0 or not hasattr(model, "encode"):
        raise UserError(f"{directory}: holds a decoder-only language model; translation needs an "
                        f"encoder-decoder checkpoint (try `clearformer lm`)")
    if config.src_vocab_size != len(tokenizer):
        raise UserError(f"{directory}: tokenizer has {len(tokenizer)} tokens but config.json says "
                        f"src_vocab_size={config.src_vocab_size}")
    return model, tokenizer, meta if isinstance(meta, dict) else {}, directory


def check_sentence(tokenizer, max_len: int, text: str, where: str | None = None) -> None:
    """Raise a one-line UserError for a sentence the model cannot translate; warn on unknown words.

    `where` ("file:line") prefixes the messages of sentences read from a file or stdin. Messages
    quote at most MAX_QUOTED_CHARS characters of the user's text.
    """
    at = f"{where}: " if where else ""
    if has_surrogates(text):
        raise UserError(f"{at}not UTF-8 text")
    if len(text) > MAX_SENTENCE_CHARS:
        raise UserError(f"{at}sentence of {len(text):,} characters; at most {MAX_SENTENCE_CHARS:,}")
    ids = encode_source(tokenizer, text)
    if not ids:
        raise UserError(f"{at}empty sentence (nothing to translate)")
    if len(ids) > max_len:
        raise UserError(f"{at}sentence of {len(ids)} tokens is longer than the model's maximum "
                        f"length ({max_len})")
    unknown_words = getattr(tokenizer, "unknown_words", None)
    unknown = unknown_words(text) if unknown_words else []
    if unknown and len(unknown) == len(ids):
        shown = shorten(", ".join(unknown[:5]))
        raise UserError(f"{at}every word is unknown to the model's vocabulary ({shown})")
    if unknown:
        shown = shorten(", ".join(dict.fromkeys(unknown)))
        print(f"clearformer translate: warning: {at}unknown word(s) translated as <unk>: {shown}",
              file=sys.stderr)


def has_surrogates(text: str) -> bool:
    """Whether `text` holds lone surrogates: how Python carries bytes that were not UTF-8 (argv, stdin)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


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
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a file of sentences") from None
    except OSError as error:
        raise UserError(f"{path}: unreadable ({error.strerror})") from None
    return decode_lines(data, str(path))


def read_stdin() -> list[str]:
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is not None:
        return decode_lines(buffer.read(), "<stdin>")
    try:
        return check_text_lines(sys.stdin.read().splitlines(), "<stdin>")
    except UnicodeDecodeError:
        raise UserError("<stdin>: not UTF-8 text") from None


def gather_input(args) -> tuple[list[str], str, bool]:
    """(sentences, name for messages, whether lines may be empty) from the argument, --file or stdin."""
    if args.text and args.file:
        raise UserError("give the text as an argument or --file, not both")
    if args.text:
        return [" ".join(args.text)], "argument", False
    if args.file:
        return read_lines(Path(args.file)), str(args.file), True
    if sys.stdin is None or sys.stdin.isatty():
        raise UserError("nothing to translate: give text as an argument, --file PATH, "
                        "or pipe sentences on stdin")
    return read_stdin(), "<stdin>", True


def run(args) -> int:
    check_decoding_options(args)
    engine_options.check_engine_arguments(args)
    output = check_output_path(args.output)
    options.apply_threads(args.threads)
    sentences, name, lines_may_be_empty = gather_input(args)
    model, tokenizer, _, directory = load_translator(args.checkpoint)
    engine = None
    if args.engine == "ctranslate2":
        engine = engine_options.open_engine(args, model, tokenizer, directory, "translate")
    for number, text in enumerate(sentences, start=1):
        if lines_may_be_empty and not text.strip():
            continue
        where = None if name == "argument" else f"{name}:{number}"
        check_sentence(tokenizer, model.config.max_len, text, where)

    bar = None
    if args.file:
        from tqdm import tqdm

        bar = tqdm(total=len(sentences), unit="sentence", desc="translating", file=sys.stderr,
                   disable=None, leave=False)
    try:
        if engine is not None:
            outputs = engine_options.translate_with_engine(engine, model, tokenizer, [s.strip() for s in sentences],
                                                           args, progress=bar.update if bar is not None else None)
        else:
            outputs = translate(model, tokenizer, [s.strip() for s in sentences], beam=args.beam,
                                alpha=args.alpha, max_extra=args.max_extra, batch_size=args.batch_size,
                                progress=bar.update if bar is not None else None, stop=args.early_stop,
                                placeholders=args.placeholders == "exact", split=not args.whole,
                                brevity=args.brevity)
    finally:
        if bar is not None:
            bar.close()
    text = "".join(line + "\n" for line in outputs)
    if output is not None:
        write_output(output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0


def check_decoding_options(args) -> None:
    """--beam, --max-extra, --batch-size in range (--alpha is finite: cli.main checks every float)."""
    if args.beam < 1:
        raise UserError(f"--beam must be at least 1, not {args.beam}")
    if args.max_extra < 0:
        raise UserError(f"--max-extra must be >= 0, not {args.max_extra}")
    if args.batch_size < 1:
        raise UserError(f"--batch-size must be at least 1, not {args.batch_size}")
    require_finite("--alpha", args.alpha)
    require_finite("--brevity", args.brevity)
    if args.brevity < 0:
        raise UserError(f"--brevity must be >= 0 (0 = off), not {args.brevity}")


def check_output_path(output: str | None) -> Path | None:
    """--output PATH, checked before any work: not a directory, in a folder that exists or can be made."""
    if not output:
        return None
    path = Path(output)
    if path.is_dir():
        raise UserError(f"--output {path}: is a directory; give a file path")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"--output {path}: {parent} is a file, not a directory")
            break
    return path


def write_output(path: Path, text: str) -> None:
    """Atomically; a folder that cannot be written is a one-line error."""
    try:
        atomic_write_text(path, text)
    except OSError as error:
        raise UserError(f"cannot write {path} ({error.strerror or error})") from None


def add_decoding_options(parser) -> None:
    """--checkpoint, --beam, --alpha, --max-extra, --batch-size (shared with `evaluate`)."""
    options.add_checkpoint(parser)
    parser.add_argument("--beam", type=int, default=1, metavar="N",
                        help="beam size (default 1: greedy decoding; the paper uses 4)")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                        help=f"beam search length penalty ((5+len)/6)^alpha (default {DEFAULT_ALPHA})")
    parser.add_argument("--brevity", type=float, default=DEFAULT_BREVITY, metavar="W",
                        help=f"penalty on ending a translation shorter than the training data's length ratio "
                             f"expects: -W * (expected - length)^2 / expected on <eos> "
                             f"(default {DEFAULT_BREVITY}; 0 = off)")
    parser.add_argument("--early-stop", choices=("current", "bound"), default="current",
                        help="when beam search stops a sentence: 'current' (default) once no beam scored at the "
                             "current length beats its best finished translation; 'bound' once none can at any "
                             "allowed length (exact; slower, slightly better BLEU)")
    parser.add_argument("--max-extra", type=int, default=50, metavar="N",
                        help="stop at source length + N tokens (default 50, as in the paper)")
    parser.add_argument("--batch-size", type=int, default=32, metavar="N",
                        help="sentences per batch (default 32)")
    parser.add_argument("--whole", action="store_true",
                        help="translate an input of more than 25 words in one pass (default: sentence by "
                             "sentence, as the training data were cut)")
    parser.add_argument("--placeholders", choices=("exact", "free"), default="exact",
                        help="'exact' (default): every placeholder piece of a source (%%s, {0}, ...) comes out "
                             "exactly as often as it went in; 'free': no constraint")
    options.add_threads(parser)


def register(subparsers) -> None:
    parser = subparsers.add_parser("translate", help="translate text with a trained model",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("text", nargs="*", help="the sentence to translate (default: stdin or --file)")
    parser.add_argument("--file", metavar="PATH",
                        help="translate every line of PATH (empty lines stay empty)")
    parser.add_argument("--output", metavar="PATH", help="write the translations to PATH instead of stdout")
    add_decoding_options(parser)
    engine_options.add_engine_arguments(parser)
    parser.set_defaults(func=run)
