"""Placeholders with a production vocabulary (no reserved tokens): numerals stand in, decoding copies them
exactly (tokenize/standins.py), and `train --init` fine-tunes an imported Marian model on its own sides."""

from __future__ import annotations

import json
from collections import Counter

import pytest

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

pytest.importorskip("transformers")
from interop_helpers import marian_folder, marian_spm  # noqa: E402
from seeds import seed_args  # noqa: E402

from clearformer.cli import main  # noqa: E402
from clearformer.generate import DecodingOptions, translate  # noqa: E402
from clearformer.interop.marianmt import PLACEHOLDER_FILE, export_marian, load_marian  # noqa: E402
from clearformer.load import load_model  # noqa: E402
from clearformer.tokenize import encode_source, encode_target, mask_placeholders  # noqa: E402
from clearformer.tokenize.placeholders import RESERVED_TOKENS, find  # noqa: E402

# A vocabulary like opus-mt's: numerals are pieces of their own, spaced ("▁3") and attached ("3").
WORDS = ["delete the files from the folder", "copy the link to the window", "open a file now",
         "supprimer les fichiers du dossier", "copier le lien vers la fenêtre", "ouvrir un fichier"]
NUMERALS = [f"page {n} of {n + 1} x{n}y {n}" for n in range(1, 10)]
SOURCES = ["Delete %d files from %s?", "copy '%s' to {0} now", "open %1$s and %2$s, then %s",
           "the folder <b>%s</b>", "%s", "delete %d%% of the files"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    folder, _ = marian_folder(tmp_path_factory.mktemp("marian") / "hf", seed=3,
                              proto=marian_spm(WORDS + NUMERALS, vocab_size=120))
    model, tokenizer, _ = load_marian(str(folder))
    return folder, model, tokenizer


def test_the_vocabulary_has_no_reserved_tokens_and_numerals_stand_in(imported):
    _, _, tokenizer = imported
    assert not any(token in tokenizer.vocab for token in RESERVED_TOKENS)
    assert tokenizer.mask_placeholders and tokenizer.stand_ins is not None
    assert tokenizer.stand_ins.texts[:3] == ("1", "2", "3")
    masked = mask_placeholders(tokenizer, "copy '%s' to %d")
    assert masked.text == "copy '｟ph0｠' to ｟ph1｠" and masked.originals == ("%s", "%d")
    pieces = tokenizer.tokenize(masked.text)
    assert "1" in pieces and "▁2" in pieces  # attached after the quote, spaced after "to"
    ids = encode_source(tokenizer, "copy '%s' to %d")
    assert sorted(set(ids) & set(tokenizer.placeholder_ids)) == sorted({tokenizer.vocab["1"], tokenizer.vocab["▁2"]})


@pytest.mark.parametrize("beam", [1, 4])
def test_decoding_keeps_every_placeholder_exactly(imported, beam):
    _, model, tokenizer = imported  # random weights: only the constraint can keep them
    outputs = translate(model, tokenizer, SOURCES, DecodingOptions(beam=beam))
    for source, output in zip(SOURCES, outputs, strict=True):
        assert Counter(find(output)) == Counter(find(source)), (source, output)
        assert "｟" not in output


def test_a_sentence_with_its_own_numerals_gets_other_stand_ins_and_keeps_them(imported):
    _, model, tokenizer = imported
    source = "page 1 of %d"
    masked = mask_placeholders(tokenizer, source)
    assert masked.text == "page 1 of ｟ph1｠" and masked.originals == ("1", "%d")  # %d stands as "2"
    (output,) = translate(model, tokenizer, [source], DecodingOptions(beam=2))
    assert "｟" not in output and output.count("1") >= 1 and "%d" in output


def test_fine_tuning_targets_use_the_target_side_and_the_same_stand_ins(imported):
    _, _, tokenizer = imported
    ids = encode_target(tokenizer, "Delete %d files from %s?", "supprimer %d fichiers de %s ?")
    stand_ins = [i for i in ids if i in tokenizer.placeholder_ids]
    assert [tokenizer.id_to_token(i) for i in stand_ins] == ["▁1", "▁2"]
    assert tokenizer.decode(ids).startswith("supprimer ｟ph0｠")


def test_export_of_a_stand_in_run_writes_no_reserved_token_record(imported, tmp_path):
    _, model, tokenizer = imported
    folder = export_marian(model, tokenizer, tmp_path / "out")
    assert not (folder / PLACEHOLDER_FILE).exists()
    _, again, _ = load_marian(str(folder))
    assert again.mask_placeholders and again.stand_ins == tokenizer.stand_ins


@pytest.mark.slow
def test_train_init_from_an_imported_marian_run(imported, tmp_path, capsys):
    folder, _, _ = imported
    run = tmp_path / "opus"
    assert main(["import", "marian", str(folder), "--out", str(run)]) == 0
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"delete %d files from the folder {i}\tsupprimer %d fichiers du dossier {i}\n"
                             for i in range(60)), encoding="utf-8")
    tuned = tmp_path / "tuned"
    assert main(["train", "--init", str(run), "--tsv", str(pairs), "--out", str(tuned), "--steps", "6",
                 "--eval-every", "3", "--batch-tokens", "200", "--bleu-sentences", "2", "--threads", "1",
                 "--freeze", "encoder", "--quiet", *seed_args()]) == 0
    assert "step 0: valid loss" in capsys.readouterr().out
    meta = json.loads((tuned / "meta.json").read_text(encoding="utf-8"))
    assert meta["init"]["name"] == "opus" and meta["tokenizer"] == "marian"
    model, tokenizer, _ = load_model(tuned)
    assert tokenizer.stand_ins is not None and tokenizer.mask_placeholders
    (output,) = translate(model, tokenizer, ["Delete %d files from %s?"], DecodingOptions(beam=2))
    assert Counter(find(output)) == Counter(["%d", "%s"])


