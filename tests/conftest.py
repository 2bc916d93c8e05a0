"""Shared fixtures: the golden values of the seeds' examples (the true numbers, not the seeds' printed ones)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

GOLDEN = Path(__file__).parent / "golden" / "seed_examples.json"


@pytest.fixture(scope="session")
def golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield
