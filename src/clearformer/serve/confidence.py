"""The page's confidence (issue 53): each word of the translation with the number `translate --confidence
--format json` prints for it, and the decoding steps its pieces were chosen at, so the page can colour the word
and link a low one to the lens and the attribution of its weakest step.

    Translator.translate([sentence], options, confidence=KeptConfidence(weights))     the one path (the translator's)
        -> as_json(record)                  the numbers `translate --format json` prints (quality/fronts.py)
        -> + per word: its sentence, its steps, the step of its weakest piece (least log p), that piece

A word's steps are the positions of its pieces in its sentence's output: the piece chosen at generation step t
is the t-th output piece (the lens's and the attribution's step t, counted from 0 in the JSON, from 1 on the
page). An input cut into sentences has words in each; the lens and attribution of a word read its sentence.
"""

from __future__ import annotations

import math
from pathlib import PurePath

from clearformer.generate.options import DecodingOptions
from clearformer.quality.estimate import KeptConfidence
from clearformer.quality.estimator import WEIGHTS_FILE, Weights
from clearformer.quality.fronts import as_json

DEFAULT_THRESHOLD = 0.5  # the page's initial "low" line; the reader moves it (a word's confidence is a probability)


def weights_note(weights: Weights | None, run_name: str) -> str:
    """What the page says about where its confidence comes from (as `translate --confidence` says it)."""
    if weights is None:
        return (f"{run_name} has no fitted confidence weights ({WEIGHTS_FILE}): the sentence's confidence is the "
                "unsupervised score (Bergamot's mean log-probability), as `translate --confidence` gives it; "
                "`clearformer confidence fit` fits them")
    pairs = weights.fitted_on.get("pairs")  # a file's name only: no answer holds a path of this machine
    on = f" (fitted on {PurePath(str(pairs)).name}, scored by sentence chrF)" if pairs else ""
    return f"the sentence's confidence: the run's fitted logistic regression{on}"


def page_confidence(translator, weights: Weights | None, run_name: str, sentence: str,
                    options: DecodingOptions, unlinked: str | None = None) -> dict:
    """The page's `confidence` field for `sentence` translated by `translator` under `options`:

    {"confidence": the sentence's (4 decimals, as --format json), "fitted": whether weights were used,
     "about": one line on where it comes from, "threshold": the initial low line, "beam": the search's beam,
     "linked": whether a low word links to the lens and attribution (they read the same translation), else
     "unlinked": why not (what-if interventions; a model without layers to read),
     "sentences": the sentences the input was cut into,
     "words": [{"word", "confidence" (as --format json), "sentence" (index into sentences), "steps" [t, ...],
                "weakest": t, "weakest_piece": its token, "weakest_probability": p(piece)}]}"""
    rater = KeptConfidence(weights)
    [record] = translator.translate([sentence], options, confidence=rater)
    shown = as_json(record)
    tokenizer = translator.tokenizer
    located = []
    for index, estimate in enumerate(rater.estimates):
        if estimate is None:
            continue
        for steps in estimate.groups:
            weakest = min(steps, key=lambda t: estimate.log_probs[t])
            located.append({"sentence": index, "steps": list(steps), "weakest": weakest,
                            "weakest_piece": tokenizer.id_to_token(rater.searched[index][weakest]),
                            "weakest_probability": round(math.exp(estimate.log_probs[weakest]), 4)})
    words = [{**word, **where} for word, where in zip(shown["words"], located, strict=True)]
    return {"confidence": shown["confidence"], "fitted": weights is not None, "about": weights_note(weights, run_name),
            "threshold": DEFAULT_THRESHOLD, "beam": options.beam, "linked": unlinked is None, "unlinked": unlinked,
            "sentences": list(rater.pieces.texts), "words": words}