def test_each_sentence_gets_stand_ins_among_the_numerals_it_does_not_hold():
    """The issue's "Page 1 of %d": %d masked as the "2" it does not hold; its own "1" spelled back; "15" holds
    1, 5 and 15; more placeholders than free numerals: nothing masked."""
    from clearformer.tokenize.placeholders import mask, restore
    from clearformer.tokenize.standins import StandIns

    stand_ins = StandIns.from_vocabulary({f"▁{n}": n for n in range(1, 100)} | {"7": 200, "▁1:": 300})
    assert stand_ins.texts[:3] == ("1", "2", "3") and len(stand_ins.texts) == 32
    assert stand_ins.attached[6] == "7" and stand_ins.attached[0] is None and stand_ins.spaced[0] == "▁1"
    assert "▁1:" in stand_ins.numeral_pieces and "▁33" in stand_ins.numeral_pieces  # past the 32 stand-ins
    assert "▁1" not in stand_ins.numeral_pieces
    for text, masked_text in (("Page 1 of %d", "Page 1 of ｟ph1｠"), ("UTF-8 name: %s", "UTF-8 name: ｟ph0｠"),
                              ("%1$s and %2$s", "｟ph0｠ and ｟ph1｠"),
                              ("copy %s to 2 places %s", "copy ｟ph0｠ to 2 places ｟ph2｠"),
                              ("15 of %d", "15 of ｟ph1｠")):
        masked = stand_ins.assign(text, mask(text, (), len(stand_ins.texts)))
        assert masked.text == masked_text, text
        assert restore(masked, masked.text) == text
    crowded = " ".join(str(n) for n in range(1, 33)) + " %s"
    assert stand_ins.assign(crowded, mask(crowded, (), 32)).originals == ()


def test_a_sentence_without_placeholders_keeps_its_numerals_free(imported):
    """Numerals stand in only for masked placeholders: a sentence with none owes no copies (its "3" may become
    "três" or "3,0"), one with placeholders owes its stand-ins (generate/constraints.py)."""
    from clearformer.generate import pad_batch, search_tokens
    from clearformer.generate.constraints import PlaceholderConstraint
    from clearformer.generate.rules import DecodingRules

    _, model, tokenizer = imported
    plain, masked = (mask_placeholders(tokenizer, text) for text in ("page 3 of 4", "delete %d files"))
    assert not plain.owes_copies and masked.owes_copies
    tokens = search_tokens(model, tokenizer).for_sources([plain, masked])
    assert tokens.owing == (False, True)
    src = pad_batch([encode_source(tokenizer, "page 3 of 4"), encode_source(tokenizer, "delete %d files")],
                    tokenizer.pad_id)
    constraint = PlaceholderConstraint.for_batch(src, tokens.placeholder_ids, tokens.eos_id, None, tokens.owing)
    assert constraint.remaining[0].sum() == 0 and constraint.remaining[1].sum() == 1
    alone = search_tokens(model, tokenizer).for_sources([plain])
    rules = DecodingRules.for_search(src[:1], alone)
    assert not any(isinstance(rule, PlaceholderConstraint) for rule in rules.rules)
    # facts not told of a batch's sources: every sentence owes its pieces (reserved tokens only come from masking)
    assert search_tokens(model, tokenizer).owing is None
