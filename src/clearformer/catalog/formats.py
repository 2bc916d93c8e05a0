"""What an entry's format flag makes a placeholder, and how a literal character is written in that format.

A gettext entry says how the program fills it in: `#, c-format`, `#, python-brace-format`, `#, qt-format`...
Masking (tokenize/placeholders.py) already knows the usual directives; a flag adds what its format has
beyond them (C's `%%`, `%'d` and `%<PRId64>`, Qt's `%L1`, Python's `%(name)*.*f`, `{{`), so every
directive of the entry is masked and copied exactly (generate/constraints.py).

What the model writes between the placeholders is literal text, and a format reads some literal
characters as directives: a French "100 %" in a `c-format` entry would be an invalid `% ` directive, and
`msgfmt --check-format` refuses the catalogue. `escape_literals` writes such characters as the format
writes a literal one (`%%`, `{{`, `''`) before the placeholders are put back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from clearformer.tokenize.placeholders import RESERVED_PATTERN, RESERVED_TOKENS

# C's printf as gettext checks it (flags with ' and I, * widths, positional $, length modifiers, %%),
# and the ISO C 99 <inttypes.h> macros gettext allows in a message (%<PRId64>).
C_DIRECTIVE = (r"%(?:\d+\$)?[-+ #0'I]*(?:\d+|\*(?:\d+\$)?)?(?:\.(?:\d+|\*(?:\d+\$)?))?"
               r"(?:(?:hh|h|ll|l|L|q|j|z|Z|t)?[diouxXeEfFgGaAcsSCpnm%]|<PRI\w+>)")
PYTHON_DIRECTIVE = r"%(?:\([^()]*\))?[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[hlL]?[diouxXeEfFgGcrsa%]"
BRACE_DIRECTIVE = r"\{\{|\}\}|\{(?:[^{}]|\{[^{}]*\})*\}"  # a field with fields in its spec is one: {0:>{1}}
QT_DIRECTIVE = r"%L?\d{1,2}"


@dataclass(frozen=True)
class Format:
    """A gettext format: the regexes of its directives (masked before translating) and the characters
    the model may write that the format would read as a directive, with how to write each literally."""

    name: str
    patterns: tuple[str, ...]
    literals: tuple[tuple[str, str], ...] = ()
    ordered: bool = False  # printf-like: the k-th directive takes the k-th argument, unless numbered or named


FORMATS = {fmt.name: fmt for fmt in (
    Format("c-format", (C_DIRECTIVE,), (("%", "%%"),), ordered=True),
    Format("objc-format", (r"%@", C_DIRECTIVE), (("%", "%%"),), ordered=True),
    Format("gcc-internal-format", (r"%[<>']|%q[A-Za-z]", C_DIRECTIVE), (("%", "%%"),), ordered=True),
    Format("gfc-internal-format", (r"%[CL]", C_DIRECTIVE), (("%", "%%"),), ordered=True),
    Format("php-format", (C_DIRECTIVE,), (("%", "%%"),), ordered=True),
    Format("lua-format", (C_DIRECTIVE,), (("%", "%%"),), ordered=True),
    Format("boost-format", (r"%\d+%", r"%\|[^|]*\|", C_DIRECTIVE), (("%", "%%"),), ordered=True),
    Format("python-format", (PYTHON_DIRECTIVE,), (("%", "%%"),), ordered=True),
    Format("python-brace-format", (BRACE_DIRECTIVE,), (("{", "{{"), ("}", "}}"))),
    Format("csharp-format", (BRACE_DIRECTIVE,), (("{", "{{"), ("}", "}}"))),
    # MessageFormat: '' is an apostrophe, and a single quote quotes up to the next one (or the end): "It's {0}
    # o'clock" has no argument, so the quoted span is copied whole, and the msgstr keeps the msgid's arguments.
    Format("java-format", (r"''", r"'[^']*(?:'|$)", r"\{\d+(?:,[^{}]*)?\}"), (("'", "''"),)),
    Format("qt-format", (QT_DIRECTIVE,)),
    Format("qt-plural-format", (r"%L?n", QT_DIRECTIVE)),
    Format("kde-format", (r"%\d{1,2}",)),
    Format("kde-kuit-format", (r"%\d{1,2}", r"</?[A-Za-z][^<>]*>")),
    Format("perl-brace-format", (r"\{\w+\}",)),
    Format("perl-format", (r"%(?:\d+\$)?[-+ #0]*(?:\d+|\*)?(?:\.\d+)?[hlqLV]?[csduoxXeEfgGbBpn%]",),
           (("%", "%%"),), ordered=True),
    Format("sh-format", (r"\$\{?[A-Za-z_]\w*\}?",)),
    Format("javascript-format", (r"%(?:\d+\$)?[-+ #0]*\d*(?:\.\d+)?[bcdoxXeEfsjO%]",)),
    Format("ycp-format", (r"%\d",)),
    Format("smalltalk-format", (r"%\d",)),
    Format("lisp-format", (r"~[^~\s]?[A-Za-z%&|~]",)),
    Format("scheme-format", (r"~[^~\s]?[A-Za-z%&|~]",)),
    Format("elisp-format", (r"%[-+ #0]*\d*(?:\.\d+)?[sdoxXefgcS%]",), (("%", "%%"),), ordered=True),
    Format("tcl-format", (r"%(?:\d+\$)?[-+ #0]*\d*(?:\.\d+)?[lh]?[cdiouxXeEfgGs%]",), (("%", "%%"),), ordered=True),
)}


def entry_formats(flags: Iterable[str]) -> tuple[Format, ...]:
    """The formats an entry's flags declare (`no-c-format` declares none); unknown flags are ignored."""
    return tuple(FORMATS[flag] for flag in flags if flag in FORMATS)


