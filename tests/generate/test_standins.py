"""A SentencePiece vocabulary made elsewhere (Firefox's students: no reserved tokens, no placeholder pieces):
numerals stand in for ｟ph{i}｠ once the run masks placeholders, and decoding keeps every placeholder exactly."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from clearformer.config import preset
from clearformer.generate import DecodingOptions, translate
from clearformer.model.build import build_model
from clearformer.tokenize import encode_source, load_tokenizer
from clearformer.tokenize.placeholders import RESERVED_TOKENS, find
from clearformer.tokenize.subword import SentencePieceTokenizer

SENTENCES = ["delete the files from the folder", "copy the link to the window now", "open a file",
             "supprimer les fichiers du dossier", "copier le lien vers la fenêtre"] * 10 + \
            [f"page {n} of {n + 3}, item {n}x" for n in range(1, 40)]
SOURCES = ["Delete %d files from %s?", "copy '%s' to {0} now", "open %1$s and %2$s, then %s", "%s",
           "delete %d%% of <b>the</b> files"]


@pytest.fixture(scope="module")
def production_like():
    plain = SentencePieceTokenizer.train(SENTENCES, vocab_size=400)
    assert plain.piece_ids == () and plain.token_to_id(RESERVED_TOKENS[0]) == plain.unk_id
    # built as an importer of such a model builds it (docs/adapt.md): masking by numeral stand-ins
    tokenizer = SentencePieceTokenizer(plain.model_proto, mask_by_stand_ins=True)
    assert tokenizer.mask_placeholders and tokenizer.stand_ins is not None
    torch.manual_seed(0)
    config = preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16,
                    n_heads=2, d_ff=32, max_len=64, pad_id=tokenizer.pad_id)
    return build_model(config).eval(), tokenizer


@pytest.mark.parametrize("beam", [1, 4])
def test_random_weights_still_keep_every_placeholder(production_like, beam):
    model, tokenizer = production_like
    for source, output in zip(SOURCES, translate(model, tokenizer, SOURCES, DecodingOptions(beam=beam)), strict=True):
        assert Counter(find(output)) == Counter(find(source)), (source, output)
        assert "｟" not in output


def test_stand_ins_are_numeral_pieces_and_survive_saving(production_like, tmp_path):
    model, tokenizer = production_like
    ids = encode_source(tokenizer, "copy '%s' to %d")
    stand_ins = [tokenizer.id_to_token(i) for i in ids if i in tokenizer.placeholder_ids]
    assert stand_ins == ["1", "2"]  # digits split from "▁" (split_digits): "▁" then the attached form
    assert [tokenizer.id_to_token(i) for i in ids][-2:] == ["▁", "2"]
    assert tokenizer.decode(ids).endswith("'｟ph0｠' to ｟ph1｠")
    tokenizer.save(tmp_path)
    again = load_tokenizer(tmp_path)
    assert again.mask_placeholders and again.placeholder_ids == tokenizer.placeholder_ids


def test_without_masking_nothing_changes(production_like):
    _, tokenizer = production_like
    plain = SentencePieceTokenizer(tokenizer.model_proto)
    assert plain.placeholder_ids == () and plain.encode("copy %s") == plain.processor.encode("copy %s")
