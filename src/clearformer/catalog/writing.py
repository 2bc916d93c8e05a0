"""Writing a catalogue back: the file's own text, with only what clearformer changed rewritten.

    text = catalogue_text(po)      po: what catalog/reading.py read, since filled (catalog/fill.py)

A translator's catalogue comes back byte for byte as it was, except where clearformer wrote: each entry it
filled gets its new msgstr (or msgstr[n]) and, where they changed, its flags line (`#, fuzzy, c-format`) and
translator comments; the header gets its changed fields (PO-Revision-Date, X-Generator; a template's
Language, Plural-Forms, charset). Every other byte stays where it was: escapes as the file wrote them
(`\\x41`, `\\101`), line wrapping, obsolete entries with their `#~|` lines, comments, blank lines, CRLF
line ends. What changed is written as GNU gettext's tools write it (a string wrapped at 79 columns after
spaces, one line per embedded newline), in the file's newline convention.

An entry whose msgid, msgctxt or previous msgid changed (clearformer never does it) is written whole by
polib, as are entries added to the catalogue; an entry removed from it is removed from the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polib

from clearformer.catalog.reading import Catalogue, Comment, RawEntry, entry_snapshot, header_snapshot

WIDTH = 79  # gettext's default (msgcat --width)
COMMENT_ORDER = ("#", "#.", "#:", "#,", "#|")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b",
            "\f": "\\f", "\v": "\\v"}
_TO_ESCAPE = re.compile(r'[\\"\n\t\r\a\b\f\v]')


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] with `text` (`order` breaks ties between insertions at one place)."""

    start: int
    end: int
    text: str
    order: int = 0


def escape(value: str) -> str:
    """A value as a PO string literal's body, as gettext writes it."""
    return _TO_ESCAPE.sub(lambda match: _ESCAPES[match.group(0)], value)


def render_field(keyword: str, value: str, prefix: str = "", width: int = WIDTH) -> list[str]:
    """`msgstr "..."` lines as msgcat writes them: one line if it fits and holds no inner newline, else
    `msgstr ""` and one string per line, broken after each newline and after spaces to fit `width`."""
    pieces = re.findall(r"[^\n]*\n|[^\n]+", value) or [""]
    single = f'{prefix}{keyword} "{escape(value)}"'
    if len(pieces) <= 1 and len(single) <= width:
        return [single]
    lines = [f'{prefix}{keyword} ""']
    for piece in pieces:
        lines += [f'{prefix}"{chunk}"' for chunk in _wrap(escape(piece), width - len(prefix) - 2)]
    return lines


def _wrap(escaped: str, width: int) -> list[str]:
    """An escaped string cut after spaces into chunks of at most `width` characters (a longer word stays
    whole, and an escape, which holds no space, is never cut); linear in the string's length."""
    chunks, start, length = [], 0, len(escaped)
    while length - start > width:
        cut = escaped.rfind(" ", start, start + width) + 1
        if cut <= start:  # a word longer than the width: whole, up to the space after it
            cut = escaped.find(" ", start + width) + 1 or length
        while cut < length and escaped[cut] == " " and cut - start < width:
            cut += 1
        chunks.append(escaped[start:cut])
        start = cut
    if start < length or not chunks:
        chunks.append(escaped[start:])
    return chunks


def catalogue_text(po: polib.POFile) -> str:
    """The catalogue's text: its source text with only what changed rewritten (see the module docstring); a
    catalogue not read from a file is written whole by polib."""
    source = po.source if isinstance(po, Catalogue) else None
    if source is None:
        text = po.__unicode__()
        return text.removeprefix("#\n") if not po.header else text
    edits: list[Edit] = []
    newline = source.newline
    header = source.raw.get(None)
    if header is not None:
        if header_snapshot(po) != source.snapshots[None]:
            edits += header_edits(po, header, source.text, newline)
    elif po.metadata:
        edits.append(Edit(0, 0, newline.join(new_header_lines(po)) + newline * 2))
    present = {id(entry) for entry in po}
    for entry in po:
        raw = source.raw.get(id(entry))
        if raw is not None and entry_snapshot(entry) != source.snapshots[id(entry)]:
            edits += entry_edits(entry, raw, source.snapshots[id(entry)], source.text, newline)
    for entry in source.order:
        if entry is not None and id(entry) not in present:
            raw = source.raw[id(entry)]
            edits.append(Edit(raw.start, _line_end(source.text, raw.end), ""))
    text = apply(source.text, edits)
    added = [entry for entry in po if id(entry) not in source.raw]
    if added:
        if text and not text.endswith("\n"):
            text += newline
        for entry in added:
            text += newline + entry.__unicode__(WIDTH).rstrip("\n").replace("\n", newline) + newline
    return text


def apply(text: str, edits: list[Edit]) -> str:
    """The text with every edit made (edits do not overlap)."""
    pieces, position = [], 0
    for edit in sorted(edits, key=lambda e: (e.start, e.order)):
        pieces.append(text[position:edit.start])
        pieces.append(edit.text)
        position = max(position, edit.end)
    pieces.append(text[position:])
    return "".join(pieces)


def _line_start(text: str, position: int) -> int:
    return text.rfind("\n", 0, position) + 1


def _line_end(text: str, position: int) -> int:
    """The position after the newline that ends the line holding `position` (the text's end if none)."""
    found = text.find("\n", position)
    return len(text) if found < 0 else found + 1