def format_patterns(formats: Iterable[Format]) -> tuple[str, ...]:
    """The directive regexes of `formats`, each once, in order (extra masking patterns: first match wins)."""
    return tuple(dict.fromkeys(pattern for fmt in formats for pattern in fmt.patterns))


_NUMBERED = re.compile(r"^%(?:\d+\$|\()")


def repair_placeholders(masked_translation: str, originals: tuple[str, ...], formats: Iterable[Format]
                        ) -> tuple[str, bool]:
    """A translation holding ｟ph{i}｠ tokens for the source's `originals`, made to hold each exactly once:
    a token the source has not (or a second copy) is dropped, a missing one is put at the end; where the
    format takes its arguments in order (printf without numbered or named directives), the tokens are
    renumbered in the order they come (the k-th directive gets the k-th argument). Returns (text, whether
    a token had to be added or dropped): with the decoding constraint (a run that masks placeholders)
    nothing is, so that is for older runs whose placeholders are no single pieces."""
    seen: set[int] = set()
    order: list[int] = []

    def keep(match: re.Match) -> str:
        index = int(match.group(1))
        if index >= len(originals) or index in seen:
            return ""
        seen.add(index)
        order.append(index)
        return match.group(0)

    text = RESERVED_PATTERN.sub(keep, masked_translation)
    missing = [i for i in range(len(originals)) if i not in seen]
    if missing:
        text = " ".join([text.rstrip(), *(RESERVED_TOKENS[i] for i in missing)]).strip()
        order += missing
    changed = bool(missing) or len(order) != len(RESERVED_PATTERN.findall(masked_translation))
    ordered = any(fmt.ordered for fmt in formats) and not any(_NUMBERED.match(o) for o in originals)
    if ordered and order != sorted(order):
        renumber = iter(sorted(order))
        text = RESERVED_PATTERN.sub(lambda match: RESERVED_TOKENS[next(renumber)], text)
    return re.sub(r"  +", " ", text).strip() if changed else text, changed


def escape_literals(masked_translation: str, formats: Iterable[Format]) -> str:
    """A translation whose placeholders are still ｟ph{i}｠ tokens: every character the formats read as a
    directive, in the text between the tokens (what the model wrote), written as a literal ("%" -> "%%")."""
    literals = dict(pair for fmt in formats for pair in fmt.literals)
    if not literals:
        return masked_translation
    pieces, start = [], 0
    for match in RESERVED_PATTERN.finditer(masked_translation):
        pieces.append(_escape(masked_translation[start:match.start()], literals))
        pieces.append(match.group(0))
        start = match.end()
    pieces.append(_escape(masked_translation[start:], literals))
    return "".join(pieces)


def _escape(text: str, literals: dict[str, str]) -> str:
    return re.sub("|".join(re.escape(c) for c in literals), lambda match: literals[match.group(0)], text)
