"""format=html: translate the words between the tags, then put every tag back where its words went.

    document = parse_html('<p>Click <b>Save</b> to keep &amp; close.</p>')
    document.runs                 [Run("Click Save to keep & close.", tags at their character offsets)]
    place_tags(run, translation, links)  -> 'Clique em <b>Salvar</b> para manter &amp; fechar.'
    document.render([...])        the block markup around each run, as the source had it

The standard library's `html.parser` reads the markup (a real parser: attributes with ">" in quotes,
comments, character references, unclosed tags all read as a browser's tokenizer reads them); each construct
keeps its exact source text, so a tag comes back byte for byte. Block-level tags (p, li, td, br, ...),
comments, and the contents of script, style, pre and textarea end a run: they stay where they are, and
the words between them are translated as one sentence each, as a line of plain text is. Inline tags (b, a,
em, span, Weblate's and DeepL's <x id="n"/>, ...) sit inside a run: the model translates the run's words
without them, and each tag goes back by the model's own alignment (the cross-attention links the why tools
compute, explain/attribution.py): an opening and its closing tag wrap the target words aligned to the source
words they wrapped; a tag that wraps nothing (img, <x/>) goes before the target word aligned to the word it
preceded. Nesting is kept (a child's words inside its parent's, siblings in order, not crossing), so the
output parses to the same tags. A character reference to a symbol (&amp; &lt; &nbsp; &#169;) stays in the
sentence as it is spelled, a placeholder the model copies exactly (with a run that masks placeholders); one to a
letter (caf&eacute;) is read as the letter, so the model reads the word, and written back as the source spelled
it; a "<" or "&" the translation adds is escaped.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

import torch

from clearformer.explain.attribution import alignments
from clearformer.record.trace import Hooks
from clearformer.tokenize import encode_source, mask_placeholders
from clearformer.tokenize.placeholders import mask_target

# Tags whose content is not running text: a run ends before and after each of them.
BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "body", "br", "caption", "dd", "details", "dialog", "div", "dl",
    "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "head",
    "header", "hr", "html", "legend", "li", "main", "meta", "nav", "ol", "option", "p", "section", "select",
    "summary", "table", "tbody", "td", "tfoot", "th", "thead", "title", "tr", "ul", "link",
})
RAW = frozenset({"script", "style", "pre", "textarea"})  # kept as they are, never translated
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                  "wbr"})
_WORD = re.compile(r"\S+")
_EDGE_PUNCTUATION = ".,;:!?…)]}»\"'”’"


@dataclass
class Tag:
    """An inline tag of a run: its exact `text`, its `name`, "open", "close" or "void", and for a pair the index
    of its other half in the run's tags."""

    text: str
    name: str
    kind: str
    offset: int  # where it was, in characters of the run's text
    partner: int | None = None


@dataclass
class Run:
    """Words to translate as one sentence: `text` (references read as characters), the inline `tags` at their
    offsets, and how the source spelled each referenced character."""

    text: str = ""
    tags: list[Tag] = field(default_factory=list)
    spelled: dict[str, str] = field(default_factory=dict)
    raw: str = ""  # its source text, kept where it holds no words

    @property
    def sentence(self) -> str:
        """What the model translates: the text without the spaces around it (kept as they were)."""
        return self.text.strip()

    @property
    def words(self) -> list[tuple[int, int]]:
        """The character spans of its words (whitespace-separated)."""
        return [match.span() for match in _WORD.finditer(self.text)]


@dataclass
class Document:
    """A format=html text: `parts` in order, each a string of markup kept as it is or the index of a run."""

    parts: list[str | int] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)

    def render(self, translated: list[str]) -> str:
        """The text with each run replaced by its translation (tags placed, references spelled)."""
        return "".join(part if isinstance(part, str) else translated[part] for part in self.parts)


