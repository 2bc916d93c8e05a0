"""Turn gettext messages (msgid -> msgstr) into clean sentence pairs.

The rules, in the order they run (each drop or change is counted in `counts`):

1. the header, translator credits and untranslated messages are skipped; the context is dropped;
2. a plural message gives two pairs: singular -> form 0, plural -> form 1;
3. a message with markup (`<b>`, `</a>`, `<br/>`, `&amp;`) is dropped;
4. accelerator marks (`_`, `&`, `~` before a letter or digit: `_Open`, `&Save`, `~Insert`) are
   removed, unless the word that holds them is found on both sides and is an identifier
   (`find_file`, `GTK_CAN_DEFAULT`, `__VA_OPT__`) or a Scheme format directive (`~a`);
5. whitespace is normalised (NFC, every run of Unicode spaces, tabs, newlines -> one space);
6. a long paragraph (over 25 words) is split into sentences when both sides split into as many;
7. a pair with identical sides, or a side with no letters once format specifiers are removed
   (`%s`, `%1`, `%(name)s`, `{0}`, `~a`), is dropped.

Duplicates are removed by the caller, across catalogues.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

from clearformer.data.mo import MoEntry
from clearformer.tokenize.sentences import LONG_PARAGRAPH_WORDS, split_sentences

TRANSLATOR_CREDITS = {"translator-credits", "translator_credits", "Your names", "Your emails"}
TRANSLATOR_CONTEXTS = {"NAME OF TRANSLATORS", "EMAIL OF TRANSLATORS"}

_MARKUP = re.compile(
    r"</[A-Za-z][\w:.-]*\s*>"                       # a closing tag: </b>, </a>, </qt>
    r"|<[A-Za-z][\w:.-]*(?:\s[^<>]*)?/>"            # a self-closing tag: <br/>, <nl/>
    r"|<(?:br|hr|img|meta|p|li|html|body)\b[^<>]*>"  # HTML tags often left unclosed
    r"|&(?:[A-Za-z]+|#\d+|#x[0-9A-Fa-f]+);"         # an entity: &amp; &lt; &#160;
)
# A word that may hold accelerator marks: letters, digits and the marks themselves.
_WORD = re.compile(r"[\w&~]+")
_ACCELERATOR = re.compile(r"[_&~](?=[^\W_])")
_DIRECTIVE = re.compile(r"~[a-z]")
_FORMAT_SPECIFIER = re.compile(
    r"%(?:\([\w.-]*\))?[-+ #0'<>]*(?:\d+\$)?\*?\d*(?:\.\*?\d*)?(?:hh|h|ll|l|L|q|j|z|t|I64)?[A-Za-z%<>]"
    r"|%\d+"                                         # Qt / KDE: %1
    r"|\{[\w.]*(?::[^{}]*)?\}"                       # Python / C#: {0}, {name}, {0:.2f}
    r"|~[a-z](?![^\W_])"                             # Scheme format directives (GnuCash): ~a, ~d
)
_LETTER = re.compile(r"[^\W\d_]")

def is_markup(text: str) -> bool:
    return _MARKUP.search(text) is not None


def _is_identifier(word: str) -> bool:
    """`find_file`, `GTK_CAN_DEFAULT`, `zh_CN`, `__VA_OPT__` yes; `Co_ntacts`, `C_A`, `_Open` no."""
    if len(re.findall(r"[_&~]", word)) >= 2:
        return True
    before, after = re.split(r"[_&~]", word)
    if len(before) < 2 or len(after) < 2:
        return False
    capitalised_word_cut = before[0].isupper() and before[1:].islower() and after.islower()
    return not capitalised_word_cut


def strip_accelerators(source: str, target: str) -> tuple[str, str, int]:
    """Remove accelerator marks from both sides; returns (source, target, how many marked words were kept).

    Kept: identifiers found on both sides (see `_is_identifier`) and Scheme format directives found
    on both sides (`~a`, `~d`: a `~` and one lower-case letter, as in GnuCash's reports).
    """
    if not (_ACCELERATOR.search(source) or _ACCELERATOR.search(target)):
        return source, target, 0  # most messages: nothing to do

    def marked_words(text: str) -> set[str]:
        return {word for word in _WORD.findall(text) if _ACCELERATOR.search(word)}

    kept = {word for word in marked_words(source) & marked_words(target)
            if _is_identifier(word) or _DIRECTIVE.fullmatch(word)}

    def strip(text: str) -> str:
        def one_word(match: re.Match) -> str:
            word = match.group(0)
            return word if word in kept else _ACCELERATOR.sub("", word)
        return _WORD.sub(one_word, text)

    return strip(source), strip(target), len(kept)


def normalise_whitespace(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def has_words(text: str) -> bool:
    """False when nothing but format specifiers, digits and symbols is left: '%s: %d', '%1 %'."""
    return _LETTER.search(_FORMAT_SPECIFIER.sub(" ", text)) is not None


def message_pairs(entry: MoEntry, counts: Counter) -> list[tuple[str, str]]:
    """Rules 1-2: the raw (msgid, msgstr) pairs of one message, context dropped."""
    counts["messages"] += 1
    if entry.msgid in TRANSLATOR_CREDITS or (entry.context or "") in TRANSLATOR_CONTEXTS:
        counts["dropped_translator_credits"] += 1
        return []
    if entry.msgid_plural is None:
        pairs = [(entry.msgid, entry.msgstr[0])]
    else:
        counts["plural_messages"] += 1
        pairs = [(entry.msgid, entry.msgstr[0])]
        if len(entry.msgstr) > 1:
            pairs.append((entry.msgid_plural, entry.msgstr[1]))
    kept = [(source, target) for source, target in pairs if target.strip()]
    counts["dropped_untranslated"] += len(pairs) - len(kept)
    return kept


def clean_pair(source: str, target: str, counts: Counter) -> list[tuple[str, str]]:
    """Rules 3-7 on one raw pair: zero, one or (after a sentence split) several clean pairs."""
    if is_markup(source) or is_markup(target):
        counts["dropped_markup"] += 1
        return []
    stripped_source, stripped_target, identifiers = strip_accelerators(source, target)
    if (stripped_source, stripped_target) != (source, target):
        counts["accelerators_removed"] += 1
    counts["identifiers_kept"] += identifiers
    source, target = normalise_whitespace(stripped_source), normalise_whitespace(stripped_target)

    pieces = [(source, target)]
    if len(source.split()) > LONG_PARAGRAPH_WORDS:
        source_sentences, target_sentences = split_sentences(source), split_sentences(target)
        if len(source_sentences) > 1 and len(source_sentences) == len(target_sentences):
            counts["paragraphs_split"] += 1
            pieces = list(zip(source_sentences, target_sentences, strict=True))
        elif len(source_sentences) > 1 or len(target_sentences) > 1:
            counts["paragraphs_kept_whole"] += 1

    clean = []
    for piece_source, piece_target in pieces:
        if piece_source == piece_target:
            counts["dropped_identical"] += 1
        elif not (has_words(piece_source) and has_words(piece_target)):
            counts["dropped_no_words"] += 1
        else:
            clean.append((piece_source, piece_target))
    return clean


def clean_messages(entries: list[MoEntry], counts: Counter) -> list[tuple[str, str]]:
    """All rules on one catalogue's messages, in order; duplicates are left to the caller."""
    pairs = []
    for entry in entries:
        for source, target in message_pairs(entry, counts):
            pairs.extend(clean_pair(source, target, counts))
    return pairs
