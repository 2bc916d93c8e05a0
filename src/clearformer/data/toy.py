"""The built-in English -> French phrase set of the `toy-translate` preset.

`toy_en_fr.tsv` (next to this file) holds 781 short, correct sentence pairs, one
`english<TAB>french` pair a line, including the seeds' sentences ("I love you" -> "Je t'aime",
"I love AI" -> "J'aime l'IA", "Hello world" -> "Bonjour le monde"). Most pairs come from a small
grammar (six subject pronouns x twelve verbs conjugated by person x objects, object pronouns
with French elision "Je t'aime", negation "Je ne t'aime pas", adjective agreement "La maison
est belle") plus everyday phrases, so the model has to learn word order, conjugation and
elision rather than memorise three lines.

The split is fixed: every 20th pair (never a seed sentence) goes to `valid`, the next one to
`test`, so the validation BLEU measures translation of sentences the model never saw.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from clearformer.errors import UserError
from clearformer.limits import MAX_CORPUS_FILE_BYTES
from clearformer.store.safeio import read_text

TOY_FILE = "toy_en_fr.tsv"
# The sentences the seeds walk through: always in the training split.
SEED_SOURCES = ("I love you", "I love AI", "Hello world")


def read_tsv_pairs(path: Path | str, text: str | None = None) -> list[tuple[str, str]]:
    """(source, target) pairs of a two-column TSV; a line without exactly one tab is an error (file:line)."""
    if text is None:
        text = read_text(path, MAX_CORPUS_FILE_BYTES)
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        columns = line.split("\t")
        if len(columns) != 2 or not columns[0].strip() or not columns[1].strip():
            raise UserError(f"{path}:{number}: expected 'source<TAB>target', got {line[:60]!r}")
        pairs.append((columns[0].strip(), columns[1].strip()))
    return pairs


def toy_pairs() -> list[tuple[str, str]]:
    """Every built-in (english, french) pair, in file order."""
    text = resources.files("clearformer.data").joinpath(TOY_FILE).read_text(encoding="utf-8")
    return read_tsv_pairs(TOY_FILE, text)


def toy_splits() -> dict[str, list[tuple[str, str]]]:
    """{"train": [...], "valid": [...], "test": [...]} of the built-in pairs (a fixed split)."""
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for index, pair in enumerate(toy_pairs()):
        held_out = pair[0] not in SEED_SOURCES
        if held_out and index % 20 == 7:
            splits["valid"].append(pair)
        elif held_out and index % 20 == 8:
            splits["test"].append(pair)
        else:
            splits["train"].append(pair)
    return splits
