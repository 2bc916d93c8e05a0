"""A decoding cache that grows in place: keys and values kept in buffers with room along the time axis.

`torch.cat([cached, new])` at every decoding step copies the whole cache to add one token: O(t) memory
traffic per step and O(t^2) over a sentence. Here the cache is a view of the first t positions of a
buffer with room for more (capacity doubling, as a Python list grows), so a step writes only the new
token's keys and values after the old ones. The view is an ordinary tensor, (rows, heads, t, d_head)
for multi-head attention, so attention reads it as it read the concatenated cache.

Beam search reorders the rows at every step (`select_rows`), and a reorder copies the whole cache
anyway; from the first reorder on, a cache grows by concatenation again. Profiled on beam 4 (batch 32,
30 tokens), copying the reordered rows into buffers with room cost more than it saved: the reorder's
index_select took ~3x as long (it moves the spare room too, or writes strided) and the attention
products over strided views ~1.4x as long as over compact ones.

A cache has one future: appending twice to the same view writes both times into the same slot
(the earlier result then reads the later token). Decoding never does that; to branch a cache, copy it.

Only views this module returned are grown in place (they carry their buffer's capacity as an
attribute); any other tensor (a fresh projection, a slice of something else, a tensor a benchmark
filled in) is copied into a new buffer first, so nothing past its end is ever written.
"""

from __future__ import annotations

import torch

MIN_CAPACITY = 16  # positions; a short sentence never regrows
ROOM_ATTRIBUTE = "_clearformer_room"  # set on the views returned here: their buffer's capacity
REORDERED = -1  # the capacity attribute of a reordered cache: it grows by torch.cat from then on


def capacity(cached: torch.Tensor, dim: int) -> int:
    """How many positions along `dim` the buffer behind `cached` holds: its length when `cached` is
    not a view this module returned (then the next append copies it)."""
    return max(getattr(cached, ROOM_ATTRIBUTE, 0), cached.shape[dim])


def _new_buffer(like: torch.Tensor, dim: int, length: int) -> torch.Tensor:
    """An empty view of `length` positions along `dim` of a buffer with room for at least twice as many."""
    room = max(MIN_CAPACITY, 2 * length)
    shape = list(like.shape)
    shape[dim] = room
    return _tagged(like.new_empty(shape).narrow(dim, 0, length), room)


def _tagged(view: torch.Tensor, room: int) -> torch.Tensor:
    setattr(view, ROOM_ATTRIBUTE, room)
    return view


def append_in_time(cached: torch.Tensor | None, new: torch.Tensor, dim: int) -> torch.Tensor:
    """cached (..., t, ...) and new (..., q, ...), time along `dim` -> both joined, (..., t + q, ...).

    The same numbers as torch.cat([cached, new], dim); the result is a view into a buffer with room
    after it, and when `cached` is such a view with room left, only `new` is written.
    """
    if cached is None:
        joined = _new_buffer(new, dim, new.shape[dim])
        joined.copy_(new)
        return joined
    if getattr(cached, ROOM_ATTRIBUTE, None) == REORDERED:
        return _tagged(torch.cat([cached, new], dim=dim), REORDERED)
    t, q = cached.shape[dim], new.shape[dim]
    room = capacity(cached, dim)
    if t + q <= room:
        shape = (*cached.shape[:dim], t + q, *cached.shape[dim + 1:])
        joined = _tagged(cached.as_strided(shape, cached.stride(), cached.storage_offset()), room)
    else:
        joined = _new_buffer(cached, dim, t + q)
        joined.narrow(dim, 0, t).copy_(cached)
    joined.narrow(dim, t, q).copy_(new)
    return joined


def select_rows(cached: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """cached.index_select(0, index), compact, marked to grow by concatenation from now on."""
    return _tagged(cached.index_select(0, index), REORDERED)
