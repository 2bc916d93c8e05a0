"""How each front shows a confidence: `translate --confidence` (a tab and the number), `--format json` (the
words with theirs), a catalogue (`# clearformer: confidence 0.42` per filled entry; under `--min-confidence`
the entry is left untranslated, with the comment), and the one warning a run without fitted weights gives."""

from __future__ import annotations

import json
from collections.abc import Sequence

from clearformer.errors import UserError
from clearformer.generate.result import Translation
from clearformer.quality.estimator import WEIGHTS_FILE

FORMATS = ("text", "json")


def add_confidence_arguments(parser) -> None:
    """translate's --confidence, --min-confidence and --format."""
    group = parser.add_argument_group("which translations to review (docs/confidence.md)")
    group.add_argument("--confidence", action="store_true",
                       help="print each translation, a tab, and its confidence in [0, 1]")
    group.add_argument("--min-confidence", type=float, metavar="X",
                       help="with --po: leave entries whose confidence is under X untranslated (with a comment)")
    group.add_argument("--format", choices=FORMATS, default="text",
                       help="json: one object per line, with the text, its confidence, its words' confidences "
                            "and its notes (implies --confidence)")


def check_confidence_arguments(args) -> bool:
    """Whether the command must estimate confidences; a bad --min-confidence is a one-line error."""
    if args.min_confidence is not None:
        if not 0.0 <= args.min_confidence <= 1.0:
            raise UserError(f"--min-confidence {args.min_confidence}: give a number between 0 and 1")
        if not args.po:
            raise UserError("--min-confidence applies to --po (a gettext catalogue); for text, read --confidence")
    if args.format == "json" and args.po:
        raise UserError("--format json applies to text; a catalogue gets its confidences as comments")
    return bool(args.confidence or args.min_confidence is not None or args.format == "json")


def rater(run, warn, threshold: float | None = None):
    """The `Confidence` a translator is given for the run in folder `run`: its fitted weights, else the
    unsupervised score (and `warn(line)` says so)."""
    from clearformer.quality.estimate import Confidence
    from clearformer.quality.estimator import load_weights

    weights = load_weights(run)
    if weights is None:
        warn(fallback_line(run))
    return Confidence(weights, threshold)


def fallback_line(run) -> str:
    """The warning of a run without fitted weights."""
    return (f"{run} has no fitted confidence weights ({WEIGHTS_FILE}): the confidence is the unsupervised "
            f"score (Bergamot's mean log-probability); `clearformer confidence fit` fits them")


def rounded(confidence: float | None) -> str:
    return "" if confidence is None else f"{confidence:.2f}"


def text_lines(translations: Sequence[Translation]) -> str:
    """`translate --confidence`: each translation, a tab, its confidence (empty for an empty input)."""
    return "".join(f"{t.text}\t{rounded(t.confidence)}\n" for t in translations)


def json_lines(translations: Sequence[Translation]) -> str:
    """`translate --format json`: one JSON object per input, one per line."""
    return "".join(json.dumps(as_json(t), ensure_ascii=False) + "\n" for t in translations)


def as_json(translation: Translation) -> dict:
    """{"text", "confidence", "words": [{"word", "confidence"}], "notes": [{"kind", "detail"}]}."""
    return {"text": translation.text,
            "confidence": None if translation.confidence is None else round(translation.confidence, 4),
            "words": [{"word": w.word, "confidence": round(w.confidence, 4)} for w in translation.words],
            "notes": [{"kind": note.kind.value, "detail": note.detail} for note in translation.notes]}


def annotate_catalogue(plan, confidences: Sequence[float | None], threshold: float | None) -> int:
    """After `Plan.fill`: each filled entry gets `# clearformer: confidence 0.42` (the least confidence of its
    lines); one under `threshold` is emptied again (untranslated, not fuzzy) and says so. Returns how many
    entries were left untranslated."""
    from clearformer.catalog.fill import COMMENT

    left = 0
    for slot in plan.slots:
        jobs = [line.job for line in slot.singular + (slot.plural or []) if line.job is not None]
        scores = [confidences[job] for job in jobs if confidences[job] is not None]
        if not scores:
            continue
        least = min(scores)
        entry = slot.entry
        comment = f"{COMMENT} confidence {least:.2f}"
        if threshold is not None and least < threshold:
            comment += f", under --min-confidence {threshold:g}: left untranslated"
            entry.msgstr = ""
            for form in entry.msgstr_plural:
                entry.msgstr_plural[form] = ""
            if "fuzzy" in entry.flags:
                entry.flags.remove("fuzzy")
            left += 1
        entry.tcomment = "\n".join(filter(None, [entry.tcomment, comment]))
    return left
