"""From a translation's `Evidence` to numbers: Bergamot's word features (the baseline) and the white box's.

Bergamot (browsermt/bergamot-translator, `quality_estimator.cpp`, `mapBPEToWords`) groups the output pieces
into words (a piece that begins with a space begins a word; <eos> is left out) and gives each word

    mean   the mean log-probability of its pieces
    min    the least log-probability of its pieces
    count  how many pieces it has
    overall  the sentence's mean piece log-probability (<eos> left out), the same for every word

which its logistic regression standardises and combines; its unsupervised estimator (`unsupervised_qe.cpp`)
scores a word by its `mean` and the sentence by the mean of its words' means. `bergamot_score` is that
sentence score; `word_groups` and `word_features` are `mapBPEToWords`.

`sentence_features` adds what only the model's insides show (see `FEATURES` for each one's meaning): how
much of the source the cross-attention covered, how much the output owes to the source rather than to the
decoder's language model, whether the decoder's layers agreed early (the logit lens), how long the output is
for its source, whether it copied its source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from clearformer.quality.evidence import Evidence


@dataclass(frozen=True)
class WordFeatures:
    """One output word: the positions of its pieces in the output, and Bergamot's three word features."""

    pieces: tuple[int, ...]
    mean: float
    min: float
    count: int


def word_marker(tokenizer) -> str:
    """The mark a piece that begins a word starts with ("▁" for SentencePiece, "Ġ" for byte BPE), or "" for
    a tokenizer whose every token is a word (the word-level tokenizer): read from how it cuts "a b"."""
    first = tokenizer.tokenize("a b")
    marks = {token[0] for token in first if token and not token[0].isalnum()}
    return marks.pop() if len(marks) == 1 and len(first) == 2 else ""


def word_groups(tokenizer, pieces: tuple[int, ...], marker: str | None = None) -> list[tuple[int, ...]]:
    """Output piece ids (<eos> last, left out) -> the positions of each word's pieces: a piece starting with
    the word marker (or every piece, for a word-level tokenizer) begins a word; the first piece always does."""
    marker = word_marker(tokenizer) if marker is None else marker
    body = pieces[:-1] if pieces and pieces[-1] == tokenizer.eos_id else pieces
    groups: list[list[int]] = []
    for position, piece in enumerate(body):
        token = tokenizer.id_to_token(piece)
        if not groups or not marker or token.startswith(marker):
            groups.append([position])
        else:
            groups[-1].append(position)
    return [tuple(group) for group in groups]


def word_features(evidence: Evidence, groups: list[tuple[int, ...]]) -> tuple[list[WordFeatures], float]:
    """Bergamot's `mapBPEToWords`: each word's (mean, min, count) of its pieces' log-probabilities, and the
    sentence's mean piece log-probability (<eos> left out; 0 for an empty output)."""
    log_probs = evidence.log_probs
    words = [WordFeatures(group, float(log_probs[list(group)].mean()), float(log_probs[list(group)].min()),
                          len(group)) for group in groups]
    body = log_probs[:-1]
    return words, float(body.mean()) if body.numel() else 0.0


def bergamot_score(words: list[WordFeatures]) -> float:
    """Bergamot's unsupervised sentence score, as a probability: exp(mean over words of the word's mean
    piece log-probability) (`UnsupervisedQE::computeSentenceScores`; 1 for an output without words)."""
    return math.exp(sum(word.mean for word in words) / len(words)) if words else 1.0


# Each sentence feature and what it measures; the fitted weights (quality/estimator.py) name them, in this order.
FEATURES = {
    "mean_log_prob": "mean log-probability of the output pieces, <eos> included",
    "bergamot": "Bergamot's unsupervised score: mean over words of each word's mean piece log-probability",
    "min_log_prob": "the least piece log-probability",
    "eos_log_prob": "log-probability of ending where the output ends",
    "low_pieces": "share of pieces the model gave under 0.2",
    "entropy": "mean entropy of the output distributions (nats)",
    "source_gain": "mean of log p(piece | source) - log p(piece | empty source): how much the source mattered",
    "source_free": "share of pieces as likely (within 0.1 nats) without the source as with it",
    "uncovered": "share of source pieces (<eos> aside) the cross-attention gave under 0.3 in all",
    "coverage_penalty": "GNMT's coverage penalty: mean over source pieces of log(min(attention received, 1))",
    "attention_entropy": "mean entropy of the cross-attention rows (how diffuse the looking was)",
    "lens_agree": "share of pieces an earlier decoder layer already put on top (the logit lens)",
    "lens_prob": "mean probability earlier decoder layers gave the chosen piece",
    "length_ratio": "|log(output pieces / (source pieces x the training pairs' ratio))|",
    "copied_words": "share of the output's words that are words of the source, as written",
    "source_words": "log(1 + number of source words)",
    "pieces_per_word": "source pieces per source word: how much the vocabulary had to cut its words",
    "output_chars": "log(1 + characters of the output): chrF of a short output swings on one letter",
    "identical": "1 when the output is the source unchanged (a silent copy)",
}


def sentence_features(evidence: Evidence, words: list[WordFeatures], source_text: str, output_text: str,
                      source_eos: bool, length_ratio: float) -> list[float]:
    """The `FEATURES` of one translation, in their order."""
    log_probs = evidence.log_probs
    gain = evidence.log_probs - evidence.prior
    source_len = len(evidence.source) - (1 if source_eos and len(evidence.source) > 1 else 0)
    attention = evidence.attention
    if attention.shape[1]:
        received = attention[:, :source_len].sum(0)                        # (S,) attention each source piece got
        uncovered = float((received < 0.3).float().mean())
        coverage = float(received.clamp(min=1e-6, max=1.0).log().mean())
        rows = attention.clamp(min=1e-9)
        attention_entropy = float(-(rows * rows.log()).sum(-1).mean())
    else:
        uncovered, coverage, attention_entropy = 0.0, 0.0, 0.0
    lens_agree = float(evidence.lens_top.mean()) if evidence.lens_top.numel() else 1.0
    lens_prob = float(evidence.lens.mean()) if evidence.lens.numel() else float(log_probs.exp().mean())
    ratio = length_ratio if length_ratio > 0 else 1.0
    length = abs(math.log(max(len(evidence.pieces) - 1, 1) / (max(source_len, 1) * ratio)))
    source_words = set(source_text.split())
    output_words = output_text.split()
    copied = sum(word in source_words for word in output_words) / len(output_words) if output_words else 1.0
    return [
        float(log_probs.mean()),
        math.log(bergamot_score(words)),
        float(log_probs.min()),
        float(log_probs[-1]),
        float((log_probs.exp() < 0.2).float().mean()),
        float(evidence.entropy.mean()),
        float(gain.mean()),
        float((gain.abs() < 0.1).float().mean()),
        uncovered,
        coverage,
        attention_entropy,
        lens_agree,
        lens_prob,
        length,
        copied,
        math.log1p(len(source_text.split())),
        source_len / max(len(source_text.split()), 1),
        math.log1p(len(output_text)),
        float(output_text.strip() == source_text.strip()),
    ]


def as_matrix(rows: list[list[float]]) -> torch.Tensor:
    """Feature rows -> (n, len(FEATURES)) float64."""
    return torch.tensor(rows, dtype=torch.float64).reshape(len(rows), len(FEATURES))
