"""docs/*.md as the live page links them: rendered to HTML by markdown-it-py (rich's own Markdown parser, so no new
dependency), CommonMark with GitHub's tables; raw HTML in the file stays text, except the `<a id="..."></a>`
anchors the page's claim links point at (`docs/claims.md#claim-3`), which become real anchors. The figures the
document shows from its own folder (docs/claims/*.png) are read once and put in the page (data: URLs): the
server's routes never open a path; a figure from elsewhere is named by its caption instead."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from markdown_it import MarkdownIt

ANCHOR = re.compile(r'^<a id="([A-Za-z][\w-]*)"></a>\s*$', re.MULTILINE)
MARK = "CLEARFORMERANCHOR"
STYLE = ("body{font-family:system-ui,-apple-system,'Segoe UI','Liberation Sans',Arial,sans-serif;max-width:56rem;"
         "margin:2rem auto;padding:0 1rem;line-height:1.5;color:#1d2330}pre,code{background:#f6f8fa}"
         "pre{padding:.6rem;overflow-x:auto}table{border-collapse:collapse}td,th{border:1px solid #dde2e8;"
         "padding:.2rem .5rem}img{max-width:100%}")


MAX_FIGURE_BYTES = 2_000_000
FIGURE_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg"}


def figure_url(folder: Path | None, source: str) -> str | None:
    """A data: URL of the figure `source` (relative to `folder`, inside it), or None."""
    if folder is None or "://" in source or source.startswith("/"):
        return None
    path = (folder / source).resolve()
    kind = FIGURE_TYPES.get(path.suffix.lower())
    if kind is None or not path.is_relative_to(folder.resolve()) or not path.is_file() \
            or path.stat().st_size > MAX_FIGURE_BYTES:
        return None
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def render_markdown(text: str, title: str, folder: Path | None = None) -> str:
    """A Markdown document (its figures relative to `folder`) -> a whole HTML page (UTF-8 text)."""
    marked = ANCHOR.sub(lambda m: f"{MARK}{m.group(1)}{MARK}", text)
    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = parser.parse(marked)
    for token in tokens:
        for child in token.children or []:
            if child.type == "image":
                url = figure_url(folder, child.attrGet("src") or "")
                if url is None:  # not ours to serve: its caption, as text
                    child.type, child.tag, child.children = "text", "", None
                    child.content = f"[figure: {child.content}]"
                else:
                    child.attrSet("src", url)
    body = parser.renderer.render(tokens, parser.options, {})
    body = re.sub(rf"(?:<p>)?{MARK}([\w-]+){MARK}(?:</p>)?", r'<a id="\1"></a>', body)
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">'
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n{body}</body></html>\n")
