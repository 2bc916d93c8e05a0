"""Reading a gettext catalogue as GNU gettext reads it: every byte accounted for, or one line saying where.

    po = read_catalogue(path)      a polib.POFile of polib.POEntry (the object model every part uses), which
                                   also remembers where each entry stands in the file's text (`Source`), so
                                   that catalog/writing.py rewrites only what changed

Why not polib's own reader: it rewrites valid escapes (`\\x41`, `\\101` come back as `\\\\x41`), forgets an
obsolete entry's `#~|` previous msgid, takes a `charset=` written anywhere in the file, and accepts what
msgfmt refuses (an unterminated string, silently truncated; `\\q`; a duplicate msgid; `msgstr[n]` without
`msgid_plural`). This lexer follows gettext's (gettext-tools/src/po-lex.c and po-gram.y): the same tokens,
the same escapes, the same refusals, each a one-line `UserError` `FILE:LINE: what msgfmt says` (the tests
compare each case with msgfmt's own verdict: tests/catalog/test_catalogue_reading.py).

The charset is the header's `Content-Type` only (the entry whose msgid is empty and has no msgctxt); a file
without one is read as UTF-8 (gettext reads it as ASCII, of which UTF-8 is a superset).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polib

from clearformer.errors import UserError
from clearformer.limits import MAX_TEXT_FILE_BYTES
from clearformer.store import safeio

# gettext's escapes (po-lex.c, control_sequence): these letters, 1 to 3 octal digits, \x and hex digits.
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "\\": "\\",
                   '"': '"'}
_ESCAPE = re.compile(r"\\(?:([ntbrfva\\\"])|([0-7]{1,3})|x([0-9A-Fa-f]+)|(.?))", re.S)
_TOKEN = re.compile(r'[ \t\r\f\v]*(?:(")|(msgctxt|msgid_plural|msgid|msgstr(?:\[\s*(\d+)\s*\])?|domain)'
                    r'(?![\w\[])|(\S))')
_STRING_BODY = re.compile(r'[^"\\\n]*(?:\\.[^"\\\n]*)*"')  # unrolled: linear, no backtracking stack
_CHARSET = re.compile(r"charset=([A-Za-z0-9_.:-]+)", re.I)
_NPLURALS = re.compile(r"nplurals\s*=\s*(\d+)")
_KEYWORD = re.compile(r"[A-Za-z_][\w\[\]]*")
PREVIOUS_FIELDS = ("msgctxt", "msgid", "msgid_plural")


@dataclass
class Span:
    """Where a part of an entry stands in the file's text: character offsets [start, end)."""

    start: int
    end: int


@dataclass
class Comment:
    """One comment line: its kind ("#", "#.", "#:", "#,", "#|"), its text after the kind, its span (the
    line, without its newline)."""

    kind: str
    text: str
    span: Span


@dataclass
class Field:
    """A keyword and its strings: `name` (msgctxt, msgid, msgid_plural, msgstr, msgstr[n]), the decoded
    value, its span (from the keyword to the last string's closing quote) and its line."""

    name: str
    parts: list[str]  # its strings' values (joined once: a message of 100,000 lines is read in linear time)
    span: Span
    line: int
    obsolete: bool = False
    index: int | None = None  # msgstr[index]

    @property
    def value(self) -> str:
        return "".join(self.parts)


@dataclass
class RawEntry:
    """An entry as the file holds it: its comments and fields, in order, and its span (from its first comment
    line to the end of its last msgstr)."""

    comments: list[Comment] = field(default_factory=list)
    fields: list[Field] = field(default_factory=list)
    previous: dict[str, list[str]] = field(default_factory=dict)
    start: int | None = None
    end: int = 0

    def get(self, name: str) -> Field | None:
        for found in self.fields:  # a loop, not next() over a generator: called for every field of every entry
            if found.name == name:
                return found
        return None

    @property
    def obsolete(self) -> bool:
        found = self.get("msgid")
        return bool(found and found.obsolete)

    @property
    def line(self) -> int:
        found = self.get("msgid")
        return found.line if found else 0


