"""Where the training sentences come from, and how they become token ids.

Sources, in order of precedence: --tsv FILE or --src FILE --tgt FILE (a user corpus; a fixed 2%
is held out for validation), --data DIR (a corpus directory with train.tsv, valid.tsv and
optionally test.tsv) or --data CATALOGUE.po (its translated entries, data/catalogue_pairs.py; 10% held
out), else the preset's default (the built-in phrase set for toy presets,
data/en-fr-software otherwise).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from clearformer.data.batching import Example
from clearformer.data.catalogue_pairs import is_catalogue, read_catalogue_pairs
from clearformer.data.parallel import read_parallel
from clearformer.data.paths import default_data_dir
from clearformer.data.toy import toy_splits
from clearformer.errors import UserError
from clearformer.limits import shorten
from clearformer.tokenize import WordTokenizer, encode_source, encode_target
from clearformer.tokenize.fold import TargetFold
from clearformer.tokenize.placeholders import (
    RESERVED_TOKENS,
    PlaceholderError,
    check_patterns,
    frequent_placeholders,
    mask,
    mask_target,
)
from clearformer.tokenize.subword import SentencePieceTokenizer
from clearformer.train.options import DataOptions, Vocabulary, is_toy

DEFAULT_CORPUS = "en-fr-software"
Pairs = list[tuple[str, str]]
# A catalogue's pairs are few (hundreds): 2% would validate on a handful, and the kept model would be the luck of
# those few (BENCHMARKS.md, "Learning from the catalogue"); a tenth of them choose it.
CATALOGUE_VALID_SHARE, CATALOGUE_VALID_LIMIT = 0.1, 300


def read_pairs(paths: tuple[str, ...], skip_bad: bool = False) -> Pairs:
    """Sentence pairs of one TSV file (one path) or two line-aligned files (source, target).

    The data package's reader validates every line; a bad one is a UserError naming file:line
    (or, with skip_bad, is skipped and counted in the log).
    """
    for path in paths:
        if not Path(path).exists():  # a device or FIFO is read too, bounded (clearformer.store.safeio)
            raise UserError(f"{path}: no such file")
    return [(str(s), str(t)) for s, t in read_parallel(list(paths), skip_bad=skip_bad)]


def hold_out(pairs: Pairs, share: float = 0.02, limit: int = 2000) -> tuple[Pairs, Pairs]:
    """(train, valid): every k-th pair goes to validation so that about `share` of them do."""
    if len(pairs) < 2:
        raise UserError("a corpus needs at least 2 sentence pairs (one to train on, one to validate)")
    count = min(limit, max(1, int(len(pairs) * share)))
    step = len(pairs) // count
    valid_index = set(range(step - 1, len(pairs), step)[:count])
    train = [p for i, p in enumerate(pairs) if i not in valid_index]
    valid = [p for i, p in enumerate(pairs) if i in valid_index]
    return train, valid


def load_splits(data: DataOptions, preset: str) -> tuple[dict[str, Pairs], str, dict]:
    """({"train": pairs, "valid": pairs}, a one-line description, what meta.json records about the data).

    The record tells `clearformer evaluate` where the test split is ("dataset": "toy" or
    "data_dir": the corpus directory).
    """
    if data.tsv or data.src:
        paths = (data.tsv,) if data.tsv else (data.src, data.tgt)
        train, valid = hold_out(read_pairs(paths, data.skip_bad))
        return {"train": train, "valid": valid}, " + ".join(paths), {"data_files": list(paths)}
    if data.data_dir is None and is_toy(preset):
        splits = toy_splits()
        toy = {"train": splits["train"], "valid": splits["valid"]}
        return toy, "built-in toy phrase set", {"dataset": "toy"}
    if is_catalogue(data.data_dir):  # a team's translated catalogue
        train, valid = hold_out(read_catalogue_pairs(data.data_dir), CATALOGUE_VALID_SHARE, CATALOGUE_VALID_LIMIT)
        return {"train": train, "valid": valid}, data.data_dir, {"data_files": [data.data_dir]}
    directory = Path(data.data_dir) if data.data_dir else default_corpus_dir()
    if not directory.is_dir():
        raise UserError(f"{directory}: no such corpus directory")
    splits = {}
    for name in ("train", "valid"):
        path = directory / f"{name}.tsv"
        if not path.is_file():
            raise UserError(f"{path}: missing (a corpus directory holds train.tsv, valid.tsv, test.tsv)")
        # A corpus directory is a prepared data set: a line the reader rejects is skipped (and counted
        # in the log) rather than ending the run; user files (--tsv, --src/--tgt) stop unless --skip-bad.
        splits[name] = read_pairs((str(path),), skip_bad=True)
    return splits, str(directory), {"data_dir": str(directory.resolve())}


def default_corpus_dir() -> Path:
    directory = Path(default_data_dir(DEFAULT_CORPUS))
    if not (directory / "train.tsv").is_file():
        raise UserError(f"{directory}: corpus not built yet; run `clearformer data build {DEFAULT_CORPUS}` "
                        "or pass --data DIR")
    return directory


def build_tokenizer(vocabulary: Vocabulary, train: Pairs, seed: int = 1):
    """A joint source/target tokenizer learned from the training split only, framing sources as
    vocabulary.source_eos says and masking placeholders as vocabulary.mask_placeholders says (then it is
    learnt from the masked sentences, and the reserved tokens ｟ph0｠... are in its vocabulary)."""
    patterns = check_patterns(vocabulary.placeholder_patterns)
    facts = {"source_eos": vocabulary.source_eos, "mask_placeholders": vocabulary.mask_placeholders,
             "placeholder_patterns": list(patterns)}  # the tokenizer is built with them (tokenize/facts.py)
    if vocabulary.mask_placeholders:
        train = masked_pairs(train, patterns)
    sentences = [s for pair in train for s in pair]
    reserved = RESERVED_TOKENS if vocabulary.mask_placeholders else ()
    if vocabulary.tokenizer == "words":
        tokenizer = WordTokenizer.build(sentences, reserved=reserved, facts=facts)
    elif vocabulary.mask_placeholders:  # the reserved tokens are the single pieces decoding copies
        tokenizer = SentencePieceTokenizer.train(sentences, vocab_size=vocabulary.vocab_size, seed=seed,
                                                 placeholders=reserved, facts=facts)
    else:
        # Placeholders frequent in the training sources stay single pieces (copied whole, constrainable).
        symbols = frequent_placeholders(s for s, _ in train) if vocabulary.placeholder_pieces else ()
        tokenizer = SentencePieceTokenizer.train(sentences, vocab_size=vocabulary.vocab_size, seed=seed,
                                                 placeholders=symbols, facts=facts)
    return tokenizer


def masked_pairs(pairs: Pairs, patterns: tuple[str, ...] = ()) -> Pairs:
    """Pairs as a masking model reads and writes them (tokenize/placeholders.py `mask`, `mask_target`)."""
    masked = []
    for number, (source, target) in enumerate(pairs, start=1):
        with naming_the_pair(number, source):
            source_masked = mask(source, patterns)
            masked.append((source_masked.text, mask_target(target, source_masked.originals, patterns)))
    return masked


@contextmanager
def naming_the_pair(number: int, source: str):
    """A PlaceholderError (a runaway user pattern, too many placeholders) as one line naming the pair."""
    try:
        yield
    except PlaceholderError as error:
        raise UserError(f"training pair {number} ({shorten(source, 60)!r}): {error}") from None


def length_ratio(examples: list[Example], source_eos: bool) -> float:
    """Target tokens per source token over encoded pairs (each source's <eos> not counted): the
    tokenizer's `length_ratio` (tokenize/facts.py) that decoding's brevity penalty expects (`generate/brevity.py`)."""
    source = sum(len(example.src) - int(source_eos) for example in examples)
    return round(sum(len(example.tgt) for example in examples) / source, 4) if source > 0 else 0.0


def encode_pairs(tokenizer, pairs: Pairs, fold: TargetFold | None = None) -> list[Example]:
    """Sources as the model reads them (`encode_source`), targets as plain ids, masked as their source
    when the tokenizer masks placeholders (`encode_target`; <bos>/<eos> come later), their characters the
    vocabulary cannot write folded first (`fold`, tokenize/fold.py)."""
    examples = []
    for number, (source, target) in enumerate(pairs, start=1):
        with naming_the_pair(number, source):
            examples.append(Example(tuple(encode_source(tokenizer, source)),
                                    tuple(encode_target(tokenizer, source, target, fold))))
    return examples
