"""Every sentence of a mixed batch translates exactly as it does alone (issue 48), for the runs clearformer trains:
a word vocabulary and a SentencePiece one, both masking placeholders as reserved tokens, float32 as they run, and
the word one with int8 linear layers (`translate --quantize int8`, generate/int8.py); greedy and beam 4. The
imported kinds: tests/interop/test_batch_invariance_marian.py and tests/firefox/test_batch_invariance_firefox.py.
Hypothesis draws the batches (tests/batch_support.py)."""

from __future__ import annotations

from functools import lru_cache

import pytest
import torch
from batch_support import MIXED, alone, batches, check_batch_invariance
from gen_helpers import random_model
from hypothesis import HealthCheck, given, settings

from clearformer.generate import DecodingOptions
from clearformer.generate.int8 import quantize_int8
from clearformer.train.corpus import build_tokenizer
from clearformer.train.options import Vocabulary

PAIRS = [("Delete %d files from %s?", "Supprimer %d fichiers de %s ?"), ("copy %1$s to %2$s", "copier %2$s vers %1$s"),
         ("The 2 fish ate 15 apples", "Les 2 poissons ont mangé 15 pommes"), ("I love you", "je t'aime"),
         ("Connection timed out. Please try again later.", "Délai dépassé. Réessayez plus tard."),
         ("Page 1 of %d", "Page 1 sur %d"), ("Error registering Transmission as a %s handler: %s",
                                             "Erreur d'enregistrement de Transmission comme gestionnaire %s : %s")] * 20
# random models write to their length limit: a short one
OPTIONS = {"greedy": DecodingOptions(max_extra=8), "beam 4": DecodingOptions(beam=4, max_extra=8)}


KINDS = ("words", "sentencepiece", "words, int8")


@lru_cache
def run_of(kind: str):
    """(model, tokenizer): a random float32 model over a vocabulary built as `train` builds it (its linear layers
    int8 for a kind that says so)."""
    vocabulary, _, quantize = kind.partition(", ")
    tokenizer = build_tokenizer(Vocabulary(tokenizer=vocabulary, vocab_size=400, mask_placeholders=True), PAIRS)
    model = random_model(len(tokenizer), seed=5, dtype=torch.float32, max_len=64)
    if quantize == "int8":
        quantize_int8(model)
    return model, tokenizer


@lru_cache
def single(kind: str, search: str) -> dict[str, str]:
    return alone(*run_of(kind), MIXED, OPTIONS[search])


@pytest.mark.parametrize("search", list(OPTIONS))
@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(drawn=batches(MIXED))
def test_a_sentence_translates_as_alone_in_any_batch(kind, search, drawn):
    check_batch_invariance(*run_of(kind), single(kind, search), drawn, OPTIONS[search])


@pytest.mark.slow
@pytest.mark.parametrize("search", list(OPTIONS))
@pytest.mark.parametrize("kind", KINDS)
# 40 fresh draws a run (not derandomized: every run explores other batches; CI runs the suite twice, 80 a
# submission): 60 were a large share of the suite's time (BENCHMARKS.md, "The test suite's time on this machine")
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(drawn=batches(MIXED, most=24))
def test_a_sentence_translates_as_alone_in_many_batches(kind, search, drawn):
    check_batch_invariance(*run_of(kind), single(kind, search), drawn, OPTIONS[search])