@dataclass
class Source:
    """The file as read: its text (decoded), its newline, and each entry's raw form (by the id of the POEntry
    made from it; the header's under None), with a snapshot of the entry's values at reading (what changed
    since is what catalog/writing.py rewrites)."""

    text: str
    newline: str
    charset: str
    raw: dict[int | None, RawEntry] = field(default_factory=dict)
    snapshots: dict[int | None, tuple] = field(default_factory=dict)
    order: list[polib.POEntry] = field(default_factory=list)


class Catalogue(polib.POFile):
    """A polib.POFile that remembers the text it was read from (`source`)."""

    source: Source | None = None


def read_catalogue(path: Path) -> Catalogue:
    """A .po or .pot file, read through the bounded reader and parsed as gettext parses it; anything msgfmt
    would refuse is a one-line UserError naming the file and the line."""
    data = safeio.read_bytes(path, MAX_TEXT_FILE_BYTES)
    return parse_catalogue(data, str(path))


def parse_catalogue(data: bytes, where: str) -> Catalogue:
    charset = header_charset(data, where)
    try:
        text = data.decode(charset)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        declared = _header_field(data, where) is not None
        name = "UTF-8" if charset == "utf-8" else charset
        why = f"not {name} text" + (" (the charset its header declares)" if declared else "")
        raise UserError(f"{where}:{line}: {why}") from None
    except UnicodeError as error:  # a codec that reads ASCII but not this text (idna)
        raise UserError(f"{where}: cannot be read as {charset} (the charset its header declares: {error})") from None
    newline = "\r\n" if "\r\n" in text[: text.find("\n") + 1 or len(text)] else "\n"
    entries = list(lex_entries(text, where, charset))
    check_entries(entries, where)
    po = build_catalogue(entries, Source(text, newline, charset))
    check_plural_count(po, entries, where)
    return po


def header_charset(data: bytes, where: str) -> str:
    """The charset the header's Content-Type names ("utf-8" when there is no header, or a template's
    "CHARSET"); an unknown or unusable one is a one-line UserError."""
    content_type = _header_field(data, where)
    found = _CHARSET.search(content_type or "")
    if not found or found.group(1).upper() == "CHARSET":
        return "utf-8"
    name = found.group(1)
    try:
        info = codecs.lookup(name)
    except LookupError:
        raise UserError(f"{where}: unknown charset {name!r} in the header's Content-Type") from None
    probe = 'msgid "a\\n" #, c-format: %s'
    try:  # a text charset that reads ASCII as ASCII, as every charset gettext supports does (not punycode)
        usable = probe.encode("ascii").decode(name) == probe
    except (UnicodeError, LookupError, ValueError, TypeError):  # LookupError: a codec for bytes, not text
        usable = False
    if not usable:
        raise UserError(f"{where}: charset {name!r} in the header's Content-Type is not a text charset "
                        f"gettext reads (use UTF-8)")
    return "utf-8" if info.name == "utf-8" else info.name


def _header_field(data: bytes, where: str) -> str | None:
    """The header's Content-Type value, read before the charset is known (its bytes are ASCII): the first
    entry, if its msgid is empty and it has no msgctxt."""
    try:
        text = data.decode("latin-1")
        for entry in lex_entries(text, where, "latin-1"):
            msgid, msgstr = entry.get("msgid"), entry.get("msgstr")
            if entry.get("msgctxt") is None and msgid is not None and msgid.value == "" and not msgid.obsolete:
                for line in (msgstr.value if msgstr else "").split("\n"):
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-type":
                        return value.strip()
                return None
            return None
    except UserError:
        return None  # the real reading says where
    return None


