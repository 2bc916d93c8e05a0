"""Fixtures of the confidence tests: a random-weight run over a word vocabulary, with placeholders masked
(its translations are random words: the worst translator, on which every score must still be in [0, 1])."""

from __future__ import annotations

import json

import pytest
import torch
from threads import one_thread  # noqa: F401  (autouse: one torch thread for the folder's tiny models)

from clearformer.config import preset
from clearformer.model.transformer import Transformer
from clearformer.store.checkpoint import save_model
from clearformer.train.corpus import build_tokenizer
from clearformer.train.options import Vocabulary

PAIRS = [("Delete %d files from %s?", "Supprimer %d fichiers de %s ?"), ("the cat sleeps", "le chat dort"),
         ("Open the file", "Ouvrir le fichier"), ("Save the file", "Enregistrer le fichier"), ("Quit", "Quitter"),
         ("file", "fichier"), ("files", "fichiers"), ("I love you", "je t'aime"), ("Hello", "Bonjour")] * 10


@pytest.fixture(scope="session")
def word_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("confidence")
    tokenizer = build_tokenizer(Vocabulary(tokenizer="words", mask_placeholders=True), PAIRS)
    tokenizer.source_eos = True
    corpus = folder / "corpus"
    corpus.mkdir()
    (corpus / "manifest.json").write_text(json.dumps({"languages": {"source": "en", "target": "fr"}}))
    torch.manual_seed(5)
    config = preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16,
                    n_heads=2, d_ff=32, max_len=64)
    return save_model(folder / "run", Transformer(config).eval(), tokenizer,
                      meta={"preset": "test", "data_dir": str(corpus)})


@pytest.fixture
def pairs_file(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in PAIRS[:9] * 3), encoding="utf-8")
    return path
