"""Placeholders in software strings: the parts of a message a translation must copy exactly.

A gettext catalogue's "Deleted %d files in %s" is filled in by the program at run time; a
translation that drops or changes `%d` or `%s` breaks it (a crash in C, a wrong message elsewhere).
`find(text)` lists them in order:

    printf        %s %d %5.2f %ld %zu %1$s %02d      (C, Python's %-formatting)
    named printf  %(name)s
    %-words       %PRODUCTNAME %MOD1 %L %qs %1 %D%   (LibreOffice, Qt, GCC's diagnostics)
    braces        {0} {} {name} ${name}              (Python's str.format, C#, shells)
    markup        <b> </b> <br/> <a href="...">      (HTML tags the data uses; `<file>` in a usage
                                                      line is a word the translator may translate)
    entities      &amp; &lt; &#160;
    escapes       \\n \\t \\"                          (a literal backslash sequence in the message)

`placeholder_score` is the share of sentences whose translation holds exactly the placeholders
of its source (the same multiset, order free: French may reorder `%1$s` and `%2$s`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

HTML_TAGS = ("a|abbr|b|big|blockquote|br|code|div|em|font|h[1-6]|hr|i|img|kbd|li|ol|p|pre|s|small|span|"
             "strong|sub|sup|table|td|th|tr|tt|u|ul")
PATTERN = re.compile("|".join((
    r"%\([A-Za-z_]\w*\)[-+#0 ]*\d*(?:\.\d+)?[sdifrxXeEgGc]",  # %(name)s
    r"%(?:\d+\$)?[-+#0]?\d*(?:\.\d+)?(?:ll|l|h|z|j|t)?[sdiufFeEgGxXoc@]",  # %s %5.2f %1$s %lld
    r"%[A-Za-z][A-Za-z0-9_]*%?",  # %PRODUCTNAME %MOD1 %qs
    r"%\d+",  # Qt's %1
    r"\$?\{[A-Za-z_0-9][\w.]*\}|\{\}",  # {0} {name} ${name} {}
    rf"(?i:</?(?:{HTML_TAGS})(?:\s[^<>]*)?/?>)",  # <b> </b> <br/>
    r"&(?:[A-Za-z]+|#\d+|#x[0-9A-Fa-f]+);",  # &amp; &#160;
    r"\\[nt\"]",  # \n \t \"
)))


def find(text: str) -> list[str]:
    """The placeholders of `text`, in order: find("Delete %d files from {0}?") -> ['%d', '{0}']."""
    return PATTERN.findall(text)


def same_placeholders(source: str, translation: str) -> bool:
    """True when the translation holds exactly the source's placeholders (as a multiset)."""
    return Counter(find(source)) == Counter(find(translation))


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