def decode_string(body: str, where: str, line: int, column: int, charset: str) -> str:
    """The value of a string literal's `body` (between its quotes): gettext's escapes; an escape gettext
    refuses is a one-line UserError. \\ooo and \\xHH give a byte of the file's charset, as in gettext."""
    if "\\" not in body:
        return body
    pieces: list[bytes] = []
    start = 0
    encode = "utf-8" if charset.lower() in ("utf-8", "utf8") else charset
    for match in _ESCAPE.finditer(body):
        pieces.append(_encode(body[start:match.start()], encode))
        simple, octal, hexa, other = match.groups()
        if simple is not None:
            pieces.append(_SIMPLE_ESCAPES[simple].encode())
        elif octal is not None:
            pieces.append(bytes([int(octal, 8) & 0xFF]))
        elif hexa is not None:
            pieces.append(bytes([int(hexa[-2:], 16)]))  # gettext keeps the low byte of a long \x escape
        else:
            at = column + match.start() + 2
            raise UserError(f"{where}:{line}:{at}: invalid control sequence \\{other} in a string (msgfmt "
                            f"refuses it; write \\\\ for a backslash)")
        start = match.end()
    pieces.append(_encode(body[start:], encode))
    try:
        return b"".join(pieces).decode(encode)
    except UnicodeError:
        raise UserError(f"{where}:{line}: an escape in a string makes it not {charset} text") from None


def _encode(text: str, charset: str) -> bytes:
    try:
        return text.encode(charset)
    except UnicodeError:  # read from this charset, so it encodes back, unless the codec is not a plain one
        return text.encode("utf-8", "surrogatepass")


