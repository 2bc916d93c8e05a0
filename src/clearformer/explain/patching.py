"""Activation patching: which parts of the clean run carry what the corrupted run lacks.

Both sources are teacher-forced on the clean translation y (the model's own, from `translate`'s search)
through `model(src, tgt)`, the call training makes (`encode`, `decode`, `project`). The metric is the
log-probability of the clean translation,

    M(run) = sum_t log p(y_t | y_<t, source)

and a point's share is how much of M(clean) - M(corrupted) copying that point alone from the clean run
into the corrupted run gives back:

    restored = (M(corrupted with the point patched) - M(corrupted)) / (M(clean) - M(corrupted))

(1: all of it, 0: none). The points are recorded names (`record/trace.py`), written by hooks:
`encoder.layers.L.output[p]` (one source position of a layer's output), `decoder.layers.L.output` (every
target position), `STACK.layers.L.ATTENTION.head.H` (head H's output, before W^O, at every position) and
`encoder.output` (the whole memory). The patched runs go as rows of one batch (row 0 the corrupted source
untouched, row 1 the clean source, then a row per point), so no run pays for another.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from clearformer.errors import UserError
from clearformer.model.attention import MultiHeadAttention
from clearformer.record.trace import Hooks, Point

ROWS_PER_BATCH = 64  # patched runs per forward pass (bounds memory on the `small` model)


@dataclass(frozen=True)
class PatchPoint:
    """One point: shown as `name`; patched by copying `where` (a recorded name) at `index` (after the batch
    axis: a source position for a layer output, a head for head outputs, everything for None)."""

    name: str
    where: str
    index: int | None = None


def patch_points(model, src_len: int) -> list[PatchPoint]:
    """Every point of a translation model, in the order the data flow through them."""
    points: list[PatchPoint] = []
    for layer in range(len(model.encoder.layers)):
        points += [PatchPoint(f"encoder.layers.{layer}.output[{p}]", f"encoder.layers.{layer}.output", p)
                   for p in range(src_len)]
    points.append(PatchPoint("encoder.output", "encoder.output"))
    points += [PatchPoint(f"decoder.layers.{layer}.output", f"decoder.layers.{layer}.output")
               for layer in range(len(model.decoder.layers))]
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            where = f"{module.trace_name}.head_outputs"
            points += [PatchPoint(f"{module.trace_name}.head.{h}", where, h) for h in range(module.n_heads)]
    return points


def clean_translation_logprob(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """logits (rows, tgt_len, vocab), target (tgt_len,) -> M per row (rows,): the summed log p of the target."""
    logprobs = torch.log_softmax(logits.double(), dim=-1)
    return logprobs.gather(2, target.expand(logits.shape[0], -1)[..., None])[..., 0].sum(dim=1)


def capture(model, src: torch.Tensor, tgt_in: torch.Tensor, names: set[str]) -> dict[str, torch.Tensor]:
    """The values at `names` in the run of src (1, src_len) teacher-forced on tgt_in (1, tgt_len)."""
    seen: dict[str, torch.Tensor] = {}

    def keep(value: torch.Tensor, point: Point) -> None:
        seen[point.name] = value.detach().clone()

    with torch.no_grad(), Hooks({name: keep for name in names}):
        model(src, tgt_in)
    return seen


def patcher(rows: list[tuple[int, PatchPoint]], clean: torch.Tensor):
    """The hook that copies the clean run's value (1, ...) into each (row, point) of the batch."""

    def patch(value: torch.Tensor, where: Point) -> torch.Tensor:
        value = value.clone()
        for row, point in rows:
            if point.index is None:
                value[row] = clean[0]
            else:
                value[row, point.index] = clean[0, point.index]
        return value

    return patch


def patched_metrics(model, clean: torch.Tensor, corrupted: torch.Tensor, tgt_in: torch.Tensor,
                    target: torch.Tensor, points: list[PatchPoint]) -> tuple[float, float, list[float]]:
    """(M(clean), M(corrupted), M of the corrupted run with each point patched alone)."""
    saved = capture(model, clean, tgt_in, {p.where for p in points})
    rows = [None, None, *points]  # row 0: corrupted, row 1: clean, then one row per point
    metrics: list[float] = []
    for start in range(0, len(rows), ROWS_PER_BATCH):
        chunk = rows[start:start + ROWS_PER_BATCH]
        by_name: dict[str, list[tuple[int, PatchPoint]]] = {}
        for row, point in enumerate(chunk):
            if point is not None:
                by_name.setdefault(point.where, []).append((row, point))
        sources = torch.cat([clean if start + row == 1 else corrupted for row in range(len(chunk))])
        hooks = {name: patcher(rows, saved[name]) for name, rows in by_name.items() if name in saved}
        with torch.no_grad(), Hooks(hooks):
            logits = model(sources, tgt_in.expand(len(chunk), -1))
        metrics += clean_translation_logprob(logits, target).tolist()
    return metrics[1], metrics[0], metrics[2:]


def activation_patching(model, clean_ids: list[int], corrupted_ids: list[int], translation: list[int],
                        bos_id: int) -> tuple[float, float, list[tuple[PatchPoint, float]]]:
    """Each point's restored share (module docstring) -> (M(clean), M(corrupted), [(point, restored)]).

    clean_ids, corrupted_ids: the two sources as the model reads them; translation: the clean translation's
    ids, <eos> last, teacher-forced after <bos>. A UserError when the sources differ in length (positions
    would not correspond) or when they give the translation the same score (nothing to restore)."""
    if len(clean_ids) != len(corrupted_ids):
        raise UserError(f"the clean source is {len(clean_ids)} tokens and the corrupted one {len(corrupted_ids)}: "
                        "patching copies position by position, so they must have the same number of tokens "
                        "(change words one for one)")
    # In float64, on a copy: the rows of one batch may be rounded differently by the matrix kernels, and in
    # float32 that moves a share by ~1e-6 where the two sentences score the clean translation alike.
    model = model if next(model.parameters()).dtype == torch.float64 else copy.deepcopy(model).double()
    device = next(model.parameters()).device
    clean, corrupted = (torch.tensor([ids], device=device) for ids in (clean_ids, corrupted_ids))
    target = torch.tensor(translation, device=device)
    tgt_in = torch.tensor([[bos_id, *translation[:-1]]], device=device)
    model.eval()
    points = patch_points(model, len(clean_ids))
    m_clean, m_corrupted, patched = patched_metrics(model, clean, corrupted, tgt_in, target, points)
    gap = m_clean - m_corrupted
    if abs(gap) < 1e-6:
        raise UserError("the two sources give the clean translation the same log-probability "
                        f"({m_clean:.6f}): there is nothing for a patch to restore")
    return m_clean, m_corrupted, [(p, (m - m_corrupted) / gap) for p, m in zip(points, patched, strict=True)]