class _Reader(HTMLParser):
    """html.parser's events -> a Document; each event's exact source text is the raw text from its start to
    the next event's start (`getpos`), so nothing is re-serialised."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=False)
        self.source = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.document = Document()
        self.events: list[tuple[int, str, str, str]] = []  # (offset, kind, name, decoded text)

    def _at(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def handle_starttag(self, tag, attrs):
        self.events.append((self._at(), "void" if tag in VOID else "open", tag, ""))

    def handle_startendtag(self, tag, attrs):
        self.events.append((self._at(), "void", tag, ""))

    def handle_endtag(self, tag):
        self.events.append((self._at(), "close", tag, ""))

    def handle_data(self, data):
        self.events.append((self._at(), "data", "", data))

    def handle_entityref(self, name):
        self.events.append((self._at(), "ref", "", html.unescape(f"&{name};")))

    def handle_charref(self, name):
        self.events.append((self._at(), "ref", "", html.unescape(f"&#{name};")))

    def handle_comment(self, data):
        self.events.append((self._at(), "block", "", ""))

    def handle_decl(self, decl):
        self.events.append((self._at(), "block", "", ""))

    handle_pi = handle_decl
    unknown_decl = handle_decl


def parse_html(text: str, keep_references: bool = True) -> Document:
    """A format=html text -> its Document (see the module docstring). `keep_references`: a reference to anything
    but a letter stays as it is spelled in the run's text (a model that masks placeholders copies it exactly:
    tokenize/placeholders.py); otherwise, and for letters, the run holds the character."""
    reader = _Reader(text)
    reader.feed(text)
    reader.close()
    events = reader.events
    document = Document()
    run = Run()
    raw_depth = 0

    def end_run() -> None:
        nonlocal run
        if run.text.strip():
            document.parts.append(len(document.runs))
            document.runs.append(run)
        elif run.text or run.tags:  # whitespace only: as the source had it
            document.parts.append(run.raw)
        run = Run()

    for number, (start, kind, name, decoded) in enumerate(events):
        end = events[number + 1][0] if number + 1 < len(events) else len(text)
        raw = text[start:end]
        if kind in ("open", "close") and name in RAW:
            raw_depth += 1 if kind == "open" else -1 if raw_depth else 0
            end_run()
            document.parts.append(raw)
            continue
        if raw_depth or kind == "block" or (kind != "data" and kind != "ref" and name in BLOCKS):
            end_run()
            document.parts.append(raw)
            continue
        if kind == "data":
            lines = raw.split("\n")
            for index, line in enumerate(lines):
                if index:
                    end_run()
                    document.parts.append("\n")
                run.text += line
                run.raw += line
            continue
        if kind == "ref" and (decoded.isalpha() or not keep_references):
            run.spelled[decoded] = raw  # a letter ("caf&eacute;"): the model reads the word
            run.text += decoded
        elif kind == "ref":
            run.text += raw  # a symbol (&amp; &lt; &nbsp; &copy;): a placeholder the model copies
        else:
            run.tags.append(Tag(raw, name, kind, len(run.text)))
        run.raw += raw
    end_run()
    for run in document.runs:
        pair_tags(run.tags)
    return document


def pair_tags(tags: list[Tag]) -> None:
    """Match each closing tag with the latest open one of its name; an unmatched tag is placed alone (void)."""
    stack: list[int] = []
    for index, tag in enumerate(tags):
        if tag.kind == "open":
            stack.append(index)
        elif tag.kind == "close":
            match = next((i for i in reversed(stack) if tags[i].name == tag.name), None)
            if match is None:
                tag.kind = "void"
                continue
            while stack and stack[-1] != match:  # an open tag never closed: placed alone
                tags[stack.pop()].kind = "void"
            stack.pop()
            tag.partner, tags[match].partner = match, index
    for index in stack:
        tags[index].kind = "void"


def _word_at(words: list[tuple[int, int]], offset: int, after: bool) -> int | None:
    """The word an opening tag at `offset` opens (after=True: the first ending after it, the word it sits in
    included), or the one a closing tag closes (the last starting before it)."""
    if after:
        return next((i for i, (_, end) in enumerate(words) if end > offset), None)
    return next((i for i in reversed(range(len(words))) if words[i][0] < offset), None)


def _inside(words: list[tuple[int, int]], offset: int) -> int | None:
    """The word `offset` falls strictly inside ("Ctrl|+S"), or None at a word's edge or between words."""
    return next((i for i, (start, end) in enumerate(words) if start < offset < end), None)


