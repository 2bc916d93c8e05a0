"""`clearformer import marian SRC --out RUN`: a Hugging Face MarianMT translator as a clearformer run.

    clearformer import marian hf:Helsinki-NLP/opus-mt-en-fr --out runs/opus-en-fr   # downloads (needs a network)
    clearformer import marian ./my-marian-folder --out runs/mine                    # a save_pretrained folder
    clearformer explain "I love you" --checkpoint runs/opus-en-fr

The run directory is an ordinary checkpoint: translate, explain, evaluate and serve read it. Only a name
written `hf:OWNER/NAME` is downloaded from the Hugging Face Hub (needs the `hf` extra); anything else is a
local folder. RUN must be new or empty, or a clearformer run replaced with --overwrite (store/lock.py).
(GPT-2 language models: `clearformer lm import gpt2`.)
"""

from __future__ import annotations

from pathlib import Path

from clearformer.interop.marian import import_marian
from clearformer.store.lock import owned_output
from clearformer.store.runs import mark_latest_if_default


def register(subparsers) -> None:
    p = subparsers.add_parser("import", help="read a MarianMT translator (opus-mt) into a clearformer run")
    formats = p.add_subparsers(dest="import_format", metavar="{marian}")

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


def run_import_marian(args) -> int:
    with owned_output(Path(args.out), args.overwrite, "import marian"):
        out = import_marian(args.source, Path(args.out))
    mark_latest_if_default(out)  # only a run inside runs/: --out elsewhere writes nothing else
    print(f"imported {args.source} into {out}; try: clearformer translate \"Hello\" --checkpoint {out}")
    return 0
