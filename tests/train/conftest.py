"""Every training test writes its runs (and the LATEST marker) under its own temporary directory."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def runs_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # `train` sets 1 thread for toy presets
