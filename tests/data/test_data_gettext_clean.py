"""Every cleaning rule of the gettext recipe, on messages and on a synthetic .mo file."""

from __future__ import annotations

from collections import Counter

import pytest

from clearformer.data.gettext_clean import (
    clean_messages,
    clean_pair,
    has_words,
    is_markup,
    message_pairs,
    split_sentences,
    strip_accelerators,
)
from clearformer.data.mo import MoEntry, read_mo, write_mo


def clean(source: str, target: str) -> list[tuple[str, str]]:
    return clean_pair(source, target, Counter())


def test_plural_gives_singular_to_form0_and_plural_to_form1():
    counts = Counter()
    entry = MoEntry("%d file deleted", ("%d fichier supprimé", "%d fichiers supprimés"),
                    msgid_plural="%d files deleted")
    assert message_pairs(entry, counts) == [("%d file deleted", "%d fichier supprimé"),
                                            ("%d files deleted", "%d fichiers supprimés")]
    assert counts["plural_messages"] == 1


def test_context_is_dropped_and_credits_and_untranslated_skipped():
    counts = Counter()
    assert message_pairs(MoEntry("Open", ("Ouvrir",), context="menu|file"), counts) == [("Open", "Ouvrir")]
    assert message_pairs(MoEntry("translator-credits", ("Jean Dupont",)), counts) == []
    assert message_pairs(MoEntry("Your names", ("Jean",), context="NAME OF TRANSLATORS"), counts) == []
    assert message_pairs(MoEntry("Close", ("",)), counts) == []
    assert counts["dropped_translator_credits"] == 2
    assert counts["dropped_untranslated"] == 1


@pytest.mark.parametrize("source, target, expected", [
    ("_Open", "_Ouvrir", ("Open", "Ouvrir")),                      # GTK
    ("&Save As...", "Enregistrer &sous...", ("Save As...", "Enregistrer sous...")),  # Qt / KDE
    ("~Insert", "~Insérer", ("Insert", "Insérer")),                # LibreOffice
    ("Co_ntacts list", "Liste des co_ntacts", ("Contacts list", "Liste des contacts")),
    ("Load P_GP key", "Charger la clé P_GP", ("Load PGP key", "Charger la clé PGP")),
])
def test_accelerator_marks_are_removed(source, target, expected):
    assert strip_accelerators(source, target)[:2] == expected


@pytest.mark.parametrize("source, target", [
    ("NULL directory in find_file", "répertoire NULL dans find_file"),
    ("Extra space for GTK_CAN_DEFAULT buttons", "Espace pour les boutons GTK_CAN_DEFAULT"),
    ("cannot appear at either end of __VA_OPT__", "ne peut apparaître à aucune extrémité de __VA_OPT__"),
    ("Chinese/China (zh_CN)", "Chinois/Chine (zh_CN)"),
    ("Balance at ~a", "Solde à ~a"),                               # a Scheme format directive
])
def test_identifiers_found_on_both_sides_keep_their_marks(source, target):
    assert strip_accelerators(source, target)[:2] == (source, target)


def test_identifier_on_one_side_only_is_not_protected():
    # "file_name" is not on the French side: its mark is read as an accelerator.
    assert strip_accelerators("Set file_name", "Définir le nom")[0] == "Set filename"


def test_markup_is_detected_and_dropped():
    for text in ("<b>Bold</b> text", "Line<br/>break", "Tom &amp; Jerry", "<a href='x'>link</a>"):
        assert is_markup(text)
    for text in ("<mb_cur_max> must be greater", "a < b and c > d", "Drag & drop", "x && y"):
        assert not is_markup(text)
    counts = Counter()
    assert clean_pair("<b>Warning</b>", "<b>Attention</b>", counts) == []
    assert counts["dropped_markup"] == 1


def test_whitespace_is_normalised():
    assert clean("  Open\n the\tfile\n", "Ouvrir\u00a0le fichier\u202f:") == \
        [("Open the file", "Ouvrir le fichier :")]
    assert clean("Cafe\u0301", "Cafe\u0301 noir") == [("Café", "Café noir")]  # NFC


def test_identical_sides_and_format_only_entries_are_dropped():
    counts = Counter()
    assert clean_pair("_Index", "Index", counts) == []           # identical once cleaned
    assert clean_pair("%s: %d", "%s : %d", counts) == []          # format specifiers only
    assert clean_pair("(%1)", "« %1 »", counts) == []
    assert counts["dropped_identical"] == 1 and counts["dropped_no_words"] == 2
    assert not has_words("%(count)s / {0} -- %qD %<%>")
    assert has_words("%s files")


LONG_EN = ("The city was founded by traders in the tenth century along the river. It grew quickly into a "
           "regional capital. Today it is known for its markets and its old bridges.")
LONG_FR = ("La ville fut fondée par des marchands au dixième siècle le long du fleuve. Elle devint vite une "
           "capitale régionale. On la connaît aujourd'hui pour ses marchés et ses vieux ponts.")


def test_long_paragraph_split_when_both_sides_agree():
    counts = Counter()
    pairs = clean_pair(LONG_EN, LONG_FR, counts)
    assert len(pairs) == 3 and counts["paragraphs_split"] == 1
    assert pairs[1] == ("It grew quickly into a regional capital.",
                        "Elle devint vite une capitale régionale.")


def test_long_paragraph_kept_whole_when_sentence_counts_differ():
    counts = Counter()
    target = LONG_FR.replace("régionale. On", "régionale ; on")
    assert clean_pair(LONG_EN, target, counts) == [(LONG_EN, target)]
    assert counts["paragraphs_kept_whole"] == 1


def test_sentence_split_respects_abbreviations_and_french_spacing():
    assert split_sentences("Use a shape, e.g. Circle or Square. Then click.") == [
        "Use a shape, e.g. Circle or Square.", "Then click."]
    assert split_sentences("Voulez-vous continuer ? Les données seront perdues.") == [
        "Voulez-vous continuer ?", "Les données seront perdues."]
    assert split_sentences("Version 2.5 is out. see notes") == ["Version 2.5 is out. see notes"]


def test_whole_catalogue_from_a_synthetic_mo_file():
    data = write_mo([
        MoEntry("_Open", ("_Ouvrir",), context="menu"),
        MoEntry("%d item", ("%d élément", "%d éléments"), msgid_plural="%d items"),
        MoEntry("<b>Bold</b>", ("<b>Gras</b>",)),
        MoEntry("OK", ("OK",)),
        MoEntry("%s", ("%s",)),
        MoEntry("translator-credits", ("Marie",)),
    ])
    counts = Counter()
    pairs = clean_messages(read_mo(data).entries, counts)
    assert sorted(pairs) == sorted([("Open", "Ouvrir"), ("%d item", "%d élément"),
                                    ("%d items", "%d éléments")])
    assert counts["messages"] == 6 and counts["dropped_markup"] == 1
