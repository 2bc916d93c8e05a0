"""The translation memory (clearformer/memory.py) and a catalogue as training pairs (data/catalogue_pairs.py), on
entries of Django's pt_BR catalogue (BSD licence; django/conf/locale/pt_BR/LC_MESSAGES/django.po)."""

from __future__ import annotations

import polib
import pytest

from clearformer.data.catalogue_pairs import catalogue_pairs, read_catalogue_pairs
from clearformer.errors import UserError
from clearformer.memory import DEFAULT_THRESHOLD, Memory, Unit, catalogue_memory, fill_from_memory, read_memory
from clearformer.train.corpus import load_splits
from clearformer.train.options import DataOptions

DJANGO = '''msgid ""
msgstr ""
"Language: pt_BR\\n"
"MIME-Version: 1.0\\n"
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=2; plural=(n > 1);\\n"

msgid "Enter a valid date."
msgstr "Informe uma data válida."

msgid "Enter a valid IPv4 address."
msgstr "Insira um endereço IPv4 válido."

msgid "Enter a valid “slug” consisting of letters, numbers, underscores or hyphens."
msgstr "Informe um “slug” válido tendo letras, números, \\"underscores\\" e hífens."

#, python-format
msgid "Ensure this value is less than or equal to %(limit_value)s."
msgstr "Certifique-se que este valor seja menor ou igual a %(limit_value)s."

#, fuzzy
msgid "Hungarian"
msgstr "Húngaro"

#, python-format
msgid "Ensure this value has at most %(max)d character (it has %(length)d)."
msgid_plural "Ensure this value has at most %(max)d characters (it has %(length)d)."
msgstr[0] "Certifique-se de que o valor tenha no máximo %(max)d caractere (ele possui %(length)d)."
msgstr[1] "Certifique-se de que o valor tenha no máximo %(max)d caracteres (ele possui %(length)d)."

msgid "Enter a valid “slug” consisting of Unicode letters, numbers, underscores, or hyphens."
msgstr ""

msgid "Enter a valid email address."
msgstr ""

msgid "Enter a valid IPv4 address"
msgstr ""

msgid "Ensure this value is greater than or equal to %(limit_value)s."
msgstr ""

msgid "Enter a valid date."
msgctxt "other"
msgstr ""

msgid "_Open\\nthe file"
msgstr ""
'''


@pytest.fixture
def po(tmp_path):
    path = tmp_path / "django.po"
    path.write_text(DJANGO.replace('msgid "Enter a valid date."\nmsgctxt "other"',
                                   'msgctxt "other"\nmsgid "Enter a valid date."'), encoding="utf-8")
    return path


def entry(catalogue, msgid, context=None):
    return next(e for e in catalogue if e.msgid == msgid and e.msgctxt == context)


def test_the_catalogues_own_entries_fill_it(po):
    catalogue = polib.pofile(str(po))
    memory = catalogue_memory(catalogue)
    assert len(memory) == 5  # the fuzzy entry is not a memory
    outcome = fill_from_memory(catalogue, memory)
    # the same text in another context is no exact match (issue 48): a fuzzy one, for review
    other = entry(catalogue, "Enter a valid date.", "other")
    assert other.msgstr == "Informe uma data válida." and "fuzzy" in other.flags
    assert "from memory, 99% match" in other.tcomment
    near = entry(catalogue, "Enter a valid IPv4 address")
    assert near.msgstr == "Insira um endereço IPv4 válido." and "fuzzy" in near.flags
    assert "clearformer: from memory, 9" in near.tcomment  # its score, >= the threshold
    slug = entry(catalogue, "Enter a valid “slug” consisting of Unicode letters, numbers, underscores, or hyphens.")
    assert slug.msgstr == "" and 85 < outcome.offers[id(slug)].score < DEFAULT_THRESHOLD
    # A close match with other placeholders or below the threshold is left to the model, and offered.
    email = entry(catalogue, "Enter a valid email address.")
    assert email.msgstr == "" and id(email) in outcome.offers
    # A fuzzy fill is a suggestion for review, as msgmerge's: marked fuzzy, its comment names the source it
    # translates, so the reviewer sees the word that differs ("less" for "greater").
    greater = entry(catalogue, "Ensure this value is greater than or equal to %(limit_value)s.")
    assert "fuzzy" in greater.flags and "'Ensure this value is less than or equal to" in greater.tcomment
    assert (outcome.exact, outcome.fuzzy) == (0, 3)


def test_tmx_memory_and_bad_files(tmp_path):
    tmx = tmp_path / "project.tmx"
    tmx.write_text('''<?xml version="1.0" encoding="utf-8"?>
<tmx version="1.4"><header srclang="en" adminlang="en" datatype="plaintext" segtype="sentence" o-tmf="x"
 creationtool="x" creationtoolversion="1"/><body>
<tu><tuv xml:lang="en"><seg>Enter a valid email address.</seg></tuv>
<tuv xml:lang="pt-BR"><seg>Informe um endereço de email válido.</seg></tuv></tu>
</body></tmx>''', encoding="utf-8")
    memory = read_memory([tmx], "pt-BR")
    assert memory.lookup("Enter a valid email address.").unit.target == "Informe um endereço de email válido."
    bad = tmp_path / "bad.tmx"
    bad.write_text("<tmx><body>", encoding="utf-8")
    with pytest.raises(UserError, match="not a readable TMX file"):
        read_memory([bad])
    with pytest.raises(UserError, match="a memory is a gettext catalogue"):
        read_memory([tmp_path / "x.txt"])


def test_lookup_scores():
    memory = Memory([Unit("Enter a valid date.", "Informe uma data válida.")])
    assert memory.lookup("Enter a valid date.").exact
    near = memory.lookup("Enter a valid time.")
    assert 75 <= near.score < 100
    assert memory.lookup("Completely different words here") is None


def test_catalogue_pairs_as_translate_po_reads_them(po):
    pairs = catalogue_pairs(polib.pofile(str(po)))
    assert ("Enter a valid date.", "Informe uma data válida.") in pairs
    assert ("Hungarian", "Húngaro") not in pairs  # fuzzy: not a translator's finished work
    plural = [p for p in pairs if "characters (it has" in p[0]]
    assert plural and plural[0][1].endswith("caracteres (ele possui %(length)d).")
    assert len(pairs) == 6
    assert read_catalogue_pairs(po) == pairs


def test_a_catalogue_without_translations_is_one_line(tmp_path):
    path = tmp_path / "empty.po"
    path.write_text('msgid "Open"\nmsgstr ""\n', encoding="utf-8")
    with pytest.raises(UserError, match="0 translated entries"):
        read_catalogue_pairs(path)


def test_train_data_can_be_a_catalogue(po):
    """`train --data CATALOGUE.po`: its translated entries are the corpus, a tenth (at least one) held out."""
    splits, described, record = load_splits(DataOptions(data_dir=str(po)), "small")
    assert len(splits["train"]) + len(splits["valid"]) == 6 and splits["valid"]
    assert described == str(po) and record == {"data_files": [str(po)]}