def _copied_positions(run: Run, translation: str, target_words: list[tuple[int, int]],
                      links: dict[int, list[int]]) -> dict[int, int]:
    """Tags inside one source word that the translation copies as it is ("Ctrl</kbd>+<kbd>S" -> "Ctrl+S"): each
    half's exact character position in the target (a tag index -> position), at the same place in the word."""
    source_words = run.words
    fixed: dict[int, int] = {}
    for index, tag in enumerate(run.tags):
        if tag.kind == "close":
            continue
        halves = [index] if tag.kind == "void" else [index, tag.partner]
        words = {_word_at(source_words, run.tags[h].offset, after=h == index) for h in halves}
        if len(words) != 1 or None in words or all(_inside(source_words, run.tags[h].offset) is None for h in halves):
            continue
        word = words.pop()
        start, end = source_words[word]
        text = run.text[start:end]
        candidates = links.get(word, []) + list(range(len(target_words)))
        target = next((j for j in candidates if text in translation[slice(*target_words[j])]), None)
        if target is None:
            continue
        base = target_words[target][0] + translation[slice(*target_words[target])].index(text)
        for half in halves:
            fixed[half] = base + run.tags[half].offset - start
    return fixed


def _target_span(source_words: range, links: dict[int, list[int]], count: int, scale: float) -> tuple[int, int]:
    """The target words aligned to any of `source_words` (first, last); with none aligned, the words at the
    same relative place."""
    aligned = [j for i in source_words for j in links.get(i, [])]
    if aligned:
        return min(aligned), max(aligned)
    guess = min(count - 1, max(0, round(source_words.start * scale)))
    return guess, guess


def place_tags(run: Run, translation: str, links: list[tuple[int, int]]) -> str:
    """The translation of `run` with its inline tags put back by the word `links` (source word i, target word j)
    and its referenced characters spelled as the source spelled them."""
    lead, trail = run.text[: len(run.text) - len(run.text.lstrip())], run.text[len(run.text.rstrip()):]
    return escape(lead, run.spelled) + _placed(run, translation, links) + escape(trail, run.spelled)


def _placed(run: Run, translation: str, links: list[tuple[int, int]]) -> str:
    source_words, target_words = run.words, [m.span() for m in _WORD.finditer(translation)]
    if not target_words:
        return "".join(tag.text for tag in run.tags) + escape(translation, run.spelled)
    by_source: dict[int, list[int]] = {}
    for i, j in links:
        by_source.setdefault(i, []).append(j)
    scale = len(target_words) / max(1, len(source_words))
    spans: dict[int, tuple[int, int]] = {}  # tag index -> target word span [first, last]; first > last: empty
    points: dict[int, int] = {}  # a void tag -> the target word it goes before (len: at the end)
    parents: dict[int, int | None] = {}
    stack: list[int] = []
    fixed = _copied_positions(run, translation, target_words, by_source)
    for index, tag in enumerate(run.tags):
        parent = stack[-1] if stack else None
        if index in fixed and tag.kind != "close":
            continue
        if tag.kind == "close":
            if stack and stack[-1] == tag.partner:
                stack.pop()
            continue
        parents[index] = parent
        if tag.kind == "open":
            stack.append(index)
            first = _word_at(source_words, tag.offset, after=True)
            last = _word_at(source_words, run.tags[tag.partner].offset, after=False)
            if first is not None and last is not None and first <= last:
                spans[index] = _target_span(range(first, last + 1), by_source, len(target_words), scale)
                continue
        word = _word_at(source_words, tag.offset, after=True)
        points[index] = len(target_words) if word is None else _target_span(
            range(word, word + 1), by_source, len(target_words), scale)[0]
    _nest(spans, points, parents, len(target_words))
    return _render(run, translation, target_words, spans, points, fixed)


