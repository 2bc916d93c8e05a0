"""Token-count batching: budgets respected, every pair once, padding share right, resumable order."""

import random

import pytest
import torch

from clearformer.data.batching import BatchStream, Example, collate, drop_long, make_batches, padded_cost

PAD, BOS, EOS = 0, 2, 3


def corpus(count=300, seed=0):
    rng = random.Random(seed)
    return [Example(tuple(rng.randint(4, 50) for _ in range(rng.randint(1, 30))),
                    tuple(rng.randint(4, 50) for _ in range(rng.randint(1, 30)))) for _ in range(count)]


@pytest.mark.parametrize("budget", [40, 100, 512])
def test_no_batch_over_budget_and_every_example_once(budget):
    examples = corpus()
    batches = make_batches(examples, budget, seed=5)
    assert sorted(i for b in batches for i in b) == list(range(len(examples)))
    for indices in batches:
        chosen = [examples[i] for i in indices]
        assert padded_cost(chosen) <= budget
        tensors = collate(chosen, PAD, BOS, EOS)
        assert tensors.src.numel() <= budget and tensors.tgt_in.numel() <= budget


def test_bucketing_keeps_padding_low():
    examples = corpus(1000)
    batches = make_batches(examples, 600, seed=1)
    padded = real = 0
    for indices in batches:
        batch = collate([examples[i] for i in indices], PAD, BOS, EOS)
        padded, real = padded + batch.padded_tokens, real + batch.real_tokens
    # Sorted by target length, the target side is nearly padding-free; random batches would waste ~40%.
    assert 1 - real / padded < 0.35


def test_padding_share_by_hand():
    examples = [Example((5, 6, 7), (8,)), Example((5,), (8, 9, 10))]
    batch = collate(examples, PAD, BOS, EOS)
    # src (2, 3): 4 real of 6; tgt_out (2, 4): y <eos> -> 2 + 4 = 6 real of 8.
    assert batch.src.tolist() == [[5, 6, 7], [5, 0, 0]]
    assert batch.tgt_in.tolist() == [[BOS, 8, 0, 0], [BOS, 8, 9, 10]]
    assert batch.tgt_out.tolist() == [[8, EOS, 0, 0], [8, 9, 10, EOS]]
    assert batch.real_tokens == 10 and batch.padded_tokens == 14
    assert batch.padding_share == pytest.approx(4 / 14)
    assert batch.target_tokens == 6


def test_seeded_order_and_validation_order():
    examples = corpus()
    assert make_batches(examples, 100, seed=3) == make_batches(examples, 100, seed=3)
    assert make_batches(examples, 100, seed=3) != make_batches(examples, 100, seed=4)
    unshuffled = make_batches(examples, 100)
    lengths = [max(examples[i].tgt_len for i in b) for b in unshuffled]
    assert lengths == sorted(lengths)


def test_stream_resumes_at_its_position():
    examples = corpus(30)
    straight = BatchStream(examples, 80, seed=9, pad_id=PAD, bos_id=BOS, eos_id=EOS)
    first = straight.take(7)
    position = straight.position
    rest = straight.take(40)  # crosses into later epochs
    resumed = BatchStream(examples, 80, seed=9, pad_id=PAD, bos_id=BOS, eos_id=EOS, **position)
    again = resumed.take(40)
    assert len(first) == 7
    for a, b in zip(rest, again, strict=True):
        assert torch.equal(a.src, b.src) and torch.equal(a.tgt_out, b.tgt_out)
    assert resumed.epoch >= 1


def test_drop_long_and_oversized_example():
    examples = [Example((1,) * 10, (1,) * 3), Example((1,) * 3, (1,) * 3), Example((), (1,))]
    kept, dropped = drop_long(examples, 8)
    assert kept == [examples[1]] and dropped == 2
    with pytest.raises(ValueError):
        make_batches([examples[0]], 5)
