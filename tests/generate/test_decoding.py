"""Greedy decoding and beam search: the cache changes nothing, beam 1 is greedy, beams search better."""

from __future__ import annotations

import math

import pytest
import torch
from gen_helpers import TableModel, random_model
from tolerance import float32_close
from torch import nn

from clearformer.config import MLAConfig
from clearformer.generate import DecodingOptions, beam_search, greedy_decode, length_penalty, pad_batch
from clearformer.record.trace import Recorder

BOS, EOS, PAD = 2, 3, 0

VARIANTS = {
    "paper": {},
    "prenorm-learned-gqa": dict(norm_first=True, positional="learned", n_heads=4, n_kv_heads=2),
    "rope-tied": dict(positional="rope", tie_embeddings="all"),
    "mla": dict(positional="rope", attention="mla",
                mla=MLAConfig(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)),
}


def sources(vocab: int = 30, lengths=(7, 3, 5, 1, 9)) -> torch.Tensor:
    """A padded batch of random source sentences of different lengths."""
    generator = torch.Generator().manual_seed(5)
    rows = [torch.randint(4, vocab, (n,), generator=generator).tolist() for n in lengths]
    return pad_batch(rows, PAD)


def teacher_forced_log_prob(model, src: torch.Tensor, tokens: list[int]) -> float:
    """log p(tokens | src) by one full forward pass (no decoding loop involved)."""
    tgt_in = torch.tensor([[BOS] + tokens[:-1]])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(src, tgt_in).double(), dim=-1)[0]
    return float(log_probs[torch.arange(len(tokens)), torch.tensor(tokens)].sum())


@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_greedy_equals_uncached(variant):
    model = random_model(**VARIANTS[variant])
    src = sources()
    cached = greedy_decode(model, src, DecodingOptions(max_extra=12))
    uncached = greedy_decode(model, src, DecodingOptions(max_extra=12, use_cache=False))
    assert torch.equal(cached.tokens, uncached.tokens)
    assert torch.equal(cached.lengths, uncached.lengths)
    assert torch.allclose(cached.scores, uncached.scores)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("beam", [2, 4])
def test_cached_beam_equals_uncached(variant, beam):
    model = random_model(**VARIANTS[variant])
    src = sources()
    cached = beam_search(model, src, DecodingOptions(beam=beam, max_extra=12))
    uncached = beam_search(model, src, DecodingOptions(beam=beam, max_extra=12, use_cache=False))
    assert torch.equal(cached.tokens, uncached.tokens)
    assert torch.allclose(cached.scores, uncached.scores)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_equals_greedy(seed):
    model = random_model(seed=seed)
    src = sources()
    greedy = greedy_decode(model, src, DecodingOptions(max_extra=15))
    beam = beam_search(model, src, DecodingOptions(beam=1, alpha=0.0, max_extra=15))
    assert greedy.sequences() == beam.sequences()
    assert torch.equal(greedy.lengths, beam.lengths)
    assert torch.allclose(greedy.scores.double(), beam.scores.double(), atol=1e-4)


def test_batch_decoding_equals_one_by_one():
    model = random_model()
    src = sources()
    for decode in (lambda s: greedy_decode(model, s, DecodingOptions(max_extra=10)),
                   lambda s: beam_search(model, s, DecodingOptions(beam=3, max_extra=10))):
        together = decode(src).sequences()
        alone = [decode(src[i: i + 1, : int((src[i] != PAD).sum())]).sequences()[0] for i in range(len(src))]
        assert together == alone


def test_output_length_limit_is_source_length_plus_max_extra_capped_by_max_len():
    model = random_model()
    src = sources(lengths=(2, 6, 30))
    # <eos> forbidden: runs to the limit
    decoded = greedy_decode(model, src, DecodingOptions(max_extra=3, min_length=100))
    assert decoded.lengths.tolist() == [5, 9, model.config.max_len]
    assert not (decoded.tokens == EOS).any()
    fixed = beam_search(model, src, DecodingOptions(beam=2, max_new=4, min_length=4))
    assert fixed.lengths.tolist() == [4, 4, 4]


def test_length_penalty_is_gnmt_formula():
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(10, 0.6) == pytest.approx(((5 + 10) / 6) ** 0.6)
    assert length_penalty(7, 0.0) == 1.0
    assert length_penalty(torch.tensor([1.0, 13.0]), 1.0).tolist() == pytest.approx([1.0, 3.0])


def test_beam_scores_are_teacher_forced_log_probs_over_length_penalty():
    model = random_model()
    src = sources()
    decoded = beam_search(model, src, DecodingOptions(beam=3, alpha=0.6, max_extra=10))
    for row in range(len(src)):
        length = int(decoded.lengths[row])
        tokens = decoded.tokens[row, :length].tolist()
        one = src[row: row + 1, : int((src[row] != PAD).sum())]
        expected = teacher_forced_log_prob(model, one, tokens) / length_penalty(length, 0.6)
        assert float(decoded.scores[row]) == pytest.approx(expected, abs=1e-4)


class BigramModel(TableModel):
    """A stand-in model whose next-token probabilities depend only on the last token (a hand-written table).

    Vocabulary: <pad> <unk> <bos> <eos> A B. After <bos>: A 0.55, B 0.45. After A the best is <eos>
    with only 0.35; after B, <eos> has 0.9. Greedy takes A then <eos> (p = 0.1925); the better
    translation is B <eos> (p = 0.405), which greedy never sees.
    """

    def __init__(self) -> None:
        table = torch.full((6, 6), 1e-6, dtype=torch.float64)
        table[BOS, 4], table[BOS, 5] = 0.55, 0.45
        table[4, EOS], table[4, 4], table[4, 5] = 0.35, 0.33, 0.32
        table[5, EOS], table[5, 4], table[5, 5] = 0.9, 0.05, 0.05
        table[[PAD, 1, EOS]] = 1 / 6
        super().__init__(table, max_len=16)


