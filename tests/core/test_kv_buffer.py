"""The in-place growing cache: the same tensors as torch.cat / index_select, without copying the past."""

from __future__ import annotations

import torch

from clearformer.model.kv_buffer import MIN_CAPACITY, append_in_time, capacity, select_rows


def test_append_equals_cat_and_writes_in_place_while_there_is_room():
    steps = [torch.randn(3, 2, 1, 4) for _ in range(40)]
    cached, pointers = None, set()
    for t, new in enumerate(steps):
        cached = append_in_time(cached, new, dim=2)
        assert torch.equal(cached, torch.cat(steps[: t + 1], dim=2))
        pointers.add(cached.data_ptr())
        assert capacity(cached, 2) >= t + 1
    # 40 steps from a buffer of MIN_CAPACITY, doubling: 16 -> 34 -> 70, so three buffers in all
    assert MIN_CAPACITY == 16 and len(pointers) == 3


def test_append_several_positions_and_time_on_dim_1():
    first, second = torch.randn(2, 5, 3), torch.randn(2, 4, 3)
    joined = append_in_time(append_in_time(None, first, dim=1), second, dim=1)
    assert torch.equal(joined, torch.cat([first, second], dim=1))


def test_foreign_tensors_are_copied_never_written_past():
    base = torch.randn(3, 2, 8, 4)
    slice_ = base[:, :, :5]  # the strides of a buffer with room, but not one made here
    before = base.clone()
    new = torch.randn(3, 2, 1, 4)
    assert capacity(slice_, 2) == 5
    joined = append_in_time(slice_, new, dim=2)
    assert torch.equal(joined, torch.cat([slice_, new], dim=2))
    transposed = torch.randn(3, 1, 2, 4).transpose(1, 2)  # (3, 2, 1, 4), as split_heads returns it
    assert capacity(transposed, 2) == 1
    assert torch.equal(append_in_time(transposed, new, dim=2), torch.cat([transposed, new], dim=2))
    assert torch.equal(base, before)


def test_select_rows_equals_index_select_then_the_cache_grows_by_concatenation():
    cached = None
    for _ in range(5):
        cached = append_in_time(cached, torch.randn(4, 2, 1, 3), dim=2)
    index = torch.tensor([3, 3, 0, 1, 2, 2])
    selected = select_rows(cached, index)
    assert torch.equal(selected, cached.index_select(0, index))
    assert selected.is_contiguous() and capacity(selected, 2) == 5  # compact: no room
    new = torch.randn(6, 2, 1, 3)
    grown = append_in_time(selected, new, dim=2)
    assert torch.equal(grown, torch.cat([cached.index_select(0, index), new], dim=2))
    assert grown.is_contiguous() and capacity(grown, 2) == 6
    again = append_in_time(grown, new, dim=2)  # still concatenating, never writing past a tensor's end
    assert torch.equal(again, torch.cat([grown, new], dim=2)) and again.is_contiguous()
