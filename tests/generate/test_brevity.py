"""The brevity penalty on <eos> (generate/brevity.py): its formula, and what it does to greedy and beam search."""

from __future__ import annotations

import json

import pytest
import torch
from gen_helpers import TableModel

from clearformer.data.batching import Example
from clearformer.generate import DecodingOptions, SearchTokens, beam_search, greedy_decode, search_tokens
from clearformer.generate.brevity import BrevityPenalty, eos_bonus, expected_lengths
from clearformer.generate.facts import DecodingFacts
from clearformer.tokenize import SPECIALS, WordTokenizer, load_tokenizer
from clearformer.train.corpus import length_ratio

BOS, EOS, PAD, A, B = 2, 3, 0, 4, 5


class EagerToEndModel(TableModel):
    """Next-token probabilities that depend only on the last token: after <bos> A 0.6, B 0.4; after A,
    <eos> 0.40, A 0.35, B 0.25; after B, <eos> 0.9. Left alone, greedy stops after one token."""

    def __init__(self) -> None:
        table = torch.full((6, 6), 1e-6, dtype=torch.float64)
        table[BOS, A], table[BOS, B] = 0.6, 0.4
        table[A, EOS], table[A, A], table[A, B] = 0.40, 0.35, 0.25
        table[B, EOS], table[B, A], table[B, B] = 0.9, 0.05, 0.05
        table[[PAD, 1, EOS]] = 1 / 6
        super().__init__(table, max_len=32)


def test_bonus_is_a_one_sided_gaussian_length_log_density():
    expected = torch.tensor([4.0, 2.0, 10.0])
    assert torch.isinf(eos_bonus(0, expected, 1.0)).all()  # an empty translation never ends
    got = eos_bonus(2, expected, 3.0)  # -w (e - t)^2 / e
    assert got.tolist() == pytest.approx([-3 * 4 / 4, 0.0, -3 * 64 / 10])
    assert (eos_bonus(50, expected, 1.0) == 0).all()  # long enough: no effect at all
    # The same shortfall in proportion costs a long sentence more than a short one.
    assert eos_bonus(30, torch.tensor([40.0]), 1.0) < eos_bonus(3, torch.tensor([4.0]), 1.0)


def test_expected_lengths_count_source_tokens_without_padding_or_the_source_eos():
    src = torch.tensor([[7, 8, 9, EOS], [7, EOS, PAD, PAD]])
    assert expected_lengths(src, PAD, 1.5, source_eos=True).tolist() == pytest.approx([4.5, 1.5])
    assert expected_lengths(src, PAD, 1.0, source_eos=False).tolist() == pytest.approx([4.0, 2.0])


def measured(ratio: float = 2.0, source_eos: bool = False) -> SearchTokens:
    """What `search_tokens` reads off a tokenizer whose training measured `ratio`."""
    return SearchTokens(BOS, EOS, PAD, (), ratio, source_eos)


def test_off_without_a_measured_ratio_or_with_weight_zero():
    src = torch.tensor([[A, B]])
    assert BrevityPenalty.for_batch(src, measured(0.0), 1.0) is None
    assert BrevityPenalty.for_batch(src, measured(2.0), 0.0) is None
    plain = greedy_decode(EagerToEndModel(), src).sequences()
    unpenalised = greedy_decode(EagerToEndModel(), src, DecodingOptions(brevity=0.0), measured())
    assert unpenalised.sequences() == plain == [[A]]


def test_greedy_goes_on_until_ending_costs_less_than_the_alternative():
    # 2 source tokens x ratio 2 = 4 expected. After A: log 0.40 - (4 - t)^2 / 4 against log 0.35 for A
    # again: t = 1, 2, 3 go on (A), t = 4 ends.
    model = EagerToEndModel()
    decoded = greedy_decode(model, torch.tensor([[A, B]]), DecodingOptions(brevity=1.0), measured())
    assert decoded.sequences() == [[A, A, A, A]]
    # A weaker weight moves <eos> less: at t = 3, log 0.40 - 0.3 (4 - 3)^2 / 4 > log 0.35.
    weaker = greedy_decode(model, torch.tensor([[A, B]]), DecodingOptions(brevity=0.3), measured())
    assert weaker.sequences() == [[A, A, A]]


def test_beam_one_equals_greedy_and_beam_scores_carry_the_bonus():
    model = EagerToEndModel()
    src = torch.tensor([[A, B], [B, PAD]])
    for weight in (0.5, 1.0, 3.0):
        greedy = greedy_decode(model, src, DecodingOptions(brevity=weight), measured()).sequences()
        beam_one = beam_search(model, src, DecodingOptions(beam=1, alpha=0.0, brevity=weight), measured())
        assert beam_one.sequences() == greedy
    decoded = beam_search(model, src, DecodingOptions(beam=3, alpha=0.0, brevity=1.0), measured())
    for row, source_tokens in enumerate((2, 1)):
        tokens = decoded.tokens[row, : int(decoded.lengths[row])].tolist()
        assert tokens[-1] == EOS
        expected = 2.0 * source_tokens
        bonus = -max(0.0, expected - (len(tokens) - 1)) ** 2 / expected
        assert float(decoded.scores[row]) == pytest.approx(model.log_prob(tokens) + bonus, abs=1e-4)  # float32 scores


def test_brevity_makes_beam_translations_no_shorter():
    model = EagerToEndModel()
    src = torch.tensor([[A, B, A], [B, A, PAD]])
    plain = beam_search(model, src, DecodingOptions(beam=3, alpha=0.6, brevity=0.0), measured())
    longer = beam_search(model, src, DecodingOptions(beam=3, alpha=0.6, brevity=2.0), measured())
    assert (longer.lengths >= plain.lengths).all() and (longer.lengths > plain.lengths).any()


def test_length_ratio_counts_target_tokens_per_source_token():
    examples = [Example((5, 6, EOS), (7, 8, 9)), Example((5, EOS), (7,))]
    assert length_ratio(examples, source_eos=True) == pytest.approx(4 / 3, abs=1e-4)  # kept to 4 decimals
    assert length_ratio(examples, source_eos=False) == pytest.approx(4 / 5)
    assert length_ratio([], source_eos=True) == 0.0


def test_a_run_without_the_fact_is_unmeasured(tmp_path):
    """A run folder of an earlier release whose tokenizer.json has no length_ratio (and no decoding.json)."""
    tokenizer = WordTokenizer(list(SPECIALS) + ["a"])
    tokenizer.save(tmp_path)
    assert "length_ratio" not in json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    facts = DecodingFacts.read(tmp_path, len(tokenizer))
    assert facts.length_ratio == 0.0
    tokens = search_tokens(EagerToEndModel(), load_tokenizer(tmp_path), facts=facts)
    assert BrevityPenalty.for_batch(torch.tensor([[A]]), tokens, 2.0) is None
