"""Corpus evaluation with sacrebleu: BLEU and chrF of a model's translations, with their signatures.

The signature (`BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x`) says exactly how
a score was computed, so it can be compared with scores reported elsewhere. References are the
raw target sentences: sacrebleu tokenizes hypotheses and references itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clearformer.data.paths import default_data_dir
from clearformer.data.toy import read_tsv_pairs, toy_splits
from clearformer.errors import UserError
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.options import DecodingOptions
from clearformer.generate.translator import PyTorchTranslator, Translator
from clearformer.tokenize.placeholders import PlaceholderScore, placeholder_score

DEFAULT_CORPUS = "en-fr-software"
SPLITS = ("train", "valid", "test")


@dataclass
class Evaluation:
    """Hypotheses and the two corpus scores, each with sacrebleu's signature and full line."""

    hypotheses: list[str]
    bleu: float
    chrf: float
    bleu_line: str  # e.g. "BLEU|nrefs:1|...|version:2.6.0 = 31.20 62.1/38.4/25.3/16.9 (BP = ...)"
    chrf_line: str
    signatures: dict[str, str] = field(default_factory=dict)
    ratio: float = 1.0  # hypothesis length / reference length, in sacrebleu's 13a tokens
    buckets: list[LengthBucket] = field(default_factory=list)
    placeholders: PlaceholderScore | None = None  # when the sources were given

    def summary(self) -> str:
        """The lines `clearformer evaluate` prints under the two signatures."""
        lines = [f"length ratio {self.ratio:.3f} (translation / reference tokens); by reference length: "
                 + ", ".join(f"{b.name} {b.ratio:.2f} ({b.sentences})" for b in self.buckets if b.sentences)]
        if self.placeholders is not None:
            lines.append(str(self.placeholders))
        return "\n".join(lines)


@dataclass
class LengthBucket:
    """Sentences whose reference has `low`..`high` tokens (13a; high None = no upper end)."""

    low: int
    high: int | None
    sentences: int = 0
    hypothesis_tokens: int = 0
    reference_tokens: int = 0

    @property
    def name(self) -> str:
        return f"{self.low}+" if self.high is None else f"{self.low}-{self.high}"

    @property
    def ratio(self) -> float:
        return self.hypothesis_tokens / self.reference_tokens if self.reference_tokens else 0.0


BUCKET_EDGES = (0, 5, 10, 15, 20, 25, 30)  # 0-4, 5-9, ..., 25-29, 30+


def length_buckets(hypotheses: list[str], references: list[str]) -> list[LengthBucket]:
    """Length ratio by reference length: where do translations come out short?

    Lengths are counted in sacrebleu's 13a tokens, as BLEU's brevity penalty counts them.
    """
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    tokenize = Tokenizer13a()
    buckets = [LengthBucket(low, high - 1 if high else None)
               for low, high in zip(BUCKET_EDGES, (*BUCKET_EDGES[1:], None), strict=True)]
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        ref_len = len(tokenize(reference).split())
        bucket = next(b for b in reversed(buckets) if ref_len >= b.low)
        bucket.sentences += 1
        bucket.reference_tokens += ref_len
        bucket.hypothesis_tokens += len(tokenize(hypothesis).split())
    return buckets


def score_corpus(hypotheses: list[str], references: list[str], sources: list[str] | None = None) -> Evaluation:
    """BLEU and chrF of hypotheses against one reference each (same order, same count), the length
    ratio overall and by reference length, and, given the sources, the placeholder score."""
    from sacrebleu.metrics import BLEU, CHRF

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    bleu_signature, chrf_signature = str(bleu.get_signature()), str(chrf.get_signature())
    return Evaluation(hypotheses, bleu_score.score, chrf_score.score,
                      bleu_score.format(signature=bleu_signature),
                      chrf_score.format(signature=chrf_signature),
                      {"bleu": bleu_signature, "chrf": chrf_signature},
                      ratio=bleu_score.sys_len / bleu_score.ref_len if bleu_score.ref_len else 0.0,
                      buckets=length_buckets(hypotheses, references),
                      placeholders=placeholder_score(sources, hypotheses) if sources is not None else None)


def split_file(split: str, data: str | None, meta: dict) -> Path | None:
    """The TSV of `split`: --data (a .tsv file, or a folder holding SPLIT.tsv), else the corpus the
    checkpoint was trained on (meta.json "data_dir" or "dataset"), else data/en-fr-software.
    None means the built-in toy set (a checkpoint of the toy-translate preset)."""
    if data:
        path = Path(data)
        return path / f"{split}.tsv" if path.is_dir() else path
    if meta.get("data_dir"):
        return Path(meta["data_dir"]) / f"{split}.tsv"
    dataset = meta.get("dataset") or meta.get("corpus")
    if dataset == "toy" or (not dataset and meta.get("preset") == "toy-translate"):
        return None
    return default_data_dir(dataset or DEFAULT_CORPUS) / f"{split}.tsv"


def load_pairs(split: str, data: str | None, meta: dict) -> tuple[list[tuple[str, str]], str]:
    """(pairs, name for messages) of the split to evaluate."""
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}; choose one of: {', '.join(SPLITS)}")
    path = split_file(split, data, meta)
    if path is None:
        return toy_splits()[split], f"toy-translate {split} split"
    if not path.exists():
        hint = "" if data else " (build it with `clearformer data build en-fr-software` or pass --data PATH)"
        raise UserError(f"{path}: no such file{hint}")
    pairs = read_tsv_pairs(path)
    if not pairs:
        raise UserError(f"{path}: no sentence pairs to evaluate")
    return pairs, str(path)


def evaluate_model(model, tokenizer, pairs: list[tuple[str, str]], options: DecodingOptions | None = None,
                   progress: Callable[[int], None] | None = None,
                   facts: DecodingFacts = NO_FACTS) -> tuple[Evaluation, int]:
    """`evaluate_translator` with clearformer's own decoder over `model`, `tokenizer` and the run's decoding
    `facts` (generate/facts.py)."""
    return evaluate_translator(PyTorchTranslator(model, tokenizer, facts=facts), pairs, options, progress)


def evaluate_translator(translator: Translator, pairs: list[tuple[str, str]], options: DecodingOptions | None = None,
                        progress: Callable[[int], None] | None = None) -> tuple[Evaluation, int]:
    """Translate every source of `pairs` with `options` (default: greedy), as `translate` does
    (`options.split` cuts a source of more than 25 words into its sentences), and score against the targets.

    Sources longer than the model's max_len are cut to max_len tokens (counted in the second
    value returned) rather than dropped, so every reference keeps its hypothesis.
    """
    options = (options or DecodingOptions()).check()
    max_len = translator.model.config.max_len
    texts = [source for source, _ in pairs]
    pieces = translator.read(texts, options.split, check=False)
    truncated = sum(len(ids) > max_len for ids in pieces.sources)
    pieces.sources = [ids[:max_len] for ids in pieces.sources]
    hypotheses = [result.text for result in translator.translate(pieces, options, progress)]
    return score_corpus(hypotheses, [target for _, target in pairs], texts), truncated
