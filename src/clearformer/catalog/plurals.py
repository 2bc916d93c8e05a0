"""Plural forms: which msgstr[n] of a catalogue gets the singular translation, and which the plural.

The model translates an entry's `msgid` ("%d file") and its `msgid_plural` ("%d files"). A catalogue's
`Plural-Forms` header says how many forms the language has and which form a number n takes
(`plural=(n > 1)` in French: 0 and 1 take form 0). The forms are chosen by evaluating that expression:
form k gets the singular translation when n = 1 takes form k and n = 2 does not (the form of "one"; in
Russian form 0 also holds 21, 31, ...: still the "one" form); every other form gets the plural
translation (a language with one form, `plural=0`, gets the plural: it covers every number).

`PLURAL_FORMS` gives the header of a target language for a template (.pot) that has none (the
expressions of GNU gettext's manual, "Plural forms").
"""

from __future__ import annotations

import gettext
import re
from collections.abc import Callable
from dataclasses import dataclass

from clearformer.errors import UserError

_ONE = "nplurals=1; plural=0;"
_TWO = "nplurals=2; plural=(n != 1);"
_TWO_FRENCH = "nplurals=2; plural=(n > 1);"
_SLAVIC = ("nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) "
           "? 1 : 2);")
PLURAL_FORMS = {
    **dict.fromkeys(("ja", "ko", "vi", "zh", "th", "id", "ms"), _ONE),
    **dict.fromkeys(("en", "de", "nl", "sv", "da", "no", "nb", "nn", "fo", "es", "it", "pt", "el", "bg", "fi",
                     "et", "hu", "he", "eo", "tr", "ca", "gl", "eu", "af", "is"), _TWO),
    **dict.fromkeys(("fr", "pt_BR", "oc", "br"), _TWO_FRENCH),
    **dict.fromkeys(("ru", "uk", "be", "sr", "hr", "bs"), _SLAVIC),
    "pl": "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "cs": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "sk": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "lt": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "lv": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n != 0 ? 1 : 2);",
    "ro": "nplurals=3; plural=(n==1 ? 0 : (n==0 || (n%100 > 0 && n%100 < 20)) ? 1 : 2);",
    "sl": "nplurals=4; plural=(n%100==1 ? 0 : n%100==2 ? 1 : n%100==3 || n%100==4 ? 2 : 3);",
    "ga": "nplurals=5; plural=n==1 ? 0 : n==2 ? 1 : (n>2 && n<7) ? 2 :(n>6 && n<11) ? 3 : 4;",
    "ar": "nplurals=6; plural=n==0 ? 0 : n==1 ? 1 : n==2 ? 2 : n%100>=3 && n%100<=10 ? 3 : n%100>=11 ? 4 : 5;",
}
SAMPLED = 1000  # the numbers a plural expression is evaluated on
_HEADER = re.compile(r"^\s*nplurals\s*=\s*(\d+)\s*;\s*plural\s*=\s*(.+?)\s*;?\s*$", re.S)


@dataclass(frozen=True)
class PluralForms:
    """A parsed Plural-Forms header: `count` forms, `form(n)` the form number n takes."""

    header: str
    count: int
    form: Callable[[int], int]

    def singular_forms(self, same_placeholders: bool = True) -> frozenset[int]:
        """The forms that get the singular translation (see the module docstring). When the singular source lacks
        a placeholder of the plural one ("an hour ago", "%(count)s hours ago"), only a form that n = 1 takes
        alone: msgfmt --check wants the plural's placeholders in a form that other numbers take too (Croatian
        form 0: 1, 21, 31...)."""
        one = self.form(1)
        if self.form(2) == one:
            return frozenset()
        if not same_placeholders and any(self.form(n) == one for n in range(2, SAMPLED)):
            return frozenset()
        return frozenset({one})


def is_template_value(header: str | None) -> bool:
    """A missing Plural-Forms, or a template's "nplurals=INTEGER; plural=EXPRESSION;"."""
    return not header or "INTEGER" in header or "EXPRESSION" in header


def parse_plural_forms(header: str, where: str) -> PluralForms:
    """"nplurals=2; plural=(n > 1);" -> PluralForms; a header gettext would refuse is a UserError."""
    match = _HEADER.match(header)
    # len() first: int() of thousands of digits is refused by Python itself (sys.int_info.str_digits_check_threshold)
    if not match or len(match.group(1)) > 2 or not 1 <= int(match.group(1)) <= 16:
        raise UserError(f"{where}: Plural-Forms {header!r} is not 'nplurals=N; plural=EXPRESSION;'")
    count = int(match.group(1))
    try:
        form = gettext.c2py(match.group(2))  # gettext's own parser: a C expression in n, nothing else
        wrong = [n for n in range(SAMPLED) if not 0 <= form(n) < count]
    except (ValueError, SyntaxError, RecursionError, ZeroDivisionError) as error:
        raise UserError(f"{where}: Plural-Forms expression {match.group(2)!r} does not evaluate ({error})") from None
    if wrong:
        raise UserError(f"{where}: Plural-Forms gives n={wrong[0]} form {form(wrong[0])}, but nplurals={count}")
    return PluralForms(header, count, form)


def language_plural_forms(language: str) -> str | None:
    """The Plural-Forms header of a language code ("fr", "pt_BR", "de_DE" falls back to "de"), or None."""
    return PLURAL_FORMS.get(language) or PLURAL_FORMS.get(language.split("_")[0].split("-")[0].lower())
