"""generate/compiled.py: the compiled one-token step gives the eager step's tokens and logits; when
compiling fails, decoding goes on eagerly after one warning line (never a traceback)."""

from __future__ import annotations

import pytest
import torch
from gen_helpers import random_model

from clearformer.generate import DecodingOptions, beam_search, greedy_decode
from clearformer.generate import compiled as compiled_module
from clearformer.record import trace

SRC = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 0]])


def test_compiled_step_equals_the_eager_step(capsys):
    model = random_model(dtype=torch.float32)
    options = DecodingOptions(max_new=4, min_length=4)
    eager = greedy_decode(model, SRC, options.but(compile="off"))
    compiled = greedy_decode(model, SRC, options.but(compile="on"))
    if compiled_module.COMPILED[model].failed:  # no C compiler, an unsupported Python, ...: the fallback ran
        pytest.skip(f"torch.compile is unavailable here: {capsys.readouterr().err.strip()}")
    assert torch.equal(compiled.tokens, eager.tokens)
    torch.testing.assert_close(compiled.scores, eager.scores, atol=1e-5, rtol=1e-5)


def test_a_failing_compiler_falls_back_to_eager_with_one_warning_line(monkeypatch, capsys):
    model = random_model()

    def broken(function, **kwargs):
        def run(*args):
            raise RuntimeError("no C compiler found\nsecond line of a long compiler traceback")
        return run
    monkeypatch.setattr(torch, "compile", broken)
    expected = [greedy_decode(model, SRC, DecodingOptions(max_extra=5)).sequences(),
                beam_search(model, SRC, DecodingOptions(beam=3, max_extra=5)).sequences()]
    got = [greedy_decode(model, SRC, DecodingOptions(max_extra=5, compile="on")).sequences(),
           beam_search(model, SRC, DecodingOptions(beam=3, max_extra=5, compile="on")).sequences()]
    assert got == expected
    err = capsys.readouterr().err
    assert err == "clearformer: warning: torch.compile failed (RuntimeError: no C compiler found); decoding eagerly\n"


def test_auto_and_a_recorder_run_the_eager_step(monkeypatch):
    model = random_model()
    monkeypatch.setattr(torch, "compile", lambda *a, **k: pytest.fail("compiled while it should not"))
    greedy_decode(model, SRC, DecodingOptions(max_extra=3, compile="auto"))  # auto: eager on this machine
    with trace.Recorder():
        greedy_decode(model, SRC, DecodingOptions(max_extra=3, compile="on"))  # the recorder sees eager modules