def lex_entries(text: str, where: str, charset: str) -> Iterator[RawEntry]:
    """The entries of a catalogue's text, in order (po-gram.y's grammar); a syntax error is a UserError."""
    entry = RawEntry()
    current: Field | None = None  # the field continuation strings extend
    previous_field: str | None = None
    state = "start"  # start, ctxt, id, plural, str
    position = 0
    line_number = 0
    length = len(text)

    def fail(why: str) -> UserError:
        return UserError(f"{where}:{line_number}: not a gettext catalogue ({why})")

    def finish() -> RawEntry:
        nonlocal entry, current, state
        done = entry
        entry, current, state = RawEntry(), None, "start"
        return done

    while position < length:
        end = text.find("\n", position)
        end = length if end < 0 else end
        line = text[position:end]
        line_number += 1
        line_start = position
        position = end + 1
        stripped = line.strip(" \t\r\f\v")
        if not stripped:
            continue
        if line_number == 1 and stripped.startswith("\ufeff"):
            stripped = stripped[1:]
        content_start = line_start + (len(line) - len(line.lstrip(" \t\r\f\v\ufeff")))
        obsolete = False
        previous = False
        if stripped.startswith("#"):
            marker = stripped[:3] if stripped.startswith(("#~|",)) else stripped[:2]
            if marker.startswith("#~"):
                obsolete = True
                previous = marker == "#~|"
                body_offset = content_start + len(marker)
            elif marker == "#|":
                previous = True
                body_offset = content_start + 2
            else:
                if state in ("str",):
                    yield finish()
                elif state != "start":
                    raise fail("missing 'msgstr' section" if state in ("id", "plural") else "syntax error")
                kind = marker if marker in ("#.", "#:", "#,") else "#"
                body = stripped[len(kind):] if kind != "#" else stripped[1:]
                if entry.start is None:
                    entry.start = line_start
                entry.comments.append(Comment(kind, body.removeprefix(" ") if kind == "#" else body.strip(),
                                              Span(line_start, end - (1 if line.endswith("\r") else 0))))
                continue
        else:
            body_offset = content_start
        if previous:
            if state == "str":
                yield finish()
            elif state != "start":
                raise fail("syntax error")
            if entry.start is None:
                entry.start = line_start
            entry.comments.append(Comment("#|", text[body_offset:end].strip(),
                                          Span(line_start, end - (1 if line.endswith("\r") else 0))))
        scan = body_offset
        while True:
            match = _TOKEN.match(text, scan, end)
            if match is None:
                break
            quote, keyword, index, other = match.groups()
            column = match.start(1 if quote else 2 if keyword else 4) - line_start + 1
            if other is not None:
                word = _KEYWORD.match(text, match.start(4), end)
                if word:
                    raise fail(f"keyword {word.group(0)!r} unknown: a syntax error")
                raise fail(f"syntax error at column {column}: {other!r} is neither a keyword nor a string")
            if quote:
                closing = _STRING_BODY.match(text, match.end(), end)
                if closing is None:
                    raise fail("end-of-line within string: a string without its closing quote")
                body = text[match.end():closing.end() - 1]
                value = decode_string(body, where, line_number, column, charset)
                scan = closing.end()
                if previous:
                    if previous_field is None:
                        raise fail("syntax error: a string in a '#|' line without msgid before it")
                    entry.previous[previous_field].append(value)
                    continue
                if current is None:
                    raise fail("syntax error: a string without a keyword before it")
                if obsolete != current.obsolete:
                    raise fail("inconsistent use of #~ within an entry")
                current.parts.append(value)
                current.span.end = scan
                entry.end = scan
                continue
            scan = match.end()
            if previous:
                if keyword not in PREVIOUS_FIELDS:
                    raise fail(f"syntax error: {keyword} in a '#|' line")
                previous_field = keyword
                entry.previous[keyword] = []
                continue
            previous_field = None
            keyword_start = match.start(2)
            name = "msgstr" if index is not None else keyword
            if keyword == "domain":
                raise fail("a 'domain' directive, which msgfmt refuses")
            if name in ("msgctxt", "msgid"):
                if state == "str":
                    yield finish()
                elif name == "msgctxt" and state != "start" or name == "msgid" and state not in ("start", "ctxt"):
                    raise fail("missing 'msgstr' section" if state in ("id", "plural") else "syntax error")
                state = "ctxt" if name == "msgctxt" else "id"
            elif name == "msgid_plural":
                if state != "id":
                    raise fail("syntax error: msgid_plural not after a msgid")
                state = "plural"
            elif index is None:  # msgstr
                if state == "plural":
                    raise fail("syntax error: msgstr after msgid_plural (give msgstr[0], msgstr[1]...)")
                if state != "id":
                    raise fail("syntax error: msgstr not after a msgid")
                state = "str"
            else:
                if entry.get("msgid_plural") is None:
                    raise fail("missing 'msgid_plural' section (msgstr[n] belongs to a plural entry)")
                count = sum(1 for f in entry.fields if f.index is not None)
                if int(index) != count or state not in ("plural", "str"):
                    raise fail("plural form has wrong index")
                state = "str"
            if entry.start is None:
                entry.start = line_start
            current = Field(name, [], Span(keyword_start, scan), line_number, obsolete,
                            int(index) if index is not None else None)
            entry.fields.append(current)
            entry.end = scan
            if not _STRING_AHEAD.match(text, scan, end) and not _string_next(text, position):
                raise fail(f"syntax error: {name} without a string")
    if state == "str":
        yield finish()
    elif state != "start":
        raise fail("missing 'msgstr' section" if state in ("id", "plural") else "syntax error")


_STRING_AHEAD = re.compile(r'[ \t\r\f\v]*"')


def _string_next(text: str, position: int) -> bool:
    """Whether the next non-blank line starts with a string (a keyword's value on the following line)."""
    match = re.compile(r'[ \t\r\f\v\n]*(?:#~[ \t]*)?"').match(text, position)
    return match is not None


def check_entries(entries: list[RawEntry], where: str) -> None:
    """What msgfmt refuses across entries: two definitions of one message (msgctxt and msgid), obsolete ones
    included, a second header among them."""
    seen: dict[tuple[str | None, str], int] = {}
    for entry in entries:
        context = entry.get("msgctxt")
        key = (context.value if context else None, entry.get("msgid").value)
        if key in seen:
            what = "a second header (msgid \"\")" if key == (None, "") else "duplicate message definition"
            raise UserError(f"{where}:{entry.line}: {what} (the first is at line {seen[key]}; msgfmt refuses "
                            f"the file)")
        seen[key] = entry.line


