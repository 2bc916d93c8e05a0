"""Corpus evaluation with sacrebleu: BLEU and chrF of a model's translations, with their signatures.

The signature (`BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x`) says exactly how
a score was computed, so it can be compared with scores reported elsewhere. References are the
raw target sentences: sacrebleu tokenizes hypotheses and references itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clearformer.errors import UserError

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


def score_corpus(hypotheses: list[str], references: list[str]) -> Evaluation:
    """BLEU and chrF of hypotheses against one reference each (same order, same count)."""
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
                      {"bleu": bleu_signature, "chrf": chrf_signature})


def split_file(split: str, data: str | None, meta: dict) -> Path | None:
    """The TSV of `split`: --data (a .tsv file, or a folder holding SPLIT.tsv), else the corpus the
    checkpoint was trained on (meta.json "data_dir" or "dataset"), else data/en-fr-software.
    None means the built-in toy set (a checkpoint of the toy-translate preset)."""
    from clearformer.data.paths import default_data_dir

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
    from clearformer.data.toy import read_tsv_pairs, toy_splits

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


def evaluate_model(model, tokenizer, pairs: list[tuple[str, str]], beam: int = 1, alpha: float = 0.6,
                   max_extra: int = 50, batch_size: int = 32,
                   progress: Callable[[int], None] | None = None, stop: str = "current") -> tuple[Evaluation, int]:
    """Translate every source of `pairs` and score against the targets.

    Sources longer than the model's max_len are cut to max_len tokens (counted in the second
    value returned) rather than dropped, so every reference keeps its hypothesis.
    """
    from clearformer.generate.translate import encode_source, translate_ids

    max_len = model.config.max_len
    sources = [encode_source(tokenizer, source, model.config.source_eos) for source, _ in pairs]
    truncated = sum(len(ids) > max_len for ids in sources)
    hypotheses = translate_ids(model, tokenizer, [ids[:max_len] for ids in sources], beam=beam, alpha=alpha,
                               max_extra=max_extra, batch_size=batch_size, progress=progress, stop=stop)
    return score_corpus(hypotheses, [target for _, target in pairs]), truncated