def _nest(spans: dict[int, tuple[int, int]], points: dict[int, int], parents: dict[int, int | None],
          count: int) -> None:
    """Make the target spans nest as the source tags did: each inside its parent's, siblings in source order and
    not overlapping (a span squeezed to nothing stays, empty, where its words would have been)."""
    bounds: dict[int | None, tuple[int, int]] = {None: (0, count - 1)}
    cursor: dict[int | None, int] = {None: 0}
    for index in sorted(parents):
        parent = parents[index]
        low, high = bounds[parent]
        start_at = max(low, cursor[parent])
        if index in points:
            points[index] = min(max(points[index], start_at), high + 1)
            cursor[parent] = points[index]
            continue
        first, last = spans[index]
        first, last = max(first, start_at), min(last, high)
        if first > last:  # nothing left for it: an empty pair where it would start
            first, last = min(max(spans[index][0], start_at), high + 1), min(max(spans[index][0], start_at),
                                                                              high + 1) - 1
        spans[index] = (first, last)
        bounds[index] = (first, last)
        cursor[index] = first
        cursor[parent] = last + 1


def _render(run: Run, translation: str, target_words: list[tuple[int, int]], spans: dict[int, tuple[int, int]],
            points: dict[int, int], fixed: dict[int, int]) -> str:
    """The translation with the tags inserted at their words' edges: at one place, closing tags first
    (innermost first), then tags that wrap nothing, then opening tags (outermost first)."""
    inserts: dict[int, list[tuple[int, int, str]]] = {}  # character position -> (order, tie, text)

    def at(position: int, order: int, tie: int, text: str) -> None:
        inserts.setdefault(position, []).append((order, tie, text))

    end = len(translation)
    for index, (first, last) in spans.items():
        tag = run.tags[index]
        closing = run.tags[tag.partner].text
        if first > last:  # empty: both halves together, before word `first`
            position = target_words[first][0] if first < len(target_words) else end
            at(position, 1, index, tag.text + closing)
            continue
        start = _inner_start(translation, target_words[first])
        stop = _inner_stop(translation, target_words[last], run, tag)
        at(start, 2, index, tag.text)
        at(stop, 0, -index, closing)
    for index, word in points.items():
        at(target_words[word][0] if word < len(target_words) else end, 1, index, run.tags[index].text)
    for index, position in fixed.items():  # tags inside a copied word: where they were in it
        tag = run.tags[index]
        at(position, {"close": 0, "void": 1}.get(tag.kind, 2), -index if tag.kind == "close" else index, tag.text)
    # A tag never lands inside a character reference ("&nbsp" | ";" when a word's edge trims the ";"): after it.
    for reference in _REFERENCE.finditer(translation):
        for position in [p for p in inserts if reference.start() < p < reference.end()]:
            inserts.setdefault(reference.end(), []).extend(inserts.pop(position))
    out, previous = [], 0
    for position in sorted(inserts):
        out.append(escape(translation[previous:position], run.spelled))
        out.extend(text for _, _, text in sorted(inserts[position]))
        previous = position
    out.append(escape(translation[previous:], run.spelled))
    return "".join(out)


def _inner_start(translation: str, word: tuple[int, int]) -> int:
    """Where an opening tag goes before a word: after its opening quote or bracket."""
    start, stop = word
    while start < stop - 1 and translation[start] in "\"'“‘«([{¿¡":
        start += 1
    return start


def _inner_stop(translation: str, word: tuple[int, int], run: Run, opening: Tag) -> int:
    """Where a closing tag goes after a word: before its trailing punctuation, unless the source closed the tag
    after punctuation too ("<b>Save.</b>")."""
    start, stop = word
    closed_at = run.tags[opening.partner].offset
    if closed_at and run.text[closed_at - 1] in _EDGE_PUNCTUATION:
        return stop
    while stop > start + 1 and translation[stop - 1] in _EDGE_PUNCTUATION:
        stop -= 1
    return stop


