"""The languages a run translates between, read from what the run records about its data.

An imported run records them in its meta.json, "languages": {"source": "en", "target": "pt"} (Firefox's
students: the package's direction; Marian's: its name, opus-mt-en-de: `languages_from_name`). A trained
run's meta.json names its data: "dataset": "toy" (the built-in English -> French phrases), "data_dir"
(a corpus folder, whose manifest.json has "languages": {"source": "en", "target": "fr"}, as every corpus
`clearformer data build` writes for a recipe), or "data_files" (a user's files: no languages recorded).
A Firefox import made before the languages were recorded says its direction in provenance.json.
`translate --po` needs the target language for a template's header, `serve`'s LibreTranslate API for
/languages; both take --languages SRC:TGT where the run does not say.

Clients spell a language in several ways: `pt`, `pt-BR`, `pt_BR`, `pt-Latn-BR`, `PT`. `Languages.matches`
takes a code as Weblate does before it sends one (weblate/machinery/base.py, 5.x: the code, then with "_"
as "-", then the language alone): a region or script the model does not name falls back to its language, so a
model of `pt` answers `pt-BR` and `pt_BR`; a model of `pt_BR` answers `pt-BR` too, but not `pt-PT`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from clearformer.errors import UserError
from clearformer.store.safeio import read_json_object

# English names of the language codes a corpus may declare (LibreTranslate's /languages shows names).
NAMES = {
    "ar": "Arabic", "bg": "Bulgarian", "ca": "Catalan", "cs": "Czech", "da": "Danish", "de": "German",
    "el": "Greek", "en": "English", "eo": "Esperanto", "es": "Spanish", "et": "Estonian", "eu": "Basque",
    "fi": "Finnish", "fr": "French", "ga": "Irish", "gl": "Galician", "he": "Hebrew", "hu": "Hungarian",
    "id": "Indonesian", "it": "Italian", "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian",
    "nb": "Norwegian Bokmål", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "sk": "Slovak", "sl": "Slovenian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian",
    "vi": "Vietnamese", "zh": "Chinese",
}
_CODE = re.compile(r"^[a-z]{2,3}(?:[_-][A-Za-z]{2,4})?$")


@dataclass(frozen=True)
class Languages:
    """What a run translates: `source` -> `target`, as ISO 639 codes ("en", "fr", "pt_BR")."""

    source: str
    target: str

    def as_record(self) -> dict:
        """What a run's meta.json records: {"source": "en", "target": "pt"}."""
        return {"source": self.source, "target": self.target}

    def matches(self, code: str, side: str) -> bool:
        """Whether a client's `code` names this run's `side` ("source" or "target") language: see the module
        docstring (BCP 47 with Weblate's fallback)."""
        return code_matches(code, self.source if side == "source" else self.target)

    @staticmethod
    def parse(text: str, option: str = "--languages") -> Languages:
        """"en:fr" -> Languages("en", "fr"); anything else is a one-line UserError."""
        parts = text.split(":")
        if len(parts) != 2 or not all(_CODE.match(part) for part in parts):
            raise UserError(f"{option} {text!r}: give SOURCE:TARGET language codes, as en:fr")
        return Languages(parts[0], parts[1])


def bcp47(code: str) -> tuple[str, ...]:
    """A language code's subtags, lower case: "pt_BR", "pt-BR", "PT-br" -> ("pt", "br")."""
    return tuple(part for part in code.replace("_", "-").lower().split("-") if part)


def code_matches(code: str, model_code: str) -> bool:
    """A client's `code` against a model's: the same subtags, or the model's subtags a prefix of the client's
    (`pt-BR` -> `pt`; `zh-Hans-CN` -> `zh-Hans`, `zh`), as BCP 47 lookup falls back; Weblate's `zh_Hans`
    -> `zh` (its language_map) is that fallback too."""
    asked, model = bcp47(code), bcp47(model_code)
    if not asked or not model:
        return False
    return asked[: len(model)] == model


# Marian's names say their languages: Helsinki-NLP/opus-mt-en-de, opus-mt-tc-big-en-pt; a multilingual one
# (opus-mt-en-roa, opus-mt-mul-en) names a group, not a language, and records nothing.
_MARIAN_NAME = re.compile(r"opus-mt-(?:tc-(?:big|base)-)?([a-z]{2,3})-([a-z]{2,3})$")
GROUPS = frozenset({"aav", "afa", "alv", "art", "bat", "ber", "bnt", "ccs", "cel", "cpp", "cus", "dra", "euq", "fiu",
                    "gem", "gmq", "gmw", "grk", "iir", "inc", "ine", "itc", "jpx", "map", "mkh", "mul", "nic",
                    "phi", "poz", "roa", "sal", "sem", "sla", "tai", "trk", "urj", "zle", "zls", "zlw"})


def languages_from_name(name: str) -> Languages | None:
    """The languages a Marian model's name or folder says ("Helsinki-NLP/opus-mt-en-de", a Hub cache's
    ".../models--Helsinki-NLP--opus-mt-en-de/snapshots/<hash>" -> en:de), or None."""
    for part in reversed(Path(name).parts):
        match = _MARIAN_NAME.search(part.lower())
        if match is not None:
            return None if GROUPS & set(match.groups()) else Languages(*match.groups())
    return None


def name_of(code: str) -> str:
    return NAMES.get(code.split("_")[0].split("-")[0], code)


def _recorded(record) -> Languages | None:
    """{"source": "en", "target": "pt"} -> Languages, or None for anything else."""
    if not isinstance(record, dict):
        return None
    source, target = record.get("source"), record.get("target")
    if not all(isinstance(code, str) and _CODE.match(code) for code in (source, target)):
        return None
    return Languages(source, target)


def run_languages(meta: dict, folder: Path | None = None) -> Languages | None:
    """The languages a run's meta.json records (an import's own record, or its corpus's manifest), or None when
    it does not say; `folder`: the run's folder, whose provenance.json an older Firefox import says it in."""
    recorded = _recorded(meta.get("languages"))
    if recorded is not None:
        return recorded
    if folder is not None and (Path(folder) / "provenance.json").is_file():
        try:
            package = read_json_object(Path(folder) / "provenance.json").get("package")
        except UserError:
            package = None
        direction = package.get("direction") if isinstance(package, dict) else None
        if isinstance(direction, str) and direction.count("-") == 1:
            return _recorded(dict(zip(("source", "target"), direction.split("-"), strict=True)))
    if meta.get("dataset") == "toy":
        return Languages("en", "fr")
    data_dir = meta.get("data_dir")
    if not isinstance(data_dir, str):
        return None
    manifest = Path(data_dir) / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        return _recorded(read_json_object(manifest).get("languages"))
    except UserError:
        return None  # a damaged manifest of a corpus the run was trained on says nothing about the model
