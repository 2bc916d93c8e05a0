"""The suite itself: pytest imports each test module by its file name (rootdir-relative "prepend" import, which
`from conftest import ...` in the folders needs), so two modules with one name in different folders stop the
whole run with "import file mismatch" as soon as one worker collects both."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_name_of_its_own():
    folders = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        folders[path.name].append(str(path.parent.relative_to(TESTS)))
    assert {name: where for name, where in folders.items() if len(where) > 1} == {}
