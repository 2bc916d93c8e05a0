"""The API's `glossary` field: the project's terms sent with a request, as Weblate sends them to a machine
translation service that takes a glossary (its `glossary_support`: one `source<TAB>target` per line, the text
`weblate.glossary.models.render_glossary_units_tsv` renders), or a JSON object {source: target}.

    POST /translate {"q": "Save the file", "source": "en", "target": "pt", "glossary": "file\\tficheiro"}
    -> {"translatedText": "Guarde o ficheiro"}                   (a term not placed: a line in "notes")
"""

from __future__ import annotations

from clearformer.errors import UserError
from clearformer.generate.glossary import glossary_notes
from clearformer.glossary import Glossary, clean_terms, parse_tsv
from clearformer.serve.requests import RequestError

MAX_GLOSSARY_CHARS = 1_000_000  # Weblate sends the whole project glossary with each request


def glossary_field(value) -> Glossary | None:
    """The field checked: absent or empty -> None; TSV text or a {source: target} object -> a Glossary; anything
    else a 400 naming the problem."""
    if value is None or value == "" or value == {}:
        return None
    try:
        if isinstance(value, str):
            if len(value) > MAX_GLOSSARY_CHARS:
                raise RequestError(400, f"Invalid request: glossary of {len(value):,} characters; at most "
                                        f"{MAX_GLOSSARY_CHARS:,}")
            return parse_tsv(value, "glossary")
        if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            return clean_terms(((source, target, "glossary") for source, target in value.items()), "glossary")
    except UserError as error:
        raise RequestError(400, f"Invalid request: {error}") from None
    raise RequestError(400, "Invalid request: glossary must be `source<TAB>target` lines (Weblate's) or an object "
                            "of source: target strings")


def missing_terms(glossary: Glossary, text: str, translation: str) -> tuple[str, ...]:
    """The lines naming each glossary term of `text` its translation does not use (the answer's `notes`)."""
    return tuple(note.detail for note in glossary_notes(glossary, text, translation))
