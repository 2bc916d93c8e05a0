"""POST /detect and source "auto": which language a text is in, by a real language identifier.

py3langid (a maintained fork of langid.py: a naive Bayes classifier over byte n-grams, 97 languages) ships its
model inside its package (`py3langid/data/model.npz.xz`, numpy arrays: nothing is downloaded, nothing
unpickled). It is the serve extra's (`pip install 'clearformer[serve]'`); without it /detect answers 501 and
says how to get it, and source "auto" answers without "detectedLanguage". Never a constant: a served model has
one source language, but the text a client sends may be in any.

    detect("Salve o arquivo antes de fechar.") -> [{"confidence": 99.9, "language": "pt"}, ...]

Confidences are the identifier's probabilities (normalised over its languages) in percent, as LibreTranslate
answers them; the best few above MIN_CONFIDENCE, best first.
"""

from __future__ import annotations

from functools import lru_cache

from clearformer.serve.requests import RequestError

MAX_CANDIDATES = 3
MIN_CONFIDENCE = 1.0  # percent: candidates below are noise


@lru_cache(maxsize=1)
def identifier():
    """py3langid's identifier with its packaged model, probabilities normalised (loaded once: ~1 s)."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        raise RequestError(501, "language detection needs py3langid, which this installation lacks: "
                                "pip install 'clearformer[serve]'") from None
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def detect(text: str) -> list[dict]:
    """The languages `text` is most likely in, best first (see the module docstring)."""
    ranked = identifier().rank(text)
    found = [{"confidence": round(100 * probability, 1), "language": language}
             for language, probability in ranked[:MAX_CANDIDATES] if 100 * probability >= MIN_CONFIDENCE]
    return found or [{"confidence": round(100 * ranked[0][1], 1), "language": ranked[0][0]}]


def available() -> bool:
    """Whether detection works here (py3langid importable)."""
    try:
        identifier()
    except RequestError:
        return False
    return True
