"""Fixtures for the catalogue and LibreTranslate tests: random-weight runs (masking and not) and a template."""

from __future__ import annotations

import pytest
from catalog_support import TEMPLATE, random_run


@pytest.fixture(scope="session")
def masking_run(tmp_path_factory):
    return random_run(tmp_path_factory.mktemp("catalog-masking"), mask=True, seed=3)


@pytest.fixture(scope="session")
def plain_run(tmp_path_factory):
    return random_run(tmp_path_factory.mktemp("catalog-plain"), mask=False, seed=4)


@pytest.fixture
def template(tmp_path):
    path = tmp_path / "app.pot"
    path.write_text(TEMPLATE, encoding="utf-8")
    return path
