"""Batches of a few fixed shapes, so a compiled training step compiles a bounded number of times.

Token-count batching (data/batching.py) gives every batch its own (rows, length): a step compiled
for fixed shapes would recompile at almost every batch, and one compiled with dynamic shapes cannot
be replayed as a CUDA graph and tunes its kernels for no size in particular. Here every batch is
cut for one of a few lengths L (`lengths`), and holds exactly budget // L rows of L positions on
each side: pairs whose longer side fits L (and not the bucket below) are grouped, shuffled within
their bucket, and cut into batches of budget // L pairs; the last batch of a bucket is filled with
empty rows (<pad> everywhere: no label, so no loss and no gradient). The shapes are then
`shapes()`, one per length in use, and the step projects every target position (the labels of
padding cells are <pad>, which the loss skips) instead of selecting the labelled ones, whose count
changes from batch to batch.

    examples -> bucket by max(src_len, tgt_len) -> shuffle within buckets (seeded per epoch)
             -> cut budget // L pairs per batch -> collate, padded to (budget // L, L) -> shuffle batches

The padding this costs (positions between a pair's length and its bucket's L) is measured by the
GPU window (benchmarks/gpu_window.py) next to the step time it buys.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from clearformer.data.batching import Batch, Example, collate

DEFAULT_LENGTHS = (16, 32, 48, 64, 96, 128, 256)


@dataclass(frozen=True)
class FixedShapes:
    """budget: padded tokens per side of every batch; lengths: the sequence lengths batches are padded to."""

    budget: int
    lengths: tuple[int, ...] = DEFAULT_LENGTHS

    def __post_init__(self) -> None:
        if list(self.lengths) != sorted(set(self.lengths)) or not self.lengths or self.lengths[0] < 1:
            raise ValueError(f"lengths must rise strictly from at least 1, not {self.lengths}")
        if self.budget < self.lengths[-1]:
            raise ValueError(f"a budget of {self.budget} tokens cannot hold one row of {self.lengths[-1]}")

    def length_for(self, example: Example) -> int:
        """The bucket length of a pair: the smallest L that holds its source and its decoder sequence."""
        longest = max(example.src_len, example.tgt_len)
        for length in self.lengths:
            if longest <= length:
                return length
        raise ValueError(f"a pair of {longest} tokens is longer than the longest bucket ({self.lengths[-1]})")

    def rows(self, length: int) -> int:
        return self.budget // length

    def shapes(self) -> list[tuple[int, int]]:
        """Every (rows, length) a batch can have."""
        return [(self.rows(length), length) for length in self.lengths]

    def fits(self, example: Example) -> bool:
        return max(example.src_len, example.tgt_len) <= self.lengths[-1] and example.src_len > 0

    def pad(self, examples: list[Example], length: int, pad_id: int, bos_id: int, eos_id: int) -> Batch:
        """collate `examples` (at most rows(length), each fitting `length`) into exactly (rows(length), length)."""
        batch = collate(examples, pad_id, bos_id, eos_id)
        rows = self.rows(length)
        if len(examples) > rows:
            raise ValueError(f"{len(examples)} pairs do not fit {rows} rows of {length}")

        def padded(tensor: torch.Tensor) -> torch.Tensor:
            out = torch.full((rows, length), pad_id, dtype=tensor.dtype)
            out[: tensor.shape[0], : tensor.shape[1]] = tensor
            return out

        return Batch(padded(batch.src), padded(batch.tgt_in), padded(batch.tgt_out), pad_id)

    def batches(self, examples: list[Example], seed: int, pad_id: int, bos_id: int, eos_id: int) -> list[Batch]:
        """One epoch of `examples` (each must `fit`) in fixed-shape batches, in a seeded order."""
        generator = torch.Generator().manual_seed(seed)
        buckets: dict[int, list[Example]] = {}
        for example in examples:
            buckets.setdefault(self.length_for(example), []).append(example)
        cut: list[tuple[int, list[Example]]] = []
        for length, members in sorted(buckets.items()):
            order = torch.randperm(len(members), generator=generator).tolist()
            rows = self.rows(length)
            cut += [(length, [members[i] for i in order[start: start + rows]]) for start in range(0, len(order), rows)]
        shuffle = torch.randperm(len(cut), generator=generator).tolist()
        return [self.pad(cut[i][1], cut[i][0], pad_id, bos_id, eos_id) for i in shuffle]
