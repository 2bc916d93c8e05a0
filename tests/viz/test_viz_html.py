"""The exported page: one offline file holding the shared front end and the walkthrough JSON."""

from __future__ import annotations

import json
import math
import re

from clearformer.explain.examples import run_example
from clearformer.explain.html import EXPORT_SCRIPTS, STYLE, asset, render_page, walk_payload, write_html
from clearformer.explain.walkthrough import Matrix, Step, Walkthrough


def _embedded(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="cf-data">(.*?)</script>', page, re.S)
    assert match, "no embedded walkthrough"
    return json.loads(match.group(1))


def test_page_embeds_the_walkthrough_and_inlines_the_shared_front_end(tmp_path):
    walk, _ = run_example("i-love-you")
    path = write_html(walk, tmp_path / "walk.html")
    page = path.read_text(encoding="utf-8")
    data = _embedded(page)
    assert data["walk"] == json.loads(json.dumps(walk.to_dict()))
    assert data["config"]["live"] is False  # and, in a checkout, the link to docs/claims.md
    for name in (*EXPORT_SCRIPTS, STYLE):
        assert asset(name).strip() in page, f"{name} is not inlined"
    assert "live.js" not in page and asset("live.js").strip() not in page


def test_page_needs_no_network():
    page = render_page({"config": {"live": False}, "walk": walk_payload(run_example("india-is-great")[0])})
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "the page loads something remote"
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:)""", page), "the page references another file"
    assert "@import" not in page and "url(http" not in page


def test_live_page_links_the_same_files():
    page = render_page({"config": {"live": True}, "walk": None}, live=True, inline=False)
    for name in (*EXPORT_SCRIPTS, "live.js"):
        assert f'<script src="static/{name}"></script>' in page
    assert f'href="static/{STYLE}"' in page


def test_token_text_cannot_break_out_of_the_data_element():
    hostile = "</script><script>alert(1)</script>\u2028"
    walk = Walkthrough("t", [hostile], steps=[Step("0:x", "x", "X", "", "", "input", kind="matrix",
                                                   matrices=[Matrix([[1.0]], [hostile], ["d0"])])])
    page = render_page({"config": {}, "walk": walk_payload(walk)})
    assert page.count("</script>") == len(EXPORT_SCRIPTS) + 1  # the inlined scripts and the data element
    assert _embedded(page)["walk"]["source_tokens"] == [hostile]


def test_non_finite_numbers_become_null():
    matrix = Matrix([[math.nan, math.inf, 1.5]], ["a"], ["0", "1", "2"])
    step = Step("0:x", "x", "X", "", "", "input", kind="matrix", matrices=[matrix])
    walk = Walkthrough("t", ["a"], steps=[step])
    data = _embedded(render_page({"config": {}, "walk": walk_payload(walk)}))
    assert data["walk"]["steps"][0]["matrices"][0]["values"] == [[None, None, 1.5]]
