"""The parts of the LibreTranslate API that need no model: language codes as clients send them (BCP 47 with
Weblate 5.14.3's fallback), what an import's name says, HTML read by html.parser and tags placed by word links."""

from __future__ import annotations

import json

import pytest

from clearformer.languages import Languages, code_matches, languages_from_name, run_languages
from clearformer.serve.markup import parse_html, place_tags, tag_sequence


@pytest.mark.parametrize(("code", "model", "expected"), [
    ("pt", "pt", True), ("pt-BR", "pt", True), ("pt_BR", "pt", True), ("PT-br", "pt", True),
    ("pt-Latn-BR", "pt", True), ("pt-BR", "pt_BR", True), ("pt-PT", "pt_BR", False), ("pt", "pt_BR", False),
    ("zh-Hans", "zh", True), ("zh_Hans", "zh", True), ("en", "pt", False), ("ptx", "pt", False), ("", "pt", False),
])
def test_codes_match_as_bcp_47_with_weblates_fallback(code, model, expected):
    assert code_matches(code, model) is expected


def test_languages_from_a_marian_name_and_from_an_older_firefox_import(tmp_path):
    assert languages_from_name("Helsinki-NLP/opus-mt-en-de") == Languages("en", "de")
    assert languages_from_name("/cache/models--Helsinki-NLP--opus-mt-tc-big-en-pt/snapshots/0a1b") == \
        Languages("en", "pt")
    assert languages_from_name("Helsinki-NLP/opus-mt-en-roa") is None  # a group of languages, not one
    assert languages_from_name("my-model") is None
    assert run_languages({"languages": {"source": "en", "target": "pt"}}) == Languages("en", "pt")
    (tmp_path / "provenance.json").write_text(json.dumps({"package": {"direction": "pt-en"}}), encoding="utf-8")
    assert run_languages({}, tmp_path) == Languages("pt", "en")  # imported before meta.json recorded them
    assert run_languages({"languages": {"source": "en", "target": 3}}) is None


def placed(html: str, translation: str, links: list[tuple[int, int]]) -> str:
    document = parse_html(html)
    assert len(document.runs) == 1
    return document.render([place_tags(document.runs[0], translation, links)])


def test_tags_follow_the_words_they_wrapped():
    source = "Click the button to <b>save</b> the file."
    out = placed(source, "Clique no botão para salvar o arquivo.", [(0, 0), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)])
    assert out == "Clique no botão para <b>salvar</b> o arquivo."
    reordered = placed("the <em>red</em> car", "o carro vermelho", [(0, 0), (1, 2), (2, 1)])
    assert reordered == "o carro <em>vermelho</em>"


def test_nesting_is_kept_and_siblings_never_cross():
    out = placed("This is <b>very <i>important</i></b> news.", "Esta é uma notícia muito importante.",
                 [(0, 0), (1, 1), (2, 4), (3, 5), (4, 3)])
    assert out == "Esta é uma notícia <b>muito <i>importante</i></b>."
    crossed = placed("<b>one</b> <i>two</i> three", "dois um três", [(0, 1), (1, 0), (2, 2)])
    assert tag_sequence(crossed) == tag_sequence("<b>one</b> <i>two</i> three")  # well formed, source order


def test_tags_inside_a_copied_word_stay_where_they_were_and_void_tags_go_before_their_word():
    out = placed("Press <kbd>Ctrl</kbd>+<kbd>S</kbd> now", "Pressione Ctrl+S agora", [(0, 0), (1, 1), (2, 2)])
    assert out == "Pressione <kbd>Ctrl</kbd>+<kbd>S</kbd> agora"
    void = placed('Click <img src="a.png"> here', "Clique aqui", [(0, 0), (1, 1)])
    assert void == 'Clique <img src="a.png">aqui'


def test_references_and_blocks():
    document = parse_html('<p class="x">Tom &amp; Jerry &lt;3 caf&eacute;</p>\n<pre>  keep <b>this</b> </pre>'
                          "<!-- note --><br>Second line")
    assert [run.sentence for run in document.runs] == ["Tom &amp; Jerry &lt;3 café", "Second line"]
    assert document.runs[0].spelled == {"é": "&eacute;"}
    out = document.render([place_tags(document.runs[0], "Tom &amp; Jerry &lt;3 café < & x", [(0, 0)]),
                           place_tags(document.runs[1], "Segunda linha", [(0, 1), (1, 0)])])
    assert out == ('<p class="x">Tom &amp; Jerry &lt;3 caf&eacute; &lt; &amp; x</p>\n<pre>  keep <b>this</b> </pre>'
                   "<!-- note --><br>Segunda linha")
