"""The trained toy model the lessons read: the session's (tests/conftest.py `toy_model`, small, trained once into
the sandbox's cache, where `learn` looks for it). `toy_runs` is the folder that holds it (toy_runs /
"toy-translate"). A first training the tests start themselves is made as small (`quick_toy_training`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from seeds import seed
from threads import one_thread  # noqa: F401  (autouse: one torch thread for the folder's tiny models)

sys.path.insert(0, str(Path(__file__).parent))  # planted.py

QUICK = {"steps": 5, "overrides": {"d_model": 16, "n_heads": 2, "d_ff": 32}, "eval_every": 5, "bleu_sentences": 0,
         "seed": seed()}


@pytest.fixture(scope="session")
def toy_runs(toy_model) -> Path:
    """The folder holding toy-translate (trained once per session)."""
    return toy_model.parent


@pytest.fixture
def quick_toy_training(monkeypatch):
    """A first training of the toy model that `learn` starts (in its child) made a few steps long."""
    import clearformer.learn.toy

    monkeypatch.setattr(clearformer.learn.toy, "TOY_TRAINING", QUICK)
