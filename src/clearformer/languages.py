"""The languages a run translates between, read from what the run records about its data.

A run's meta.json names its data: "dataset": "toy" (the built-in English -> French phrases), "data_dir"
(a corpus folder, whose manifest.json has "languages": {"source": "en", "target": "fr"}, as every corpus
`clearformer data build` writes for a recipe), or "data_files" (a user's files: no languages recorded).
`translate --po` needs the target language for a template's header, `serve`'s LibreTranslate API for
/languages; both take --languages SRC:TGT where the run does not say.
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

    @staticmethod
    def parse(text: str, option: str = "--languages") -> Languages:
        """"en:fr" -> Languages("en", "fr"); anything else is a one-line UserError."""
        parts = text.split(":")
        if len(parts) != 2 or not all(_CODE.match(part) for part in parts):
            raise UserError(f"{option} {text!r}: give SOURCE:TARGET language codes, as en:fr")
        return Languages(parts[0], parts[1])


def name_of(code: str) -> str:
    return NAMES.get(code.split("_")[0].split("-")[0], code)


def run_languages(meta: dict) -> Languages | None:
    """The languages a run's meta.json records (through its corpus's manifest), or None when it does not say."""
    if meta.get("dataset") == "toy":
        return Languages("en", "fr")
    data_dir = meta.get("data_dir")
    if not isinstance(data_dir, str):
        return None
    manifest = Path(data_dir) / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        recorded = read_json_object(manifest).get("languages")
    except UserError:
        return None  # a damaged manifest of a corpus the run was trained on says nothing about the model
    if not isinstance(recorded, dict):
        return None
    source, target = recorded.get("source"), recorded.get("target")
    if not all(isinstance(code, str) and _CODE.match(code) for code in (source, target)):
        return None
    return Languages(source, target)