def test_beam_finds_a_better_hypothesis_than_greedy():
    model = BigramModel()
    src = torch.tensor([[4, 5]])
    greedy = greedy_decode(model, src)
    beam = beam_search(model, src, DecodingOptions(beam=2, alpha=0.0))
    assert greedy.sequences() == [[4]]
    assert beam.sequences() == [[5]]
    assert float(greedy.scores[0]) == pytest.approx(math.log(0.55 * 0.35), abs=1e-5)
    assert float(beam.scores[0]) == pytest.approx(math.log(0.45 * 0.9), abs=1e-5)
    assert beam.scores[0] > greedy.scores[0]


def test_recorder_sees_encoder_once_and_every_step():
    model = random_model()
    src = sources(lengths=(4,))
    with Recorder() as recorder:
        decoded = greedy_decode(model, src, DecodingOptions(max_extra=6))
    length = int(decoded.lengths[0])
    chosen = recorder.find("generate.chosen")
    assert [r.step for r in chosen] == list(range(length))
    assert [int(r.value[0]) for r in chosen] == decoded.tokens[0, :length].tolist()
    assert {r.step for r in recorder.find("encoder.output")} == {None}
    assert sorted({r.step for r in recorder.find("decoder.output")}) == list(range(length))
    assert recorder.step == length - 1
    untraced = greedy_decode(model, src, DecodingOptions(max_extra=6))
    assert torch.equal(decoded.tokens, untraced.tokens)  # tracing changes nothing


def test_one_query_attention_path_equals_fused_kernel():
    """One query per row through `fast_attention` (the fused kernel): blocked rows give zeros, not NaN."""
    from clearformer.model.attention import fast_attention

    q, k, v = torch.randn(3, 2, 1, 8), torch.randn(3, 2, 5, 8), torch.randn(3, 2, 5, 8)
    rows = [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]]
    blocked = torch.tensor(rows, dtype=torch.bool)[:, None, None]
    for mask in (None, torch.ones(1, 5, dtype=torch.bool), blocked):
        fused = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert float32_close(fast_attention(q, k, v, mask), fused, depth=8 + 5)  # d_k, then 5 keys
    assert torch.all(fast_attention(q, k, v, blocked)[2] == 0)  # nothing to attend to: zeros, not NaN


class ChainModel(TableModel):
    """A next-token table where the long translation wins only once the length penalty is applied.

    Vocabulary: <pad> <unk> <bos> <eos> A B C D. After <bos>: A 0.6, B 0.4; A -> <eos> 0.9;
    B -> C -> D -> <eos>, each 0.99. "A" has p = 0.54, "B C D" p = 0.388; with alpha = 2 the
    penalty ((5 + n) / 6)^2 makes "B C D" the better one (-0.420 against -0.453), but after two
    tokens its prefix "B C", scored at the current length, still looks worse (-0.680).
    """

    def __init__(self) -> None:
        table = torch.full((8, 8), 1e-6, dtype=torch.float64)
        table[BOS, 4], table[BOS, 5] = 0.6, 0.4
        table[4, EOS], table[4, 4], table[4, 5] = 0.9, 0.05, 0.05
        table[5, 6], table[6, 7], table[7, EOS] = 0.99, 0.99, 0.99
        table[[PAD, 1, EOS]] = 1 / 8
        super().__init__(table, max_len=32)


def test_bound_stopping_finds_the_longer_translation_the_current_length_rule_gives_up_on():
    model = ChainModel()
    src = torch.tensor([[4, 5]])
    current = beam_search(model, src, DecodingOptions(beam=2, alpha=2.0, max_extra=10, stop="current"))
    bound = beam_search(model, src, DecodingOptions(beam=2, alpha=2.0, max_extra=10, stop="bound"))
    assert current.sequences() == [[4]]
    assert bound.sequences() == [[5, 6, 7]]
    log_p = torch.log_softmax(model.log_table, dim=-1)  # the rows of the table, normalised

    def score(tokens):
        path = [BOS, *tokens, EOS]
        total = sum(log_p[a, b] for a, b in zip(path[:-1], path[1:], strict=True))
        return float(total) / length_penalty(len(path) - 1, 2.0)

    assert float(current.scores[0]) == pytest.approx(score([4]), abs=1e-5)
    assert float(bound.scores[0]) == pytest.approx(score([5, 6, 7]), abs=1e-5)
    assert score([5, 6, 7]) > score([4])


def test_stopping_rules_agree_without_length_penalty_and_bound_never_scores_lower():
    model = random_model()
    src = sources()
    same = [beam_search(model, src, DecodingOptions(beam=3, alpha=0.0, max_extra=8, stop=rule))
            for rule in ("bound", "current")]
    assert torch.equal(same[0].tokens, same[1].tokens)
    assert torch.equal(same[0].scores, same[1].scores)
    for alpha in (0.6, 2.0):
        bound = beam_search(model, src, DecodingOptions(beam=3, alpha=alpha, max_extra=8, stop="bound"))
        current = beam_search(model, src, DecodingOptions(beam=3, alpha=alpha, max_extra=8, stop="current"))
        assert bool((bound.scores >= current.scores - 1e-6).all())


def test_unknown_stopping_rule_is_a_user_error():
    from clearformer.errors import UserError

    with pytest.raises(UserError, match="--early-stop must be one of current, bound, not 'never'"):
        beam_search(BigramModel(), torch.tensor([[4]]), DecodingOptions(beam=2, stop="never"))
