"""Placeholders in software strings: the parts of a message a translation must copy exactly.

A gettext catalogue's "Deleted %d files in %s" is filled in by the program at run time; a
translation that drops or changes `%d` or `%s` breaks it (a crash in C, a wrong message elsewhere).
`find(text)` lists them in order:

    printf        %s %d %5.2f %ld %zu %1$s %02d      (C, Python's %-formatting)
    named printf  %(name)s
    %-words       %PRODUCTNAME %MOD1 %L %qs %1 %D%   (LibreOffice, Qt, GCC's diagnostics)
    braces        {0} {} {name} ${name}              (Python's str.format, C#, shells)
    MT clients'   [X15X] <x id="3"/> <x id="3"></x>  (Weblate's stand-ins for a placeholder, DeepL-style)
    markup        <b> </b> <br/> <a href="...">      (HTML tags the data uses; `<file>` in a usage
                                                      line is a word the translator may translate)
    entities      &amp; &lt; &#160;
    escapes       \\n \\t \\"                          (a literal backslash sequence in the message)

`placeholder_score` is the share of sentences whose translation holds exactly the placeholders
of its source (the same multiset, order free: French may reorder `%1$s` and `%2$s`).

Masking (`mask`, `mask_target`, `restore`): a run trained with masking (its tokenizer's
`mask_placeholders` fact, tokenize/facts.py) never sees a placeholder's spelling. Before the model,
the i-th placeholder of a sentence becomes the reserved token `｟ph{i}｠`; after decoding, each
reserved token is replaced by the exact source text it stands for (byte for byte):

    mask("Copy %1$s to %2$s?")            -> Masked("Copy ｟ph0｠ to ｟ph1｠?", ("%1$s", "%2$s"))
    mask_target("Copier %2$s vers %1$s ?", ("%1$s", "%2$s")) -> "Copier ｟ph1｠ vers ｟ph0｠ ?"
    restore(masked, "Copier ｟ph1｠ vers ｟ph0｠ ?")           -> "Copier %2$s vers %1$s ?"

The model then copies a reserved token, one piece in every vocabulary (a SentencePiece
user-defined symbol, a word of the word vocabulary), and decoding copies each exactly as often as
the source holds it (generate/constraints.py). A placeholder the tokenizer would have spelled in
digits and letters (`%.255s` -> `%` `.` `2` `5` `5` `s`) can then neither be mangled nor start a
loop of digits (BENCHMARKS.md, "Placeholders: masked before the model, restored after").

The spelling `｟ph0｠` uses U+FF5F/U+FF60 (fullwidth white parentheses), the protected-sequence
brackets of OpenNMT's tokenizer: no message of the en-fr-software corpus holds either character,
and a source that does hold a `｟...｠` span has that span masked and restored like a placeholder,
so even a literal `｟ph0｠` in a user's text comes back unchanged.

A user's own patterns (`train --placeholder-pattern`, kept in tokenizer.json) are Python `re` syntax,
checked when given: each alone, then all joined with the built-ins as masking joins them (a `(?i)` in
the middle, two groups named alike: refused in one line naming the pattern). They are matched by the
`regex` package, whose `timeout=` bounds the CPU time of one input (`PATTERN_SECONDS`): a pattern with
catastrophic backtracking (`(a|aa)+$`) ends in a one-line error naming it and the input, never a hang.
The built-ins alone keep the standard `re` (linear on every input, and faster: BENCHMARKS.md,
"Placeholder patterns: a time bound per input"). A sentence holds at most `RESERVED_COUNT`
placeholders: more is a one-line error naming the limit (`TooManyPlaceholders`), never a silent drop.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import regex

from clearformer.errors import UserError

HTML_TAGS = ("a|abbr|b|big|blockquote|br|code|div|em|font|h[1-6]|hr|i|img|kbd|li|ol|p|pre|s|small|span|"
             "strong|sub|sup|table|td|th|tr|tt|u|ul")
PATTERN = re.compile("|".join((
    r"%\([A-Za-z_]\w*\)[-+#0 ]*\d*(?:\.\d+)?[sdifrxXeEgGc]",  # %(name)s
    r"%(?:\d+\$)?[-+#0]?\d*(?:\.\d+)?(?:ll|l|h|z|j|t)?[sdiufFeEgGxXoc@]",  # %s %5.2f %1$s %lld
    # %PRODUCTNAME %MOD1 %qs %NAME%; a closing % that starts the next placeholder is left to it
    # ("%r%s" is %r and %s, "%qs%qD" is %qs and %qD), or masking would cut the "s" off a program's string.
    r"%[A-Za-z][A-Za-z0-9_]*(?:%(?!(?:\d+\$)?[-+#0]*\d*(?:\.\d+)?[A-Za-z(]|\d))?",
    r"%\d+",  # Qt's %1
    # {0} {name} ${name} {} {0!r} {:>10}; a field whose format spec holds fields is one placeholder as a whole
    # ({0!r:>{1}}, {name:{width}.{prec}f}): masking its inner field alone would lose the outer one
    r"\$?\{(?:[A-Za-z_0-9][\w.]*)?(?:![rsa])?(?::(?:[^{}\s]|\{[\w.]*\})*)?\}",
    r"\[X\d+X\]",  # Weblate's machinery placeholder: it replaces each placeholder by [X{n}X] before sending
    r'<x\s+id="\d+"\s*(?:/>|>\s*</x>)',  # DeepL-style: <x id="3"/>, Weblate's DeepL sends <x id="3"></x>
    rf"(?i:</?(?:{HTML_TAGS})(?:\s[^<>]*)?/?>)",  # <b> </b> <br/>
    r"&(?:[A-Za-z]+|#\d+|#x[0-9A-Fa-f]+);",  # &amp; &#160;
    r"\\[nt\"]",  # \n \t \"
)))


RESERVED_COUNT = 32  # reserved tokens ｟ph0｠..｟ph31｠; the training data has at most 23 placeholders a message
RESERVED_TOKENS = tuple(f"｟ph{i}｠" for i in range(RESERVED_COUNT))
RESERVED_PATTERN = re.compile(r"｟ph(\d+)｠")
# Any ｟...｠ span already in a text is protected too (masked, then restored unchanged).
_BRACKETED = r"｟[^｟｠\s]{1,40}｠"


def find(text: str) -> list[str]:
    """The placeholders of `text`, in order: find("Delete %d files from {0}?") -> ['%d', '{0}']."""
    return PATTERN.findall(text)


def same_placeholders(source: str, translation: str) -> bool:
    """True when the translation holds exactly the source's placeholders (as a multiset).

    Placeholders written side by side can read differently from how they read apart (a translation's
    "%NAME%s" against a source's "%NAME% ... %s"): so where the multisets of `find` differ, the source's
    own placeholder texts are counted in the translation instead (longest first, each taken out once
    counted), and what is left must hold no placeholder."""
    wanted = Counter(find(source))
    if Counter(find(translation)) == wanted:
        return True
    rest = translation
    for placeholder in sorted(wanted, key=len, reverse=True):
        if rest.count(placeholder) != wanted[placeholder]:
            return False
        rest = rest.replace(placeholder, "\0")
    return not find(rest)


# CPU seconds one input may take to match the user's patterns; the built-ins take microseconds a line
# (BENCHMARKS.md, "Placeholder patterns: a time bound per input"), so this is a bound on a runaway only.
PATTERN_SECONDS = 0.25


class PlaceholderError(UserError, ValueError):
    """A placeholder pattern that cannot be used, or a sentence masking cannot take; one line. `ValueError`
    callers (tokenizer.json loading) see it as one too."""


class PatternTimeout(PlaceholderError):
    def __init__(self, pattern: str, text: str) -> None:
        shown = text if len(text) <= 60 else text[:57] + "..."
        super().__init__(f"placeholder pattern {pattern!r} took more than {PATTERN_SECONDS} s of CPU on the input "
                         f"{shown!r} ({len(text):,} characters): a pattern that backtracks without end; "
                         f"write it without nested repetition")


class TooManyPlaceholders(PlaceholderError):
    def __init__(self, count: int, limit: int = RESERVED_COUNT) -> None:
        super().__init__(f"the sentence holds {count} placeholders; a masking model has {limit} reserved "
                         f"tokens (｟ph0｠..｟ph{limit - 1}｠), one a placeholder: split the sentence")


def check_patterns(patterns: Iterable[str]) -> tuple[str, ...]:
    """Extra placeholder regexes a user adds (`--placeholder-pattern`): each must compile, alone and joined
    with the built-ins and the patterns before it (as `masking_pattern` joins them), and must not match the
    empty string; ValueError (a PlaceholderError) names the first that fails."""
    checked: list[str] = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise PlaceholderError(f"a placeholder pattern must be a string, not {pattern!r}")
        try:
            re.compile(pattern)
        except re.error as error:
            raise PlaceholderError(f"placeholder pattern {pattern!r} is not a regular expression ({error})") from None
        try:
            if regex.compile(pattern).match("", timeout=PATTERN_SECONDS):
                raise PlaceholderError(f"placeholder pattern {pattern!r} matches the empty string")
        except TimeoutError:
            raise PatternTimeout(pattern, "") from None
        checked.append(pattern)
        try:  # `re` refuses what `regex` would quietly read otherwise: a mid-pattern (?i), a group name twice
            re.compile(joined(tuple(checked)))
            regex.compile(joined(tuple(checked)))
        except (re.error, regex.error) as error:
            raise PlaceholderError(f"placeholder pattern {pattern!r} cannot be joined with the built-in "
                                   f"placeholders{' and the patterns before it' if len(checked) > 1 else ''} "
                                   f"({error}); write flags scoped, as (?i:...), and each group name once") from None
    return tuple(checked)


def joined(extra: tuple[str, ...]) -> str:
    """A `｟...｠` span, then the user's patterns (first match wins), then `PATTERN`: one alternation."""
    return "|".join([_BRACKETED, *(f"(?:{p})" for p in extra), PATTERN.pattern])


@lru_cache(maxsize=32)
def masking_pattern(extra: tuple[str, ...] = ()):
    """What masking protects (`joined`): `re` for the built-ins alone, `regex` (with its timeout) for a
    user's patterns."""
    return regex.compile(joined(extra)) if extra else re.compile(joined(()))


def substitute(extra: tuple[str, ...], replace, text: str) -> str:
    """masking_pattern(extra).sub(replace, text), in at most PATTERN_SECONDS of CPU when there are user
    patterns; a PatternTimeout names the pattern that ran away (each tried alone) and the input."""
    pattern = masking_pattern(extra)
    if not extra:
        return pattern.sub(replace, text)
    try:
        return pattern.sub(replace, text, timeout=PATTERN_SECONDS, concurrent=True)  # the GIL let go
    except TimeoutError:
        raise PatternTimeout(runaway(extra, text), text) from None


def runaway(extra: tuple[str, ...], text: str) -> str:
    """The first of the user's patterns that cannot search `text` in time (the joined one when none alone)."""
    for pattern in extra:
        try:
            regex.compile(pattern).search(text, timeout=PATTERN_SECONDS)
        except TimeoutError:
            return pattern
    return " | ".join(extra)


@dataclass(frozen=True)
class Masked:
    """A sentence as a masking model reads it: `text` holds ｟ph{i}｠ where `originals[i]` was."""

    text: str
    originals: tuple[str, ...] = ()
    # What a ｟ph{i}｠ beyond the originals stands for: with a vocabulary not made for placeholders, the numeral
    # its stand-in piece spells (tokenize/standins.py); empty: it stays visible.
    spelled: tuple[str, ...] = ()

    @property
    def owes_copies(self) -> bool:
        """Whether decoding must copy this source's placeholder pieces exactly (generate/constraints.py):
        always, except where numerals stand in for placeholders and none was masked, since the numerals of
        such a sentence are its own, which a translation may write as it likes ("31.7" -> "31,7")."""
        return bool(self.originals) or not self.spelled


def mask(text: str, extra: tuple[str, ...] = (), limit: int = RESERVED_COUNT) -> Masked:
    """The i-th placeholder of `text` -> ｟ph{i}｠; more than `limit` (<= RESERVED_COUNT; fewer where a vocabulary
    has fewer stand-ins, tokenize/standins.py) of them: TooManyPlaceholders (a silent drop of the rest would lose
    them from the translation)."""
    originals: list[str] = []
    limit = min(limit, RESERVED_COUNT)

    def reserve(match) -> str:
        originals.append(match.group(0))
        return RESERVED_TOKENS[len(originals) - 1] if len(originals) <= limit else match.group(0)

    masked = substitute(extra, reserve, text)
    if len(originals) > limit:
        raise TooManyPlaceholders(len(originals), limit)
    return Masked(masked, tuple(originals))


def mask_target(target: str, originals: Sequence[str], extra: tuple[str, ...] = ()) -> str:
    """A training target masked as its source was: the k-th `%s` of the target becomes the token of the
    k-th `%s` of the source (so `%2$s ... %1$s` keeps its order); a placeholder the source lacks stays."""
    unused: dict[str, list[int]] = {}
    for index, original in enumerate(originals):
        unused.setdefault(original, []).append(index)

    def reserve(match) -> str:
        slots = unused.get(match.group(0))
        return RESERVED_TOKENS[slots.pop(0)] if slots else match.group(0)

    return substitute(extra, reserve, target)


def restore(masked: Masked, translation: str) -> str:
    """Each ｟ph{i}｠ of a translation -> the source text it stands for; one the source has no
    placeholder for (a model decoding without the constraint) stays visible as it is."""
    if not (masked.originals or masked.spelled):
        return translation

    def original(match: re.Match) -> str:
        index = int(match.group(1))
        if index < len(masked.originals):
            return masked.originals[index]
        return masked.spelled[index] if index < len(masked.spelled) else match.group(0)

    return RESERVED_PATTERN.sub(original, tag_spacing(masked, translation))


_OPENING_TAG = re.compile(r"<[A-Za-z][^<>]*(?<!/)>")
_CLOSING_TAG = re.compile(r"</[A-Za-z][^<>]*>")


def tag_spacing(masked: Masked, translation: str) -> str:
    """A tag keeps its source's spacing: an opening tag glued to the word after it in the source ("<b>Connections")
    is glued in the translation too (a model writes "｟ph0｠ Conexões": "<b> Conexões"), a closing tag glued to
    the word before it likewise."""
    for index, original in enumerate(masked.originals):
        token = RESERVED_TOKENS[index] if index < RESERVED_COUNT else None
        if token is None or token not in masked.text:
            continue
        at = masked.text.index(token)
        after, before = masked.text[at + len(token):at + len(token) + 1], masked.text[at - 1:at] if at else ""
        if _OPENING_TAG.fullmatch(original) and after and not after.isspace():
            translation = translation.replace(token + " ", token)
        elif _CLOSING_TAG.fullmatch(original) and before and not before.isspace():
            translation = translation.replace(" " + token, token)
    return translation


@dataclass
class PlaceholderScore:
    """How many sentences with placeholders in the source kept them exactly."""

    kept: int  # sentences whose translation has exactly the source's placeholders
    total: int  # sentences whose source has at least one placeholder

    @property
    def share(self) -> float:
        """kept / total (1.0 when no source has a placeholder)."""
        return self.kept / self.total if self.total else 1.0

    def __str__(self) -> str:
        if not self.total:
            return "placeholders: no source sentence has one"
        return f"placeholders kept exactly: {100 * self.share:.1f}% ({self.kept}/{self.total} sentences)"


def placeholder_score(sources: Sequence[str], translations: Sequence[str]) -> PlaceholderScore:
    """Score translations against their sources (same order, same count)."""
    if len(sources) != len(translations):
        raise ValueError(f"{len(translations)} translations for {len(sources)} sources")
    with_placeholders = [(s, t) for s, t in zip(sources, translations, strict=True) if find(s)]
    return PlaceholderScore(sum(same_placeholders(s, t) for s, t in with_placeholders), len(with_placeholders))


def frequent_placeholders(sentences: Iterable[str], min_count: int = 3, limit: int = 256) -> list[str]:
    """Placeholders seen at least `min_count` times, most frequent first (at most `limit`), without
    whitespace: the SentencePiece user-defined symbols that keep each one a single piece."""
    counts = Counter(p for sentence in sentences for p in find(sentence) if not any(c.isspace() for c in p))
    return [p for p, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])) if n >= min_count][:limit]
