"""Every sentence of a mixed batch translates exactly as it does alone (issue 48) with an imported Marian model,
whose placeholders numerals stand in for (tokenize/standins.py): a random MarianMT built offline
(interop_helpers), greedy and beam 4, batches drawn by Hypothesis (tests/batch_support.py)."""

from __future__ import annotations

from functools import lru_cache

import pytest
from batch_support import MIXED, alone, batches, check_batch_invariance
from hypothesis import HealthCheck, given, settings

pytest.importorskip("transformers")
from interop_helpers import marian_folder, marian_spm  # noqa: E402

from clearformer.generate import DecodingOptions  # noqa: E402
from clearformer.interop.marianmt import load_marian  # noqa: E402

WORDS = ["delete the files from the folder", "copy the link to the window", "open a file now", "I love you",
         "supprimer les fichiers du dossier", "copier le lien vers la fenêtre", "ouvrir un fichier", "je t'aime"]
NUMERALS = [f"page {n} of {n + 1} x{n}y {n}: ({n})" for n in range(1, 20)]
POOL = MIXED + ["copy '%s' to {0} now", "page 3 of %d", "delete %d%% of the files"]
OPTIONS = {"greedy": DecodingOptions(max_extra=8), "beam 4": DecodingOptions(beam=4, max_extra=8)}


@lru_cache
def imported():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="clearformer-marian-") as scratch:  # read whole: nothing is left
        folder, _ = marian_folder(Path(scratch) / "hf", seed=4, proto=marian_spm(WORDS + NUMERALS, vocab_size=120),
                                  max_position_embeddings=128)
        model, tokenizer, _ = load_marian(str(folder))
    assert tokenizer.stand_ins is not None and tokenizer.mask_placeholders
    return model, tokenizer


@lru_cache
def single(search: str) -> dict[str, str]:
    return alone(*imported(), POOL, OPTIONS[search])


@pytest.mark.parametrize("search", list(OPTIONS))
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(drawn=batches(POOL, most=8))
def test_a_sentence_translates_as_alone_in_any_batch(search, drawn):
    check_batch_invariance(*imported(), single(search), drawn, OPTIONS[search])


@pytest.mark.slow
@pytest.mark.parametrize("search", list(OPTIONS))
# 40 fresh draws a run (not derandomized: every run explores other batches; CI runs the suite twice, 80 a
# submission): 60 were a large share of the suite's time (BENCHMARKS.md, "The test suite's time on this machine")
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(drawn=batches(POOL, most=24))
def test_a_sentence_translates_as_alone_in_many_batches(search, drawn):
    check_batch_invariance(*imported(), single(search), drawn, OPTIONS[search])
