"""Token-count batching with length bucketing: how sentence pairs become padded tensors.

A batch holds as many sentence pairs as fit a budget of tokens *after padding* (the size of the
tensors the model really processes), not a fixed number of sentences: short sentences travel in
big batches, long ones in small batches, and every step does about the same work. Sorting by
length before cutting batches (bucketing) puts similar lengths together, so little of each
batch is padding; the batches are then shuffled so the model does not see lengths in order.

    pairs -> encode -> Example(src ids, tgt ids) -> sort by length -> cut at the budget
          -> shuffle batches (seeded per epoch) -> collate: src (batch, src_len),
             tgt_in = <bos> y (batch, tgt_len), tgt_out = y <eos> (batch, tgt_len)

The source is the sentence's tokens only; the decoder input is the target shifted right
(<bos> first) and the labels are the target followed by <eos> (teacher forcing).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Example:
    """One encoded sentence pair: source ids and target ids, neither with <bos>/<eos>."""

    src: tuple[int, ...]
    tgt: tuple[int, ...]

    @property
    def src_len(self) -> int:
        return len(self.src)

    @property
    def tgt_len(self) -> int:
        """Length of the decoder input and of the labels (the target plus <bos> or <eos>)."""
        return len(self.tgt) + 1


@dataclass
class Batch:
    """Padded tensors of one batch and what they cost.

    src (batch, src_len), tgt_in (batch, tgt_len), tgt_out (batch, tgt_len), all int64 padded
    with pad_id; `real_tokens` and `padded_tokens` count source + target cells.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    pad_id: int

    @property
    def target_tokens(self) -> int:
        """Label tokens the loss counts (<eos> included, padding excluded)."""
        return int((self.tgt_out != self.pad_id).sum())

    @property
    def real_tokens(self) -> int:
        return int((self.src != self.pad_id).sum()) + int((self.tgt_out != self.pad_id).sum())

    @property
    def padded_tokens(self) -> int:
        return self.src.numel() + self.tgt_out.numel()

    @property
    def padding_share(self) -> float:
        """Fraction of the source and target cells that are padding (0 = no waste)."""
        return 1.0 - self.real_tokens / max(self.padded_tokens, 1)

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device), self.pad_id)


def padded_cost(examples: list[Example]) -> int:
    """Tokens of the larger padded tensor of a batch: len(batch) * max(longest source, longest target)."""
    if not examples:
        return 0
    longest = max(max(e.src_len for e in examples), max(e.tgt_len for e in examples))
    return len(examples) * longest


def make_batches(examples: list[Example], max_tokens: int, seed: int | None = None,
                 max_sentences: int | None = None) -> list[list[int]]:
    """Cut `examples` into batches of indices whose padded size stays within `max_tokens`.

    Each batch satisfies len(batch) * max(src_len, tgt_len) <= max_tokens, so neither the padded
    source nor the padded target tensor exceeds the budget. Examples are sorted by (target
    length, source length) with ties broken by a seeded random order, cut greedily, and the batch
    order is shuffled with `seed` (None keeps sorted order, for validation). An example longer than
    the budget by itself is an error the caller must prevent (see `drop_long`).
    """
    if max_tokens <= 0:
        raise ValueError("max_tokens must be positive")
    generator = torch.Generator().manual_seed(seed if seed is not None else 0)
    tie_break = torch.randperm(len(examples), generator=generator).tolist()
    order = sorted(range(len(examples)),
                   key=lambda i: (examples[i].tgt_len, examples[i].src_len, tie_break[i]))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index in order:
        example = examples[index]
        size = max(example.src_len, example.tgt_len)
        if size > max_tokens:
            raise ValueError(f"example {index} has {size} tokens, more than the batch budget {max_tokens}")
        grown = max(longest, size)
        full = max_sentences is not None and len(current) >= max_sentences
        if current and (grown * (len(current) + 1) > max_tokens or full):
            batches.append(current)
            current, grown = [], size
        current.append(index)
        longest = grown
    if current:
        batches.append(current)
    if seed is not None:
        shuffle = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[i] for i in shuffle]
    return batches


def collate(examples: list[Example], pad_id: int, bos_id: int, eos_id: int) -> Batch:
    """Pad a list of examples into tensors; tgt_in = <bos> y, tgt_out = y <eos> (teacher forcing)."""
    batch = len(examples)
    src_len = max(e.src_len for e in examples)
    tgt_len = max(e.tgt_len for e in examples)
    src = torch.full((batch, src_len), pad_id, dtype=torch.long)
    tgt_in = torch.full((batch, tgt_len), pad_id, dtype=torch.long)
    tgt_out = torch.full((batch, tgt_len), pad_id, dtype=torch.long)
    for row, example in enumerate(examples):
        if example.src:
            src[row, : example.src_len] = torch.tensor(example.src)
        tgt_in[row, : example.tgt_len] = torch.tensor((bos_id,) + example.tgt)
        tgt_out[row, : example.tgt_len] = torch.tensor(example.tgt + (eos_id,))
    return Batch(src, tgt_in, tgt_out, pad_id)


def drop_long(examples: list[Example], max_len: int) -> tuple[list[Example], int]:
    """Examples whose source and decoder sequences fit `max_len` positions, and how many were dropped."""
    kept = [e for e in examples if e.src_len <= max_len and e.tgt_len <= max_len and e.src_len > 0]
    return kept, len(examples) - len(kept)


class BatchStream:
    """An endless, resumable sequence of batches: epoch after epoch, each in its own seeded order.

    The position is (epoch, index of the next batch in that epoch), two integers a checkpoint can
    store; the same seed and position give the same batches, which is what lets `--resume`
    continue exactly where a killed run stopped.
    """

    def __init__(self, examples: list[Example], max_tokens: int, seed: int, pad_id: int, bos_id: int,
                 eos_id: int, epoch: int = 0, index: int = 0) -> None:
        if not examples:
            raise ValueError("no training examples")
        self.examples = examples
        self.max_tokens = max_tokens
        self.seed = seed
        self.ids = (pad_id, bos_id, eos_id)
        self.epoch = epoch
        self.index = index
        self._order_epoch: int | None = None
        self._order: list[list[int]] = []

    def batches_of_epoch(self, epoch: int) -> list[list[int]]:
        if self._order_epoch != epoch:
            self._order = make_batches(self.examples, self.max_tokens, seed=self.seed * 100_003 + epoch)
            self._order_epoch = epoch
        return self._order

    def next(self) -> Batch:
        order = self.batches_of_epoch(self.epoch)
        if self.index >= len(order):
            self.epoch, self.index = self.epoch + 1, 0
            order = self.batches_of_epoch(self.epoch)
        indices = order[self.index]
        self.index += 1
        return collate([self.examples[i] for i in indices], *self.ids)

    def take(self, count: int) -> list[Batch]:
        return [self.next() for _ in range(count)]

    @property
    def position(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}