_REFERENCE = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#\d+|#[xX][0-9A-Fa-f]+);")


def escape(text: str, spelled: dict[str, str]) -> str:
    """Translated words as HTML: a character the source wrote as a reference, as it wrote it; a reference kept as
    written; a "<" or "&" the source did not write as one, escaped (the output must parse to the source's tags)."""
    out, position = [], 0
    for match in [*_REFERENCE.finditer(text), None]:
        stretch = text[position: match.start() if match else len(text)]
        out.extend(spelled.get(char, {"<": "&lt;", "&": "&amp;"}.get(char, char)) for char in stretch)
        if match:
            out.append(match.group(0))
            position = match.end()
    return "".join(out)


def tag_sequence(text: str) -> list[str]:
    """The tags of a text as a parser reads them (name and attributes, in order): what a translation keeps."""
    tags: list[str] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append(f"<{tag} {attrs}>")

        def handle_startendtag(self, tag, attrs):
            tags.append(f"<{tag} {attrs}/>")

        def handle_endtag(self, tag):
            tags.append(f"</{tag}>")

    parser = Tags()
    parser.feed(text)
    parser.close()
    return tags


def _word_of_token(tokenizer, ids: list[int]) -> list[int]:
    """Which whitespace-separated word of the decoded text each token of `ids` is part of (prefixes decoded:
    what any tokenizer's decode gives, whatever its pieces look like)."""
    owners, words = [], 0
    for k in range(1, len(ids) + 1):
        words = max(words, len(tokenizer.decode(ids[:k]).split()))
        owners.append(max(words - 1, 0))
    return owners


def cross_attention(model, src_ids: list[int], target: list[int], bos_id: int) -> torch.Tensor:
    """The mean cross-attention weight of each target token on each source token, over every decoder layer and
    head, the target teacher-forced after <bos>: (len(target), len(src_ids)). The scores of explain/attribution.py's
    "attention" method, read by hooks at the weights' hook points (nothing else is recorded)."""
    names = [f"{name}.weights" for name, _ in model.named_modules() if name.endswith("cross_attention")]
    weights: list[torch.Tensor] = []
    device = next(model.parameters()).device
    with torch.inference_mode(), Hooks({name: lambda value, point: weights.append(value[0]) for name in names}):
        model(torch.tensor([src_ids], device=device), torch.tensor([[bos_id, *target[:-1]]], device=device))
    return torch.stack(weights).mean(dim=(0, 1)).float()


def word_links(model, tokenizer, source: str, translation: str) -> list[tuple[int, int]]:
    """Links (source word i, target word j) of a sentence and its translation by the model's own cross-attention
    (`cross_attention`), each target token linked to the source token it attends to most (explain/attribution.py's
    `alignments`), tokens gathered into their whitespace-separated words."""
    ids = encode_source(tokenizer, source)
    masked = mask_placeholders(tokenizer, source)
    target_text = mask_target(translation, masked.originals, tokenizer.placeholder_patterns) \
        if masked.originals else translation
    target = tokenizer.encode(target_text)[: model.config.max_len - 1]
    if not ids or not target:
        return []
    specials = {tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id}
    scores = cross_attention(model, ids, [*target, tokenizer.eos_id], tokenizer.bos_id)
    source_tokens = [i for i, token in enumerate(ids) if token not in specials]
    target_tokens = [j for j, token in enumerate(target) if token not in specials]
    source_word = _word_of_token(tokenizer, [ids[i] for i in source_tokens])
    target_word = _word_of_token(tokenizer, [target[j] for j in target_tokens])
    source_at = {token: source_word[n] for n, token in enumerate(source_tokens)}
    target_at = {token: target_word[n] for n, token in enumerate(target_tokens)}
    return sorted({(source_at[i], target_at[j]) for i, j in alignments(scores, source_tokens, target_tokens)})
