"""docs/*.md as the live page links them: rendered to HTML by markdown-it-py (rich's own Markdown parser, so no new
dependency), CommonMark with GitHub's tables; raw HTML in the file stays text, except the `<a id="..."></a>`
anchors the page's claim links point at (`docs/claims.md#claim-3`), which become real anchors."""

from __future__ import annotations

import html
import re

from markdown_it import MarkdownIt

ANCHOR = re.compile(r'^<a id="([A-Za-z][\w-]*)"></a>\s*$', re.MULTILINE)
MARK = "CLEARFORMERANCHOR"
STYLE = ("body{font-family:system-ui,-apple-system,'Segoe UI','Liberation Sans',Arial,sans-serif;max-width:56rem;"
         "margin:2rem auto;padding:0 1rem;line-height:1.5;color:#1d2330}pre,code{background:#f6f8fa}"
         "pre{padding:.6rem;overflow-x:auto}table{border-collapse:collapse}td,th{border:1px solid #dde2e8;"
         "padding:.2rem .5rem}img{max-width:100%}")


def render_markdown(text: str, title: str) -> str:
    """A Markdown document -> a whole HTML page (UTF-8 text)."""
    marked = ANCHOR.sub(lambda m: f"{MARK}{m.group(1)}{MARK}", text)
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(marked)
    body = re.sub(rf"(?:<p>)?{MARK}([\w-]+){MARK}(?:</p>)?", r'<a id="\1"></a>', body)
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>\n{body}</body></html>\n")
