"""generate/top.py: block-wise argmax and top-k give what torch's own reductions give."""

from __future__ import annotations

import pytest
import torch

from clearformer.generate.top import BLOCK, row_argmax, row_topk


@pytest.mark.parametrize("vocab", [40, 1024, 8000, 8003, 8000 + BLOCK - 1])
def test_row_argmax_equals_argmax(vocab):
    torch.manual_seed(vocab)
    logits = torch.randn(33, vocab)
    logits[0, -1] = 100.0  # the maximum in the tail (or the last block)
    logits[1, 0] = 100.0  # ... in the first entry
    logits[2, :] = float("-inf")
    logits[2, vocab // 2] = 0.0  # a row of -inf but one entry (a forbidden vocabulary)
    assert torch.equal(row_argmax(logits), logits.argmax(dim=-1))


def test_row_argmax_returns_the_first_of_equal_maxima():
    vocab = 8000 + 17
    logits = torch.zeros(4, vocab)
    logits[0, [5, 9]] = 3.0  # twice in one block
    logits[1, [BLOCK * 7 + 1, BLOCK * 90]] = 3.0  # in two blocks
    logits[2, [vocab - 70, vocab - 3]] = 3.0  # in the last full block and in the tail (whose window overlaps it)
    logits[3, [vocab - 5, vocab - 2]] = 3.0  # twice in the tail
    assert row_argmax(logits).tolist() == [5, BLOCK * 7 + 1, vocab - 70, vocab - 5]


@pytest.mark.parametrize("vocab,k", [(8000, 8), (8003, 8), (4096, 2), (8000, 1), (300, 8)])
def test_row_topk_finds_the_same_entries_as_topk(vocab, k):
    torch.manual_seed(k * vocab)
    logits = torch.randn(130, vocab)
    logits[0, -3:] = 50.0 + torch.arange(3.0)  # the best three in the tail
    logits[1, :k] = 60.0 - torch.arange(float(k))  # the best k in the first block
    logits[2, ::BLOCK] = 70.0 + torch.arange(float(len(range(0, vocab, BLOCK))))  # one winner per block
    logits[3, 3] = float("-inf")  # a forbidden token (beam search's <eos> before min_length)
    values, indices = row_topk(logits, k)
    expected_values, expected_indices = logits.topk(k, dim=-1)
    assert torch.equal(values, expected_values)  # sorted, best first
    assert torch.equal(indices.sort(dim=-1).values, expected_indices.sort(dim=-1).values)
    assert torch.equal(logits.gather(1, indices), values)


def test_views_without_unit_stride_take_torchs_own_reduction():
    logits = torch.randn(8000, 32).t()  # a transposed view: (32, 8000) with stride (1, 32)
    assert torch.equal(row_argmax(logits), logits.argmax(dim=-1))
    assert torch.equal(row_topk(logits, 4)[0], logits.topk(4, dim=-1)[0])