def check_plural_count(po: Catalogue, entries: list[RawEntry], where: str) -> None:
    """msgfmt refuses an entry with more msgstr[n] than the header's nplurals."""
    found = _NPLURALS.search(po.metadata.get("Plural-Forms", ""))
    if not found or len(found.group(1)) > 4:
        return  # no header count (a template), or one parse_plural_forms refuses when it is needed
    count = int(found.group(1))
    for entry in entries:
        forms = [f for f in entry.fields if f.index is not None]
        if len(forms) > count:
            raise UserError(f"{where}:{forms[count].line}: msgstr[{count}], but the header's Plural-Forms says "
                            f"nplurals={count} (msgfmt refuses the file)")


def build_catalogue(entries: list[RawEntry], source: Source) -> Catalogue:
    """The polib objects of the raw entries; the header's fields become `metadata` (in the file's order)."""
    po = Catalogue(wrapwidth=79)
    po.source = source
    po.encoding = "utf-8"
    for raw in entries:
        entry = to_polib(raw)
        if entry.msgid == "" and entry.msgctxt is None and not entry.obsolete and None not in source.raw:
            po.header = entry.tcomment
            po.metadata = header_fields(entry.msgstr)
            po.metadata_is_fuzzy = list(entry.flags) if "fuzzy" in entry.flags else 0
            source.raw[None] = raw
            source.snapshots[None] = header_snapshot(po)
            source.order.append(None)
            continue
        po.append(entry)
        source.raw[id(entry)] = raw
        source.snapshots[id(entry)] = entry_snapshot(entry)
        source.order.append(entry)
    return po


def to_polib(raw: RawEntry) -> polib.POEntry:
    values = {f.name: f.value for f in raw.fields if f.index is None}
    plural = {f.index: f.value for f in raw.fields if f.index is not None}
    entry = polib.POEntry(msgid=values["msgid"], msgstr=values.get("msgstr", ""), msgctxt=values.get("msgctxt"),
                          msgid_plural=values.get("msgid_plural", ""), msgstr_plural=plural,
                          obsolete=raw.obsolete, linenum=raw.line)
    entry.tcomment = "\n".join(c.text for c in raw.comments if c.kind == "#")
    entry.comment = "\n".join(c.text for c in raw.comments if c.kind == "#.")
    for comment in raw.comments:
        if comment.kind == "#:":
            for occurrence in comment.text.split():
                name, _, line = occurrence.rpartition(":")
                entry.occurrences.append((name, line) if name and line.isdigit() else (occurrence, ""))
        elif comment.kind == "#,":
            entry.flags += [flag.strip() for flag in comment.text.split(",") if flag.strip()]
    previous = {name: "".join(parts) for name, parts in raw.previous.items()}
    entry.previous_msgctxt = previous.get("msgctxt")
    entry.previous_msgid = previous.get("msgid")
    entry.previous_msgid_plural = previous.get("msgid_plural")
    return entry


def header_fields(msgstr: str) -> dict[str, str]:
    """The header's "Name: value" lines, in order."""
    fields = {}
    for line in msgstr.split("\n"):
        name, colon, value = line.partition(":")
        if colon and name.strip():
            fields[name.strip()] = value.strip()
    return fields


def entry_snapshot(entry: polib.POEntry) -> tuple:
    return (entry.msgid, entry.msgctxt, entry.msgid_plural, entry.msgstr, dict(entry.msgstr_plural),
            entry.tcomment, entry.comment, list(entry.occurrences), list(entry.flags), entry.previous_msgctxt,
            entry.previous_msgid, entry.previous_msgid_plural, entry.obsolete)


def header_snapshot(po: polib.POFile) -> tuple:
    return (dict(po.metadata), bool(po.metadata_is_fuzzy), po.header)
