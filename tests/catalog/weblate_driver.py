"""Weblate's own LibreTranslate backend, driven against a server: run by the Python of a virtual environment that
has Weblate installed (tests/catalog/test_weblate_client.py starts it; never imported by the suite itself).

    python weblate_driver.py URL < requests.json > answers.json

requests.json: {"source": "en", "target": "pt_BR", "pages": [[{"text": "...", "flags": "c-format"}, ...], ...]}.
Each page goes through `LibreTranslateTranslation._translate` (weblate/machinery/base.py), the path Weblate's
automatic translation and its suggestions take: placeholders replaced by [X{offset}X] (`cleanup_text`, with a
unit's flags, as Weblate's checks highlight them), one POST /translate of the page, the answer cleaned up
(`uncleanup_text`). The language codes go through `get_languages`: Weblate's pt_BR -> pt-BR -> pt fallback
against GET /languages. Printed: {"weblate": version, "languages": [...], "pair": [...], "pages": [{text:
[suggestions]}]}; an error of a page: {"error": "..."} in its place.
"""

from __future__ import annotations

import json
import sys

import django
from django.conf import settings


def configure() -> None:
    """Weblate's example settings, with an in-memory database and cache (nothing here touches either but the
    backend's cache of /languages) and no outbound-address checks (the server is on loopback)."""
    import weblate.settings_example as example

    values = {name: getattr(example, name) for name in dir(example) if name.isupper()}
    values.update(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
                  CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
                          "avatar": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}},
                  SITE_DOMAIN="weblate.example.org", SECRET_KEY="weblate-driver")
    settings.configure(**values)
    django.setup()


def main() -> int:
    url = sys.argv[1]
    plan = json.load(sys.stdin)
    configure()
    from weblate.checks.tests.test_checks import MockUnit
    from weblate.machinery.libretranslate import LibreTranslateTranslation
    from weblate.utils.version import VERSION

    machine = LibreTranslateTranslation({"url": url, "key": "weblate-key"})

    class Language:  # what get_language_possibilities reads of weblate.lang.models.Language
        def __init__(self, code: str) -> None:
            self.code = code

    out: dict = {"weblate": VERSION, "languages": sorted(machine.download_languages())}
    source, target = machine.get_languages(Language(plan["source"]), Language(plan["target"]))
    out["pair"] = [source, target]
    out["pages"] = []
    for page in plan["pages"]:
        sources = [(item["text"], MockUnit(source=item["text"], flags=item.get("flags", ""))) for item in page]
        try:
            out["pages"].append({text: [result["text"] for result in results]
                                 for text, results in machine._translate(source, target, sources).items()})
        except Exception as error:  # noqa: BLE001 - reported to the test, which asserts on it
            out["pages"].append({"error": f"{type(error).__name__}: {error}"})
    json.dump(out, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
