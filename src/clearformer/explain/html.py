"""The walkthrough as one self-contained HTML page (and the page the live server sends).

The front end is plain JavaScript, CSS and HTML in `clearformer/serve/static/`; the exported page
inlines those very files and embeds the walkthrough JSON, so it opens offline from disk with no
CDN. The live server (`clearformer serve`) sends the same template, linking the files instead and
adding `live.js`, the sentence form, and `confidence.js`, the words by confidence.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import fields
from importlib import resources
from pathlib import Path

from clearformer.explain.claim_links import claims_doc
from clearformer.explain.walkthrough import Walkthrough
from clearformer.store.output import check_output, write_output

# lessons.js: docs/learn.md; beamtree.js and whatif.js: docs/whatif.md; why.js: docs/why.md
EXPORT_SCRIPTS = ("heatmap.js", "walkthrough.js", "lessons.js", "beamtree.js", "whatif.js", "why.js")
# confidence.js: the live page's words by confidence (serve/confidence.py), wrapping walkthrough.js's CF.load
LIVE_SCRIPTS = EXPORT_SCRIPTS + ("live.js", "confidence.js")
STYLE = "walkthrough.css"
TEMPLATE = "walkthrough.html"
MARKERS = ("<!--clearformer:style-->", "<!--clearformer:script-->", "<!--clearformer:data-->")
def asset(name: str) -> str:
    """The text of one front-end file shipped in clearformer/serve/static/."""
    return (resources.files("clearformer.serve") / "static" / name).read_text(encoding="utf-8")


def _finite_rows(rows: list[list[float]]) -> list[list[float | None]]:
    """JSON has no NaN or infinity: a diverged model's non-finite numbers become null ("—" on the page)."""
    # NaN and ±inf propagate through a sum, and a sum of finite float32 numbers cannot overflow a float64.
    if math.isfinite(sum(map(sum, rows))):
        return rows
    return [[v if math.isfinite(v) else None for v in row] for row in rows]


def _shallow(item, **replace) -> dict:
    return {f.name: replace.get(f.name, getattr(item, f.name)) for f in fields(item)}


def walk_payload(walk: Walkthrough) -> dict:
    """The same dict as `walk.to_dict()`, non-finite numbers as None, built without copying every number
    (`dataclasses.asdict` deep-copies each float, seconds for a long translation)."""
    steps = [_shallow(step, matrices=[_shallow(m, values=_finite_rows(m.values)) for m in step.matrices])
             for step in walk.steps]
    return _shallow(walk, steps=steps, source_tokens=list(walk.source_tokens),
                    target_tokens=list(walk.target_tokens))


def to_json(data) -> str:
    """Compact JSON that is safe inside a <script> element (no '<', no JS line separators)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_page(data: dict, live: bool = False, inline: bool = True, sections: dict | None = None) -> str:
    """The page for `data` = {"config": {...}, "walk": walkthrough dict or None}.

    inline=True puts the CSS and JavaScript into the page (the offline export); otherwise the page
    links them from `static/` (the live server). live=True adds the sentence form's script. `sections`:
    what the floors above explain/ show beside the steps, passed by the caller (explain/ imports none of
    them): {"lessons": learn.page.lesson_index()} for lessons.js; without it no lesson panel."""
    scripts = LIVE_SCRIPTS if live else EXPORT_SCRIPTS
    data = {"lessons": [], **data, **(sections or {})}
    if inline:
        style = f"<style>\n{asset(STYLE)}</style>"
        sources = [asset(name) for name in scripts]
        if any("</script" in source.lower() for source in sources):
            raise ValueError("a front-end script contains '</script', which would end the inlined element")
        code = "\n".join(f"<script>\n{source}</script>" for source in sources)
    else:
        style = f'<link rel="stylesheet" href="static/{STYLE}">'
        code = "\n".join(f'<script src="static/{name}"></script>' for name in scripts)
    page = asset(TEMPLATE)
    for marker, value in zip(MARKERS, (style, code, f'<script type="application/json" id="cf-data">'
                                                    f"{to_json(data)}</script>"), strict=True):
        if page.count(marker) != 1:
            raise ValueError(f"{TEMPLATE}: expected the marker {marker} once")
        head, tail = page.split(marker)
        page = head + value + tail
    return page


PAGE_EXISTS = "pass --overwrite to replace it, or choose another --html FILE"


def check_page_path(path: Path, overwrite: bool) -> Path:
    """Refuse, before any work, a page path that is a folder, or an existing file unless `overwrite`."""
    path = Path(path)
    check_output(path, "--html", overwrite, PAGE_EXISTS)
    return path


def write_html(walk: Walkthrough, path: Path, overwrite: bool = True, sections: dict | None = None) -> Path:
    """Write `walk` as one offline HTML page at `path` (atomically), with `sections` (`render_page`); return
    the path. overwrite=False refuses (UserError) a file that exists, also one that appeared while the page
    was written."""
    path = Path(path)
    doc = claims_doc()
    page = render_page({"config": {"live": False, "docs": doc.as_uri() if doc else None}, "walk": walk_payload(walk)},
                       sections=sections)
    write_output(check_output(path, "--html", overwrite, PAGE_EXISTS), page)
    return path


def notebook_html(walk: Walkthrough, height: int = 760, sections: dict | None = None) -> str:
    """The walkthrough page for a Jupyter output cell (`Walkthrough._repr_html_`): the offline page of
    `explain --html`, in a sandboxed iframe (`srcdoc`), so its ids, styles and scripts stay its own and
    nothing is fetched from the network."""
    page = render_page({"config": {"live": False}, "walk": walk_payload(walk)}, sections=sections)
    return (f'<iframe srcdoc="{html.escape(page, quote=True)}" sandbox="allow-scripts" '
            f'style="width:100%;height:{int(height)}px;border:1px solid #ccc" '
            f'title="clearformer walkthrough: {html.escape(walk.title, quote=True)}"></iframe>')
