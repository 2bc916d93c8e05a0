"""The post-check (generate/checks.py) on the issue's corruptions, and the masking fixes behind them:
per-sentence stand-ins, unwritable spans carried, nested brace fields whole, a tag's spacing kept."""

from __future__ import annotations

from clearformer.generate.checks import check, translations
from clearformer.generate.result import NoteKind
from clearformer.tokenize.placeholders import Masked, find, mask, restore
from clearformer.tokenize.unwritable import carry_unwritable, span_pattern, unwritable_spans


def kinds(source: str, output: str, **more) -> list[NoteKind]:
    return [note.kind for note in check(source, output, **more)]


def test_the_issue_corruptions_are_each_noted():
    assert kinds("Error registering Transmission as a %s handler: %s",
                 "Erro ao registrar a Transmissão como um manipulador 1: %s %s") == [NoteKind.FOREIGN_TOKEN]
    assert kinds("%s (%s attribute)", "%s (atributo de 2:%s)") == [NoteKind.FOREIGN_TOKEN]
    assert kinds("The 2 fish ate 15 apples", "O peixe de dois comeu de 150 maçãs") == [NoteKind.FOREIGN_TOKEN]
    assert kinds("-C <dir>", "-C  ⁇ dir>") == [NoteKind.UNWRITABLE_SPAN]
    assert kinds("Connection timed out. Please try again later.", "Por favor, tente novamente mais tarde.") == [
        NoteKind.SENTENCE_DROPPED]
    assert kinds("Open the file", "Open the file") == [NoteKind.SOURCE_COPIED]
    assert kinds("Copy %s to <b>%s</b>", "Copiar %s para %s") == [NoteKind.PLACEHOLDER_NOT_PLACED]
    assert kinds("Copy %s", "Copiar %s", forced=True) == [NoteKind.PLACEHOLDER_NOT_PLACED]
    # a span masking took out (a format's directive, a character carried through) that did not come back
    assert kinds("-C <dir>", "-C dir>", masked=Masked("-C ｟ph0｠dir>", ("<",))) == [NoteKind.PLACEHOLDER_NOT_PLACED]


def test_good_translations_have_no_note():
    for source, output in (("The 2 fish ate 15 apples", "O 2 peixe comeu 15 maçãs"), ("OK", "OK"),
                           ("Version 31.7", "Versão 31,7"), ("Copy %1$s to %2$s?", "Copiar %2$s para %1$s?"),
                           ("Page 1 of %d", "Página 1 de %d"), ("Open it. Then close it.", "Abra. Depois feche."),
                           ("2015-2020", "2015-2020"), ("", "")):
        assert check(source, output, masked=Masked(source)) == (), source


def test_notes_are_per_input_and_name_the_sentence_of_a_cut_input():
    texts = ["Open the file now.", "Then save it.", "I love you"]
    out = translations(texts, [0, 0, 1], 2, ["Abra o arquivo agora.", "Then save it.", "Eu te amo"])
    assert [t.text for t in out] == ["Abra o arquivo agora. Then save it.", "Eu te amo"]
    assert [n.detail for n in out[0].notes] == ["sentence 2 of 2: the translation is the source unchanged"]
    assert out[1].trusted


def test_nested_brace_fields_are_one_placeholder():
    assert find("{0!r:>{1}} and {name:{width}.{prec}f} {} {0} ${x} {:>10}") == [
        "{0!r:>{1}}", "{name:{width}.{prec}f}", "{}", "{0}", "${x}", "{:>10}"]
    assert find("a { b } c") == []


def test_a_tag_keeps_its_source_spacing():
    masked = mask("<b>Connections</b> are open")
    assert restore(masked, "｟ph0｠ Conexões ｟ph1｠ estão abertas") == "<b>Conexões</b> estão abertas"
    spaced = mask("<b> Connections </b>")
    assert restore(spaced, "｟ph0｠ Conexões ｟ph1｠") == "<b> Conexões </b>"


class _Chars:
    """A vocabulary that cannot write <, # or …; words: ascii letters."""

    kind, unk_id = "sentencepiece", 1

    def encode(self, text):
        return [1 if c in "<#…" else ord(c) for c in text]

    def decode(self, ids):
        return "".join("⁇" if i == 1 else chr(i) for i in ids)


def test_spans_the_vocabulary_cannot_write_are_masked_after_the_placeholders():
    chars = _Chars()
    assert unwritable_spans(chars, "-C <dir> #1 <<a") == ["<", "#", "<<"]
    carried = carry_unwritable(chars, mask("%s -C <dir>…"), 32)
    assert carried.text == "｟ph0｠ -C ｟ph1｠dir>｟ph2｠" and carried.originals == ("%s", "<", "…")
    assert restore(carried, "｟ph0｠ -C ｟ph1｠dir>｟ph2｠") == "%s -C <dir>…"
    assert carry_unwritable(chars, mask("a < b"), 0).text == "a < b"  # no room: left as it was
    assert span_pattern("re") == r"(?<!\w)re(?!\w)"


def test_an_apostrophe_inside_a_word_is_no_span_to_carry():
    """file-roller's "You don’t have permission ... in this folder" came out "... nesta pasta’" (issue 48): the ’ of
    "don’t", which Firefox's vocabulary cannot write, was carried as a placeholder (a numeral inside the word), and
    the translation, which has no contraction, owed it: the search put it at the end. An apostrophe between two
    letters is the spelling of a word the translation replaces: the model reads the ASCII one; as a quote it is
    carried."""

    class Quotes(_Chars):
        def encode(self, text):
            return [1 if c in "<’" else ord(c) for c in text]

    chars = Quotes()
    assert unwritable_spans(chars, "You don’t have it") == []
    assert unwritable_spans(chars, "Open ’%s’ or <b> now, don’t") == ["’", "<"]
    carried = carry_unwritable(chars, mask("Open ’%s’, don’t"), 32)
    assert carried.text == "Open ｟ph0｠｟ph1｠｟ph2｠, don't" and carried.originals == ("’", "%s", "’")
    assert restore(carried, "Abrir ｟ph0｠｟ph1｠｟ph2｠, não") == "Abrir ’%s’, não"
    assert carry_unwritable(chars, mask("don’t"), 32) == Masked("don't")
