"""Export and import of a run that masks placeholders (issue 30): the reserved tokens ｟ph0｠... travel as
single pieces of the SentencePiece model, the masking itself as clearformer_placeholders.json, and the
export says in one line that Marian and CTranslate2 do not mask, restore or constrain them."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch

pytest.importorskip("transformers")
from clearformer.config import preset  # noqa: E402
from clearformer.generate import DecodingOptions, translate  # noqa: E402
from clearformer.interop.marianmt import PLACEHOLDER_FILE, export_marian, load_marian, masking_note  # noqa: E402
from clearformer.model.build import build_model  # noqa: E402
from clearformer.tokenize.placeholders import RESERVED_TOKENS, find  # noqa: E402
from clearformer.train.corpus import build_tokenizer  # noqa: E402
from clearformer.train.options import Vocabulary  # noqa: E402

PAIRS = [("Delete %d files from %s?", "Supprimer %d fichiers de %s ?"),
         ("unable to read link '%.255s'", "impossible de lire le lien « %.255s »"),
         ("the cat sleeps", "le chat dort")] * 20


def tiny_run(mask: bool):
    """A random-weight post-norm model (what Marian expresses) over a joint SentencePiece vocabulary."""
    tokenizer = build_tokenizer(Vocabulary(tokenizer="sentencepiece", vocab_size=400, mask_placeholders=mask), PAIRS)
    torch.manual_seed(0)
    config = preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer), d_model=16,
                    n_heads=2, d_ff=32, max_len=48, pad_id=tokenizer.pad_id)
    return build_model(config).eval(), tokenizer


def test_a_masking_run_exports_its_tokens_and_says_what_marian_does_not_do(tmp_path):
    from transformers import MarianTokenizer

    model, tokenizer = tiny_run(mask=True)
    folder = export_marian(model, tokenizer, tmp_path / "marian")
    record = json.loads((folder / PLACEHOLDER_FILE).read_text(encoding="utf-8"))
    assert record["mask_placeholders"] and record["reserved_tokens"] == list(RESERVED_TOKENS)
    note = masking_note(tokenizer)
    assert note.count("\n") == 0 and "does not mask, restore or constrain" in note
    theirs = MarianTokenizer.from_pretrained(str(folder))
    assert "｟ph0｠" in theirs.tokenize("link '｟ph0｠' ｟ph1｠")  # still one piece for Marian's tokenizer
    # import marian: the imported run masks as the exported one did, and restores
    imported, imported_tokenizer, _ = load_marian(str(folder))
    assert imported_tokenizer.mask_placeholders
    assert set(imported_tokenizer.placeholder_ids) == {imported_tokenizer.vocab[t] for t in RESERVED_TOKENS}
    sources = ["unable to read link '%.255s'", "Delete %d files from %s?"]
    for source, output in zip(sources, translate(imported, imported_tokenizer, sources, DecodingOptions(beam=2)),
                              strict=True):
        assert Counter(find(output)) == Counter(find(source)) and "｟" not in output


def test_a_run_without_masking_exports_as_before(tmp_path):
    model, tokenizer = tiny_run(mask=False)
    folder = export_marian(model, tokenizer, tmp_path / "marian")
    assert not (folder / PLACEHOLDER_FILE).exists() and masking_note(tokenizer) is None
    _, imported_tokenizer, _ = load_marian(str(folder))
    assert not imported_tokenizer.mask_placeholders and imported_tokenizer.placeholder_ids == ()


def test_a_damaged_placeholder_record_is_a_one_line_error(tmp_path):
    from clearformer.errors import UserError

    model, tokenizer = tiny_run(mask=True)
    folder = export_marian(model, tokenizer, tmp_path / "marian")
    (folder / PLACEHOLDER_FILE).write_text(json.dumps({"mask_placeholders": "yes"}), encoding="utf-8")
    with pytest.raises(UserError, match=f"{PLACEHOLDER_FILE}: mask_placeholders must be true or false"):
        load_marian(str(folder))
    (folder / PLACEHOLDER_FILE).write_text(json.dumps({"mask_placeholders": True, "reserved_tokens": ["<x>"]}),
                                           encoding="utf-8")
    with pytest.raises(UserError, match="reserved_tokens differ"):
        load_marian(str(folder))


def test_ctranslate2_export_carries_the_placeholder_record(tmp_path):
    pytest.importorskip("ctranslate2")
    from clearformer.interop.ctranslate2 import convert_marian_folder

    model, tokenizer = tiny_run(mask=True)
    folder = export_marian(model, tokenizer, tmp_path / "marian")
    out = convert_marian_folder(folder, tmp_path / "ct2")
    assert json.loads((out / PLACEHOLDER_FILE).read_text(encoding="utf-8"))["reserved_tokens"][0] == "｟ph0｠"
