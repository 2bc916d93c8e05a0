"""A confidence per translation and per word, from what decoding recorded (the output ids) and one forced pass.

    pieces, their output ids ──read_evidence──► Evidence ──features──► row ──Weights.score──► confidence
                                                       └─word_groups─► words, each exp(mean piece log-prob)

A sentence's confidence is the fitted score where the run has weights (`confidence.json`), else the
unsupervised one (`unsupervised_score`). A word's confidence is Bergamot's unsupervised word score read as a
probability: the geometric mean of its pieces' probabilities. An input cut into several sentences gets the
mean of its sentences' confidences, each weighted by its number of pieces, and all their words in order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from clearformer.generate.options import SearchTokens
from clearformer.generate.result import Note, NoteKind, Translation, WordConfidence
from clearformer.quality.estimator import Weights
from clearformer.quality.evidence import Evidence, read_evidence
from clearformer.quality.features import (
    FEATURES,
    bergamot_score,
    sentence_features,
    word_features,
    word_groups,
    word_marker,
)
from clearformer.tokenize import Masked, restore_placeholders


@dataclass(frozen=True)
class PieceEstimate:
    """One translated piece: its feature row (`FEATURES` order), Bergamot's unsupervised score, its words,
    its number of output pieces (<eos> included); `groups[k]`: the output positions (= decoding steps) of
    word k's pieces, `log_probs[t]`: log p of the piece chosen at step t (the page links a word to its steps)."""

    row: tuple[float, ...]
    baseline: float
    words: tuple[WordConfidence, ...]
    pieces: int
    groups: tuple[tuple[int, ...], ...] = ()
    log_probs: tuple[float, ...] = ()


def unsupervised_score(row: Sequence[float]) -> float:
    """The confidence of a run without fitted weights: Bergamot's unsupervised sentence score, exp(mean of the
    words' mean piece log-probability), in [0, 1]."""
    return math.exp(row[list(FEATURES).index("bergamot")])


def _words(tokenizer, evidence: Evidence, marker: str, masked: Masked) -> tuple[tuple[WordConfidence, ...], list]:
    groups = word_groups(tokenizer, evidence.pieces, marker)
    features, _ = word_features(evidence, groups)
    words = tuple(WordConfidence(restore_placeholders(masked, tokenizer.decode([evidence.pieces[i] for i in group])),
                                 math.exp(word.mean)) for group, word in zip(groups, features, strict=True))
    return words, features


def estimate_pieces(model, tokenizer, tokens: SearchTokens, sources: Sequence[list[int]], texts: Sequence[str],
                    masks: Sequence[Masked], outputs: Sequence[list[int]]) -> list[PieceEstimate | None]:
    """Each piece's `PieceEstimate` (None for an empty piece): `sources` its encoder ids, `texts` its source
    text, `masks` how placeholders were masked, `outputs` the ids the search chose (without <eos>)."""
    todo = [index for index, source in enumerate(sources) if source]
    evidence = read_evidence(model, tokens, [sources[i] for i in todo], [outputs[i] for i in todo])
    marker = word_marker(tokenizer)
    estimates: list[PieceEstimate | None] = [None] * len(sources)
    for index, seen in zip(todo, evidence, strict=True):
        words, features = _words(tokenizer, seen, marker, masks[index])
        output_text = restore_placeholders(masks[index], tokenizer.decode(outputs[index]))
        row = sentence_features(seen, features, texts[index], output_text, tokens.source_eos, tokens.length_ratio)
        estimates[index] = PieceEstimate(tuple(row), bergamot_score(features), words, len(seen.pieces),
                                         tuple(word.pieces for word in features), tuple(seen.log_probs.tolist()))
    return estimates


def confidences(estimates: Sequence[PieceEstimate | None], owners: Sequence[int], count: int,
                weights: Weights | None) -> list[tuple[float | None, tuple[WordConfidence, ...]]]:
    """Per input: (confidence, words) from its pieces' estimates (None: an empty input, nothing to judge)."""
    totals: list[list[tuple[float, int]]] = [[] for _ in range(count)]
    words: list[list[WordConfidence]] = [[] for _ in range(count)]
    for estimate, owner in zip(estimates, owners, strict=True):
        if estimate is None:
            continue
        score = weights.score(list(estimate.row)) if weights is not None else unsupervised_score(estimate.row)
        totals[owner].append((score, estimate.pieces))
        words[owner].extend(estimate.words)
    out = []
    for parts, owned in zip(totals, words, strict=True):
        size = sum(n for _, n in parts)
        out.append((sum(s * n for s, n in parts) / size if size else None, tuple(owned)))
    return out


class Confidence:
    """The rater a `Translator` calls after its search (`translate(..., confidence=Confidence(weights))`):
    `weights` the run's fit (None: the unsupervised score); `threshold`: a record under it gets a
    LOW_CONFIDENCE note."""

    def __init__(self, weights: Weights | None, threshold: float | None = None) -> None:
        self.weights, self.threshold = weights, threshold

    def rate(self, model, tokenizer, tokens: SearchTokens, pieces, searched: Sequence[list[int]],
             translations: list[Translation]) -> list[Translation]:
        """The records with their confidence and their words' (see the module docstring)."""
        estimates = estimate_pieces(model, tokenizer, tokens, pieces.sources, pieces.texts, pieces.masks, searched)
        return self.rated(estimates, pieces, translations)

    def rated(self, estimates: Sequence[PieceEstimate | None], pieces, translations: list[Translation]):
        """`rate` once the pieces' estimates are read (`KeptConfidence` keeps them on the way)."""
        rated = confidences(estimates, pieces.owners, pieces.count, self.weights)
        out = []
        for translation, (confidence, words) in zip(translations, rated, strict=True):
            record = replace(translation, confidence=confidence, words=words)
            if self.threshold is not None and confidence is not None and confidence < self.threshold:
                record = record.noted(Note(NoteKind.LOW_CONFIDENCE,
                                           f"confidence {confidence:.2f} is under {self.threshold:g}"))
            out.append(record)
        return out


class KeptConfidence(Confidence):
    """`Confidence` that also keeps what it read, for a front that shows more than the numbers (the page links
    each word to the decoding steps of its pieces): `pieces` (generate/source.py), `searched` (each piece's
    output ids) and `estimates` (each piece's `PieceEstimate`) of the last call."""

    def __init__(self, weights: Weights | None, threshold: float | None = None) -> None:
        super().__init__(weights, threshold)
        self.pieces, self.searched, self.estimates = None, [], []

    def rate(self, model, tokenizer, tokens: SearchTokens, pieces, searched: Sequence[list[int]],
             translations: list[Translation]) -> list[Translation]:
        self.pieces, self.searched = pieces, [list(ids) for ids in searched]
        self.estimates = estimate_pieces(model, tokenizer, tokens, pieces.sources, pieces.texts, pieces.masks,
                                         searched)
        return self.rated(self.estimates, pieces, translations)
