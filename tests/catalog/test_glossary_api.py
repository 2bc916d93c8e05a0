"""The LibreTranslate API's `glossary` field (serve/glossary_field.py), as Weblate sends a project's glossary to a
service that takes one: `source<TAB>target` lines; the terms come out in the translation, a term not placed is
a line of the answer's `notes`, a bad glossary is a 400."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from clearformer.serve.app import create_app
from clearformer.serve.explainer import load

pytestmark = pytest.mark.slow  # a served model: seconds on its own


@pytest.fixture(scope="module")
def api(masking_run):
    return TestClient(create_app(load(masking_run)), base_url="http://127.0.0.1:8000",
                      raise_server_exceptions=False)


def test_the_glossary_field_puts_each_term_in(api):
    texts = ["Open the file", "the cat sleeps", "Hello"]
    plain = api.post("/translate", json={"q": texts, "source": "en", "target": "fr"}).json()
    assert "notes" not in plain
    glossary = "file\tje t'aime\ncat\tmaintenant\n"  # the random model writes neither alone
    answer = api.post("/translate", json={"q": texts, "source": "en", "target": "fr", "glossary": glossary,
                                          "format": "text"}).json()
    first, second, third = answer["translatedText"]
    assert "je t'aime" in first and "maintenant" in second and third == plain["translatedText"][2]
    assert "notes" not in answer  # every term placed: nothing to say
    one = api.post("/translate", json={"q": "the cat sleeps", "source": "en", "target": "fr",
                                       "glossary": {"cat": "maintenant"}}).json()
    assert "maintenant" in one["translatedText"] and "notes" not in one


@pytest.mark.parametrize("glossary, words", [
    ("file fichier", "glossary:1: not `source<TAB>target`"),
    (["file", "fichier"], "glossary must be"),
    ({"file": 3}, "glossary must be"),
])
def test_a_bad_glossary_is_a_400(api, glossary, words):
    answer = api.post("/translate", json={"q": "Hello", "source": "en", "target": "fr", "glossary": glossary})
    assert answer.status_code == 400 and words in answer.json()["error"]
