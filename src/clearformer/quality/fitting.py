"""Fitting and measuring the confidence on pairs the project builds offline (a corpus' valid split).

    score_pairs: translate each source as `translate` does, read back its features (quality/estimate.py),
                 and its sentence chrF against the reference (sacrebleu)
    fit_run:     those rows -> `Weights` (quality/estimator.py), saved in the run as confidence.json
    spearman, auc_bad: how well a score orders translations as chrF does, and finds those under chrF 40
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from clearformer.errors import UserError
from clearformer.generate import DecodingOptions
from clearformer.quality.estimate import estimate_pieces
from clearformer.quality.features import FEATURES

BAD_CHRF = 40.0  # a translation under this sentence chrF needs a reviewer (issue 53's threshold)


@dataclass
class Scored:
    """One translated pair: the source, the reference, the translation, its feature row, its chrF."""

    source: str
    reference: str
    hypothesis: str
    row: list[float]
    chrf: float


def read_pairs(path, limit: int | None = None) -> list[tuple[str, str]]:
    """Tab-separated pairs (source, reference[, anything]) of a file; lines without both are skipped."""
    from clearformer.limits import MAX_TEXT_FILE_BYTES
    from clearformer.store.safeio import read_text

    pairs = []
    for line in read_text(path, MAX_TEXT_FILE_BYTES).splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0].strip() and fields[1].strip():
            pairs.append((fields[0].strip(), fields[1].strip()))
    if not pairs:
        raise UserError(f"{path}: no tab-separated pairs (source TAB reference)")
    return pairs[:limit] if limit else pairs


class ReadBack:
    """A rater (`Translator.translate(..., confidence=ReadBack())`) that keeps what it read: each piece's
    output ids (`searched`) and estimate (`estimates`), and the pieces; the records come back unchanged."""

    def __init__(self, estimate: bool = True) -> None:
        self.estimate = estimate
        self.pieces, self.searched, self.estimates = None, [], []

    def rate(self, model, tokenizer, tokens, pieces, searched, translations):
        self.pieces, self.searched = pieces, [list(ids) for ids in searched]
        if self.estimate:
            self.estimates = estimate_pieces(model, tokenizer, tokens, pieces.sources, pieces.texts, pieces.masks,
                                             searched)
        return translations


def score_pairs(translator, pairs: Sequence[tuple[str, str]], options: DecodingOptions,
                progress: Callable[[int], None] | None = None) -> list[Scored]:
    """Each pair translated by `translator` (a `generate.translator.Translator`), read back and scored; a source
    the model cannot read is left out. An input of several sentences gets the mean of its sentences' rows, each
    weighted by its number of pieces."""
    from sacrebleu.metrics import CHRF

    pieces = translator.read([source for source, _ in pairs], options.split, check=False)
    reader = ReadBack()
    texts = [t.text for t in translator.translate(pieces, options, progress, confidence=reader)]
    chrf = CHRF()
    scored = []
    rows = input_rows(reader.estimates, pieces.owners, pieces.count)
    for (source, reference), hypothesis, row in zip(pairs, texts, rows, strict=True):
        if row is not None:
            score = chrf.sentence_score(hypothesis, [reference]).score
            scored.append(Scored(source, reference, hypothesis, row, score))
    return scored


def input_rows(estimates, owners: Sequence[int], count: int) -> list[list[float] | None]:
    """Each input's feature row: its pieces' rows averaged, weighted by their number of output pieces (None: an
    input with nothing translated)."""
    mine: list[list] = [[] for _ in range(count)]
    for estimate, owner in zip(estimates, owners, strict=True):
        if estimate is not None:
            mine[owner].append(estimate)
    rows = []
    for parts in mine:
        if not parts:
            rows.append(None)
            continue
        sizes = torch.tensor([float(p.pieces) for p in parts], dtype=torch.float64)
        values = torch.tensor([p.row for p in parts], dtype=torch.float64)
        rows.append(((values * sizes[:, None]).sum(0) / sizes.sum()).tolist())
    return rows


def _ranks(values: torch.Tensor) -> torch.Tensor:
    """Ranks from 0, ties given their mean rank."""
    order = values.argsort(stable=True)
    ranks = torch.empty_like(values, dtype=torch.float64)
    ranks[order] = torch.arange(len(values), dtype=torch.float64)
    for value in values.unique():
        tied = values == value
        if int(tied.sum()) > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(scores: Sequence[float], chrf: Sequence[float]) -> float:
    """Spearman's rank correlation of a score with chrF (ties at mean rank)."""
    x = _ranks(torch.tensor(list(scores), dtype=torch.float64))
    y = _ranks(torch.tensor(list(chrf), dtype=torch.float64))
    x, y = x - x.mean(), y - y.mean()
    denominator = float((x.square().sum() * y.square().sum()).sqrt())
    return float((x * y).sum()) / denominator if denominator else 0.0


def auc_bad(scores: Sequence[float], chrf: Sequence[float], threshold: float = BAD_CHRF) -> float:
    """ROC AUC of a confidence for finding the translations under chrF `threshold` (low confidence = flagged):
    the chance that a bad translation scores under a good one (Mann-Whitney; ties count half)."""
    values = torch.tensor(list(scores), dtype=torch.float64)
    bad = torch.tensor([f < threshold for f in chrf])
    n_bad, n_good = int(bad.sum()), int((~bad).sum())
    if not n_bad or not n_good:
        return float("nan")
    ranks = _ranks(values) + 1
    good_rank_sum = float(ranks[~bad].sum())
    return (good_rank_sum - n_good * (n_good + 1) / 2) / (n_bad * n_good)


def feature_matrix(scored: Sequence[Scored]) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows (n, len(FEATURES)), chrF / 100 (n,)) of scored pairs."""
    rows = torch.tensor([s.row for s in scored], dtype=torch.float64).reshape(len(scored), len(FEATURES))
    return rows, torch.tensor([s.chrf / 100 for s in scored], dtype=torch.float64)