def comment_lines(kind: str, entry: polib.POEntry) -> list[str]:
    """An entry's comments of one kind, as gettext writes them."""
    if kind == "#":
        return [f"# {line}" if line else "#" for line in entry.tcomment.split("\n")] if entry.tcomment else []
    if kind == "#.":
        return [f"#. {line}" for line in entry.comment.split("\n")] if entry.comment else []
    if kind == "#:":
        references = [f"{name}:{line}" if line else name for name, line in entry.occurrences]
        return [f"#: {line}" for line in _wrap(" ".join(references), WIDTH - 3)] if references else []
    return [f"#, {', '.join(entry.flags)}"] if entry.flags else []


def comment_edits(kind: str, lines: list[str], raw: RawEntry, text: str, newline: str, order: int) -> list[Edit]:
    """Replace the entry's comments of `kind` with `lines` (where the first one was, or, if it had none,
    where gettext puts them: before the comments of a later kind, or before the msgctxt/msgid)."""
    old = [comment for comment in raw.comments if comment.kind == kind]
    rendered = newline.join(lines)
    if old:
        first, rest = old[0], old[1:]
        edits = [Edit(first.span.start, first.span.end, rendered, order) if lines
                 else Edit(first.span.start, _line_end(text, first.span.end), "", order)]
        return edits + [Edit(c.span.start, _line_end(text, c.span.end), "", order) for c in rest]
    if not lines:
        return []
    later = [c for c in raw.comments if COMMENT_ORDER.index(c.kind) > COMMENT_ORDER.index(kind)]
    anchor = later[0].span.start if later else _line_start(text, raw.fields[0].span.start)
    return [Edit(anchor, anchor, rendered + newline, order)]


def entry_edits(entry: polib.POEntry, raw: RawEntry, snapshot: tuple, text: str, newline: str) -> list[Edit]:
    """The edits that write what changed in one entry."""
    msgid, msgctxt, msgid_plural, msgstr, msgstr_plural, tcomment, comment, occurrences, flags, *rest = snapshot
    *previous, obsolete = rest
    if (entry.msgid, entry.msgctxt, entry.msgid_plural, entry.obsolete) != (msgid, msgctxt, msgid_plural, obsolete) \
            or [entry.previous_msgctxt, entry.previous_msgid, entry.previous_msgid_plural] != previous:
        whole = entry.__unicode__(WIDTH).rstrip("\n").replace("\n", newline)
        return [Edit(raw.start, raw.end, whole)]
    edits: list[Edit] = []
    for order, (kind, old) in enumerate((("#", tcomment), ("#.", comment), ("#:", occurrences), ("#,", flags))):
        new = {"#": entry.tcomment, "#.": entry.comment, "#:": list(entry.occurrences), "#,": list(entry.flags)}[kind]
        if new != old:
            edits += comment_edits(kind, comment_lines(kind, entry), raw, text, newline, order)
    if (entry.msgstr, dict(entry.msgstr_plural)) != (msgstr, msgstr_plural):
        strings = [field for field in raw.fields if field.name == "msgstr"]
        if entry.msgstr_plural or entry.msgid_plural:
            lines = [line for index in sorted(entry.msgstr_plural)
                     for line in render_field(f"msgstr[{index}]", entry.msgstr_plural[index])]
        else:
            lines = render_field("msgstr", entry.msgstr)
        edits.append(Edit(strings[0].span.start, strings[-1].span.end, newline.join(lines), 10))
    return edits


def header_lines(po: polib.POFile, original: str) -> str:
    """The header's msgstr: the original's lines in their order, each changed field's value replaced, removed
    fields dropped, new fields appended."""
    metadata = dict(po.metadata)
    lines = []
    for line in original.split("\n"):
        name, colon, _ = line.partition(":")
        key = name.strip()
        if colon and key:
            if key not in metadata:
                continue
            lines.append(f"{key}: {metadata.pop(key)}")
        elif line:
            lines.append(line)
    lines += [f"{key}: {value}" for key, value in metadata.items()]
    return "".join(f"{line}\n" for line in lines)


def header_edits(po: polib.POFile, raw: RawEntry, text: str, newline: str) -> list[Edit]:
    """The header's changed fields, flags (a template's `#, fuzzy` dropped) and comments."""
    fields, fuzzy, comments = header_snapshot(po)
    old_fields, old_fuzzy, old_comments = po.source.snapshots[None]
    edits: list[Edit] = []
    if comments != old_comments:
        holder = polib.POEntry(tcomment=po.header)
        edits += comment_edits("#", comment_lines("#", holder), raw, text, newline, 0)
    if fuzzy != old_fuzzy:
        flags = [flag for c in raw.comments if c.kind == "#," for flag in _flags(c)]
        flags = [flag for flag in flags if flag != "fuzzy"] if not fuzzy else ["fuzzy", *flags]
        edits += comment_edits("#,", [f"#, {', '.join(flags)}"] if flags else [], raw, text, newline, 1)
    if fields != old_fields:
        strings = [field for field in raw.fields if field.name == "msgstr"]
        value = header_lines(po, strings[0].value)
        edits.append(Edit(strings[0].span.start, strings[-1].span.end,
                          newline.join(render_field("msgstr", value, width=10**9) if value else ['msgstr ""']), 10))
    return edits


def _flags(comment: Comment) -> list[str]:
    return [flag.strip() for flag in comment.text.split(",") if flag.strip()]


def new_header_lines(po: polib.POFile) -> list[str]:
    """A header for a catalogue that had none."""
    comments = comment_lines("#", polib.POEntry(tcomment=po.header)) if po.header else []
    flags = ["#, fuzzy"] if po.metadata_is_fuzzy else []
    value = header_lines(po, "")
    return [*comments, *flags, 'msgid ""', *render_field("msgstr", value, width=10**9)]
