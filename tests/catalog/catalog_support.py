"""What the catalogue and LibreTranslate tests share: a template, random-weight runs, GNU gettext's checker.

A random model writes random words of its vocabulary, "%" and "{" among them: the worst translator, so
what the catalogue rules guarantee (placeholders exact, literals escaped, `msgfmt --check` passing) is
tested where nothing else would hold them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import seeds
import torch

from clearformer.config import preset
from clearformer.model.transformer import Transformer
from clearformer.store.checkpoint import save_model
from clearformer.train.corpus import build_tokenizer
from clearformer.train.options import Vocabulary

PAIRS = [("Delete %d files from %s?", "Supprimer %d fichiers de %s ?"),
         ("copy %1$s to %2$s", "copier %2$s vers %1$s"),
         ("100% done", "terminé à 100 %"), ("open {0} now", "ouvrir {0} maintenant {"),
         ("the cat sleeps", "le chat dort"), ("Open the file", "Ouvrir le fichier"),
         ("Save the file", "Enregistrer le fichier"), ("Quit", "Quitter"), ("file", "fichier"),
         ("files", "fichiers"), ("I love you", "je t'aime"), ("Hello", "Bonjour")] * 10

TEMPLATE = r'''# SOME DESCRIPTIVE TITLE.
# Copyright (C) YEAR THE PACKAGE'S COPYRIGHT HOLDER
#, fuzzy
msgid ""
msgstr ""
"Project-Id-Version: PACKAGE VERSION\n"
"Report-Msgid-Bugs-To: \n"
"POT-Creation-Date: 2024-01-01 10:00+0000\n"
"PO-Revision-Date: YEAR-MO-DA HO:MI+ZONE\n"
"Last-Translator: FULL NAME <EMAIL@ADDRESS>\n"
"Language-Team: LANGUAGE <LL@li.org>\n"
"Language: \n"
"MIME-Version: 1.0\n"
"Content-Type: text/plain; charset=CHARSET\n"
"Content-Transfer-Encoding: 8bit\n"
"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\n"

#. TRANSLATORS: the file's name
#: src/main.c:10
#, c-format
msgid "Delete %d files from %s?"
msgstr ""

#: src/main.c:12
#, c-format
msgid "%d file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""

#: src/menu.c:3
msgctxt "menu"
msgid "_Open the file"
msgstr ""

#: src/menu.c:4
msgid "_Save the file"
msgstr ""

#: src/menu.c:5
msgid "_Quit"
msgstr ""

#, c-format
msgid "100%% done"
msgstr ""

#, python-format
msgid "%(count)d files in %(dir)s"
msgstr ""

#, python-brace-format
msgid "Hello {name}, open {0} now"
msgstr ""

#, qt-format
msgid "copy %1 to %2"
msgstr ""

msgid ""
"\n"
"the cat sleeps\n"
"  I love you"
msgstr ""

msgid "Hello"
msgstr "Salut"

#~ msgid "old message"
#~ msgstr ""
'''


def random_run(folder, mask: bool, seed: int):
    """A random-weight Transformer over a word vocabulary of PAIRS (masking placeholders or not), saved as a
    run whose corpus manifest says en -> fr."""
    tokenizer = build_tokenizer(Vocabulary(tokenizer="words", mask_placeholders=mask), PAIRS)
    tokenizer.source_eos = True
    corpus = folder / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "manifest.json").write_text(json.dumps({"languages": {"source": "en", "target": "fr"}}))
    torch.manual_seed(seeds.seed(seed))
    config = preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16,
                    n_heads=2, d_ff=32, max_len=64)
    model = Transformer(config).eval()
    return save_model(folder / "run", model, tokenizer, meta={"preset": "test", "data_dir": str(corpus)})



def msgfmt_check(path) -> subprocess.CompletedProcess:
    """GNU gettext's checker on a catalogue, fuzzy entries included (msgfmt skips them without --use-fuzzy, and
    every entry clearformer fills is fuzzy)."""
    msgfmt = shutil.which("msgfmt")
    if msgfmt is None:
        reason = "GNU gettext's msgfmt is missing: run scripts/install-gettext.sh (./setup.sh does, as root or in CI)"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"{reason} (CI is set, so a missing msgfmt is a failure)")
        pytest.skip(reason)
    return subprocess.run([msgfmt, "--check", "--use-fuzzy", "-o", "/dev/null", str(path)], capture_output=True,
                          text=True)
