"""Placeholders masked before the model and restored after (issue 30), and the repeat bound.

Masking: the i-th placeholder of a sentence becomes ｟ph{i}｠ (tokenize/placeholders.py), a single
token in every vocabulary clearformer builds; decoding copies each exactly as often as the source
holds it; the translation gets each one's exact source text back. A run trained before masking
(its tokenizer says mask_placeholders false, or nothing) reads and decodes as it did.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace

import pytest
import torch
from gen_helpers import TableModel, random_model

from clearformer.errors import UserError
from clearformer.explain.render import render
from clearformer.explain.search import explain_search, render_beam
from clearformer.generate import DecodingOptions, search_tokens, translate
from clearformer.generate.beam import beam_search
from clearformer.generate.constraints import MIN_RUN, RepeatBound
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.rules import DecodingRules
from clearformer.load import load_model
from clearformer.store.checkpoint import save_model
from clearformer.tokenize import (
    WordTokenizer,
    encode_source,
    encode_target,
    load_tokenizer,
    mask_placeholders,
    restore_placeholders,
    split_words,
)
from clearformer.tokenize.placeholders import (
    RESERVED_COUNT,
    RESERVED_TOKENS,
    check_patterns,
    find,
    mask,
    mask_target,
    restore,
    same_placeholders,
)
from clearformer.tokenize.subword import SentencePieceTokenizer
from clearformer.train.corpus import build_tokenizer, masked_pairs
from clearformer.train.options import TrainOptions, Vocabulary

UNUSUAL = ["unable to read link '%.255s'", "symbolic link '%.250s' size has changed from %jd to %zd",
           "Optional negative values (%-10f) will left align.", "Really delete folder “{0}”?",
           "copy %1$s to %2$s", "%d of %d files", "<b>bold</b> &amp; \\n", "%r%s:%d:%R in %qs%qD"]


# ----------------------------------------------------------------------------- mask and restore


@pytest.mark.parametrize("text", UNUSUAL)
def test_mask_then_restore_gives_the_source_back_byte_for_byte(text):
    masked = mask(text)
    assert masked.originals == tuple(find(text))
    assert not find(masked.text)  # the model sees no placeholder spelling
    assert masked.text.count("｟ph") == len(find(text))
    assert restore(masked, masked.text) == text


def test_reserved_tokens_go_by_position_and_targets_follow_the_source_text():
    masked = mask("copy %1$s to %2$s")
    assert masked.text == "copy ｟ph0｠ to ｟ph1｠" and masked.originals == ("%1$s", "%2$s")
    # French swaps them: the target is masked by the placeholders' text, so the order is learnt
    target = mask_target("copier %2$s vers %1$s", masked.originals)
    assert target == "copier ｟ph1｠ vers ｟ph0｠"
    assert restore(masked, target) == "copier %2$s vers %1$s"
    # the same text twice: the k-th of the target is the k-th of the source; one the source lacks stays
    twice = mask("%d of %d")
    assert mask_target("%d sur %d (%s)", twice.originals) == "｟ph0｠ sur ｟ph1｠ (%s)"


def test_a_literal_reserved_spelling_in_the_input_comes_back_unchanged():
    text = "keep ｟ph0｠ and %s and ｟odd｠"
    masked = mask(text)
    assert masked.originals == ("｟ph0｠", "%s", "｟odd｠")
    assert restore(masked, masked.text) == text


def test_more_placeholders_than_reserved_tokens_is_refused_naming_the_limit():
    from clearformer.tokenize.placeholders import TooManyPlaceholders

    full = " ".join(f"%{i}" for i in range(1, RESERVED_COUNT + 1))
    assert restore(mask(full), mask(full).text) == full
    with pytest.raises(TooManyPlaceholders, match=f"35 placeholders; a masking model has {RESERVED_COUNT}"):
        mask(full + " %33 %34 %35")  # issue 41: the rest would have been lost from the translation


def test_an_unknown_reserved_token_in_a_translation_stays_visible():
    masked = mask("open %s")
    assert restore(masked, "ouvrir ｟ph0｠ ｟ph7｠") == "ouvrir %s ｟ph7｠"


def test_extra_patterns_are_masked_first_and_bad_ones_are_one_line_errors():
    assert mask("run $(cmd) on %s", ("\\$\\([a-z]+\\)",)).originals == ("$(cmd)", "%s")
    with pytest.raises(ValueError, match="not a regular expression"):
        check_patterns(["(unclosed"])
    with pytest.raises(ValueError, match="matches the empty string"):
        check_patterns(["x*"])
    with pytest.raises(UserError, match="--placeholder-pattern"):
        TrainOptions.from_values(preset="small", placeholder_patterns=["(unclosed"]).check()


# ----------------------------------------------------------------------------- vocabularies and facts

PAIRS = [("Delete %d files from %s?", "Supprimer %d fichiers de %s ?"),
         ("copy %1$s to %2$s", "copier %2$s vers %1$s"), ("unable to read link '%.255s'",
                                                          "impossible de lire le lien « %.255s »"),
         ("the cat sleeps", "le chat dort"), ("open {0} now", "ouvrir {0} maintenant")] * 20


def options(tokenizer: str, **changes) -> Vocabulary:
    return Vocabulary(tokenizer=tokenizer, vocab_size=400, mask_placeholders=True, **changes)


@pytest.mark.parametrize("kind", ["words", "sentencepiece"])
def test_every_vocabulary_holds_the_reserved_tokens_as_single_pieces(kind, tmp_path):
    tokenizer = build_tokenizer(options(kind), PAIRS)
    ids = [tokenizer.token_to_id(t) for t in RESERVED_TOKENS]
    assert tokenizer.unk_id not in ids and len(set(ids)) == RESERVED_COUNT
    assert set(tokenizer.placeholder_ids) == set(ids)
    source = encode_source(tokenizer, "copy %1$s to %2$s")
    target = encode_target(tokenizer, "copy %1$s to %2$s", "copier %2$s vers %1$s")
    first, second = tokenizer.token_to_id("｟ph0｠"), tokenizer.token_to_id("｟ph1｠")
    assert source.index(first) < source.index(second) and target.index(second) < target.index(first)
    tokenizer.save(tmp_path)
    again = load_tokenizer(tmp_path)
    assert again.mask_placeholders and again.placeholder_ids == tokenizer.placeholder_ids
    assert json.loads((tmp_path / "tokenizer.json").read_text())["mask_placeholders"] is True


def test_training_pairs_are_masked_alike_and_the_toy_presets_do_not_mask():
    assert masked_pairs([("copy %1$s to %2$s", "copier %2$s vers %1$s")]) == [
        ("copy ｟ph0｠ to ｟ph1｠", "copier ｟ph1｠ vers ｟ph0｠")]
    from clearformer.train.options import preset_defaults
    assert preset_defaults("small")["mask_placeholders"] is True
    assert not preset_defaults("toy-translate").get("mask_placeholders", False)
    assert split_words("a ｟ph12｠, b") == ["a", "｟ph12｠", ",", "b"]


def test_a_tokenizer_saved_before_masking_does_not_mask(tmp_path):
    tokenizer = WordTokenizer.build([s for pair in PAIRS for s in pair])
    tokenizer.save(tmp_path)
    info = json.loads((tmp_path / "tokenizer.json").read_text())
    for key in ("mask_placeholders", "placeholder_patterns"):
        del info[key]
    (tmp_path / "tokenizer.json").write_text(json.dumps(info))
    old = load_tokenizer(tmp_path)
    assert not old.mask_placeholders and old.placeholder_ids == ()
    assert mask_placeholders(old, "copy %s").text == "copy %s"
    info["mask_placeholders"] = "yes"
    (tmp_path / "tokenizer.json").write_text(json.dumps(info))
    with pytest.raises(UserError, match="mask_placeholders must be true or false"):
        load_tokenizer(tmp_path)


# ----------------------------------------------------------------------------- decoding


@pytest.fixture(scope="module")
def masking_run(tmp_path_factory):
    """A random-weight model over a masking word vocabulary, saved as a run."""
    tokenizer = build_tokenizer(options("words"), PAIRS)
    tokenizer.source_eos = True
    model = random_model(len(tokenizer), seed=2, dtype=torch.float32, max_len=64)
    folder = tmp_path_factory.mktemp("masking") / "run"
    save_model(folder, model, tokenizer, meta={"preset": "test"})
    return folder


@pytest.mark.parametrize("beam", [1, 3])
def test_translations_hold_the_sources_placeholders_exactly(masking_run, beam):
    model, tokenizer, _ = load_model(masking_run)
    sources = ["unable to read link '%.255s'", "symbolic link '%.250s' size has changed from %jd to %zd",
               "copy %1$s to %2$s", "%d of %d files", "Really delete folder “{0}”?"]
    outputs = translate(model, tokenizer, sources, DecodingOptions(beam=beam))
    for source, output in zip(sources, outputs, strict=True):
        assert Counter(find(output)) == Counter(find(source)), (source, output)
        assert "｟" not in output  # every reserved token restored
    free = translate(model, tokenizer, sources, DecodingOptions(beam=beam, placeholders="free"))
    assert free != outputs  # the random model does not copy them on its own: the constraint did


@pytest.mark.slow
def test_a_run_without_masking_translates_as_before(tmp_path):
    """A run made by this code with masking off reads raw text and decodes without the repeat bound:
    its translations are those of plain encode -> search -> decode, under the one rule every sentence gets
    (issue 48: no number the source lacks, `SearchTokens.for_sources`)."""
    tokenizer = build_tokenizer(Vocabulary(tokenizer="words"), PAIRS)
    assert not tokenizer.mask_placeholders
    model = random_model(len(tokenizer), seed=5, dtype=torch.float32, max_len=64)
    save_model(tmp_path / "run", model, tokenizer, meta={"preset": "test"})
    model, tokenizer, _ = load_model(tmp_path / "run")
    sources = [s for s, _ in PAIRS[:5]]
    outputs = translate(model, tokenizer, sources, DecodingOptions())
    tokens = search_tokens(model, tokenizer)
    assert not tokens.repeat_bound
    for source, output in zip(sources, outputs, strict=True):
        src = torch.tensor([tokenizer.encode(source) + [tokenizer.eos_id]])  # source_eos, as trained
        own = tokens.for_sources([mask_placeholders(tokenizer, source)])
        plain = greedy_decode(model, src, DecodingOptions(), own).sequences()[0]
        assert output == tokenizer.decode(plain)
        assert set(re.findall(r"\d+", output)) <= set(re.findall(r"\d+", source)), (source, output)


@pytest.mark.slow
def test_explain_shows_the_masked_sentence_and_the_restored_translation(masking_run):
    model, tokenizer, _ = load_model(masking_run)
    sentence = "copy %1$s to %2$s"
    for beam in (1, 2):
        walk = explain_search(model, tokenizer, sentence, DecodingOptions(beam=beam, max_new=8), top=3)
        assert walk.masked_source == "copy ｟ph0｠ to ｟ph1｠"
        assert "｟ph0｠" in walk.masked_result and "%1$s" in walk.result and "｟" not in walk.result
        assert walk.result == restore_placeholders(mask_placeholders(tokenizer, sentence), walk.masked_result)
        assert walk.to_dict()["masked_source"] == walk.masked_source  # the JSON and the page read these
        if beam > 1:
            assert walk.beam["masked_source"] == walk.masked_source
            assert "the model read: copy ｟ph0｠ to ｟ph1｠" in render_beam(walk.beam, color=False)
    assert "the model read: copy ｟ph0｠" in render(walk)


# ----------------------------------------------------------------------------- the repeat bound

EOS, PAD, BOS = 3, 0, 2


def digit_loop_table(vocab: int = 10) -> torch.Tensor:
    """After piece 5 the model wants piece 5 again (a loop of digits, as issue 30's '%.255s' -> '2555...');
    <eos> is always its second choice."""
    table = torch.full((vocab, vocab), 0.01)
    table[BOS, 4] = 1.0  # "2"
    table[4, 5] = 1.0  # "5"
    table[5, 5] = 1.0  # "5" again, for ever
    table[:, EOS] = 0.5
    table[:, PAD] = 1e-9
    return table / table.sum(dim=1, keepdim=True)


def test_a_planted_digit_loop_runs_to_the_limit_without_the_bound_and_stops_with_it():
    model = TableModel(digit_loop_table(), max_len=40)
    src = torch.tensor([[4, 5, 5, 6, EOS]])  # "2 5 5 x": the source's longest run of 5 is 2
    tokens = search_tokens(model)
    free = greedy_decode(model, src, DecodingOptions(), replace(tokens, repeat_bound=False)).sequences()[0]
    assert len(free) == 40 and free[-4:] == [5, 5, 5, 5]  # 5 5 5 ... until the length limit (max_len)
    bounded = greedy_decode(model, src, DecodingOptions(), replace(tokens, repeat_bound=True)).sequences()[0]
    assert bounded == [4, 5, 5, 5]  # at most max(3, 2) fives in a row; then <eos>, its next choice
    beam = beam_search(model, src, DecodingOptions(beam=3, alpha=0.0, brevity=0.0),
                       replace(tokens, repeat_bound=True)).sequences()[0]
    assert not any(beam[i:i + 4] == [5] * 4 for i in range(len(beam)))


def span_loop_table(vocab: int = 12) -> torch.Tensor:
    """After <bos> the model writes 4, then 5 6 5 6 5 6 ... for ever (issue 30's "de code de code de code"
    once one piece may not repeat); piece 7 is its second choice after 5 and 6, <eos> third after 7."""
    table = torch.full((vocab, vocab), 0.01)
    table[BOS, 4] = 1.0
    table[4, 5] = table[6, 5] = 1.0
    table[5, 6] = 1.0
    table[5, 7] = table[6, 7] = 0.5
    table[7, EOS] = 1.0
    table[:, PAD] = 1e-9
    return table / table.sum(dim=1, keepdim=True)


def test_a_loop_of_two_pieces_is_cut_at_its_third_copy_unless_the_source_has_it():
    model = TableModel(span_loop_table(), max_len=40)
    tokens = search_tokens(model)
    src = torch.tensor([[4, 5, 6, 8, EOS]])
    free = greedy_decode(model, src, DecodingOptions(), replace(tokens, repeat_bound=False)).sequences()[0]
    assert len(free) == 40 and set(free[-6:]) == {5, 6}  # the loop runs to the length limit
    bounded = greedy_decode(model, src, DecodingOptions(), replace(tokens, repeat_bound=True)).sequences()[0]
    assert bounded == [4, 5, 6, 5, 6, 5, 7]  # "5 6" twice, then 7 instead of the 6 closing a third copy
    beam = beam_search(model, src, DecodingOptions(beam=3, alpha=0.0, brevity=0.0),
                       replace(tokens, repeat_bound=True)).sequences()[0]
    assert not any(beam[i:i + 6] == [5, 6] * 3 for i in range(len(beam)))
    # A source that holds the loop itself ("5 6 5 6 5 6") lets the translation copy it.
    looped = torch.tensor([[5, 6, 5, 6, 5, 6, EOS]])
    bound = RepeatBound(looped, pad_id=PAD)
    for token in [5, 6, 5, 6, 5]:
        bound.chose(torch.tensor([token]))
    assert not torch.isinf(bound(torch.zeros(1, 12))[0, 6])
    bound = RepeatBound(src, pad_id=PAD)
    for token in [5, 6, 5, 6, 5]:
        bound.chose(torch.tensor([token]))
    assert torch.isinf(bound(torch.zeros(1, 12))[0, 6]).item()


def test_the_bound_allows_the_sources_own_runs_and_spares_placeholder_pieces():
    src = torch.tensor([[7, 7, 7, 7, 7, 9, 9, 3]])  # five 7s in a row in the source
    bound = RepeatBound(src, pad_id=0, exempt=(9,))
    for token in [7, 7, 7, 7, 7]:
        logits = torch.zeros(1, 12)
        assert not torch.isinf(bound(logits)[0, 7])
        bound.chose(torch.tensor([token]))
    assert torch.isinf(bound(torch.zeros(1, 12))[0, 7])  # a sixth 7: forbidden
    bound = RepeatBound(src, pad_id=0, exempt=(9,))
    for _ in range(MIN_RUN + 2):
        bound.chose(torch.tensor([9]))
    assert not torch.isinf(bound(torch.zeros(1, 12))[0, 9])  # the placeholder rule counts those
    plain = DecodingRules.for_search(src, search_tokens(TableModel(digit_loop_table())))
    assert plain.rules == []  # no repeat bound asked for, no placeholder piece: decoding runs unruled


def test_repeats_option_auto_follows_the_run(masking_run):
    model, tokenizer, _ = load_model(masking_run)
    assert search_tokens(model, tokenizer).repeat_bound  # a masking run: bounded
    assert not search_tokens(model, tokenizer, DecodingOptions(repeats="free")).repeat_bound
    plain = WordTokenizer.build(["a b"])
    assert not search_tokens(model, plain).repeat_bound
    assert search_tokens(model, plain, DecodingOptions(repeats="bounded")).repeat_bound
    with pytest.raises(UserError, match="--repeats"):
        DecodingOptions(repeats="never").check()


def test_sentencepiece_keeps_reserved_tokens_whole_next_to_digits_and_quotes():
    tokenizer = SentencePieceTokenizer.train([s for pair in masked_pairs(PAIRS) for s in pair], vocab_size=400,
                                             placeholders=RESERVED_TOKENS)
    pieces = tokenizer.tokenize("link '｟ph0｠' 255 ｟ph12｠x")
    assert "｟ph0｠" in pieces and "｟ph12｠" in pieces
    assert tokenizer.decode(tokenizer.encode("link '｟ph0｠' 255")) == "link '｟ph0｠' 255"


def test_placeholders_side_by_side_count_as_kept():
    assert same_placeholders("expected %qD but got %qs", "attendu %qD%qs")  # find() reads "%qD%" there
    assert same_placeholders("%PRODUCTNAME version %VERSION", "%PRODUCTNAME%VERSION")
    assert not same_placeholders("expected %qD but got %qs", "attendu %qD%qs%d")  # one invented
    assert not same_placeholders("%q and %qD", "%qD")  # %q dropped: not found inside %qD
    assert not same_placeholders("%s and %s", "%s")


def test_the_beam_view_names_the_repeat_bound():
    from clearformer.explain.beam import rule_for

    assert rule_for(7, -1.0, float("-inf"), 3, 4, 0, before=[5, 7]) == "forbidden by the repeat bound"
    assert rule_for(6, -1.0, float("-inf"), 3, 4, 0, before=[5, 6, 5, 6, 5]) == "forbidden by the repeat bound"
    assert rule_for(7, -1.0, float("-inf"), 3, 4, 0, before=[5, 8]) == "forbidden by the placeholder rule"
