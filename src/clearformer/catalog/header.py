"""A filled catalogue's header, as gettext's tools leave it (msginit for a template, msgmerge for the rest).

- every catalogue: `PO-Revision-Date` now, `X-Generator: clearformer VERSION`, `charset=UTF-8` (the file is
  written in UTF-8);
- a template (.pot: xgettext's `charset=CHARSET`, `nplurals=INTEGER`, or any extractor's
  `PO-Revision-Date: YEAR-MO-DA HO:MI+ZONE`, as Babel's `pybabel extract` writes it with `charset=utf-8` and
  no Plural-Forms): also `Language` and the target language's `Plural-Forms`, and its header's `#, fuzzy`
  flag dropped, as msginit does (plain `msgfmt` skips a fuzzy header, and the .mo would have no charset and
  no plural forms).

The target language is the catalogue's `Language`, else the run's (its corpus's manifest), else
`--languages SRC:TGT`: an imported run records none, and a template with plural entries then needs the flag.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

import polib

from clearformer import __version__
from clearformer.catalog.plurals import PluralForms, is_template_value, language_plural_forms, parse_plural_forms
from clearformer.errors import UserError

TEMPLATE_DATE = "YEAR-MO-DA"  # what xgettext and Babel write in a template's PO-Revision-Date


class Settings(Protocol):
    """What this module reads of fill.CatalogueSettings: the run's target language (None: not known)."""

    @property
    def language(self) -> str | None: ...


def is_template(metadata: dict[str, str]) -> bool:
    """A template's header: an extractor's placeholders, not a translator's values."""
    return ("CHARSET" in metadata.get("Content-Type", "") or "INTEGER" in metadata.get("Plural-Forms", "")
            or metadata.get("PO-Revision-Date", "").startswith(TEMPLATE_DATE))


def target_language(po: polib.POFile, settings: Settings) -> str | None:
    """The catalogue's Language, else the run's target language."""
    language = po.metadata.get("Language", "").strip()
    return language or settings.language


def catalogue_plural_forms(po: polib.POFile, settings: Settings, where: str) -> PluralForms:
    """The catalogue's Plural-Forms, or (a template's) the target language's."""
    header = po.metadata.get("Plural-Forms")
    if is_template_value(header):
        language = target_language(po, settings)
        if language is None:
            raise UserError(f"{where}: the catalogue has plural entries but no Plural-Forms header and no Language, "
                            f"and the run records no target language: give --languages SRC:TGT (e.g. en:pt), or "
                            f"add the Plural-Forms header")
        header = language_plural_forms(language)
        if header is None:
            raise UserError(f"{where}: the catalogue has plural entries but no Plural-Forms header, and clearformer "
                            f"does not know the plural forms of {language!r}: add the header (gettext manual, "
                            f"'Plural forms')")
    return parse_plural_forms(header, where)


def update_header(po: polib.POFile, settings: Settings, plural_forms: PluralForms | None,
                  now: datetime | None = None) -> None:
    """As gettext's tools do (see the module docstring)."""
    metadata = po.metadata
    template = is_template(metadata)
    language = target_language(po, settings)
    if language and not metadata.get("Language", "").strip():
        metadata["Language"] = language
    if is_template_value(metadata.get("Plural-Forms")) and (template or plural_forms is not None):
        known = plural_forms.header if plural_forms else (language_plural_forms(language) if language else None)
        if known:
            metadata["Plural-Forms"] = known
    metadata["Content-Type"] = "text/plain; charset=UTF-8"  # the file is written in UTF-8
    if metadata.get("Content-Transfer-Encoding", "ENCODING") == "ENCODING":
        metadata["Content-Transfer-Encoding"] = "8bit"
    if "MIME-Version" not in metadata:
        metadata["MIME-Version"] = "1.0"
    metadata["PO-Revision-Date"] = (now or datetime.now().astimezone()).strftime("%Y-%m-%d %H:%M%z")
    metadata["X-Generator"] = f"clearformer {__version__}"
    if template:
        po.metadata_is_fuzzy = False  # polib keeps the header's flags here
    po.encoding = "utf-8"
