"""The path from the command to the model's layers stays short: at most 8 of clearformer's Python frames from
`clearformer translate` (cli.main) to `DecoderLayer.forward`, greedy and beam search alike, and nothing
consulted at every step to decide whether the decoder is compiled (gpt-fast's path is 6 frames deep).

Counted by a forward pre-hook on every module: the first time the stack holds a `DecoderLayer.forward`,
the hook walks it from `cli.main` down to that frame and keeps the frames of clearformer's own source
(torch's `Module.__call__` frames and decorators are torch's, not the path's)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import clearformer
from clearformer import cli
from clearformer.model.layers import DecoderLayer

SOURCE = str(Path(clearformer.__file__).resolve().parent)
MOST_FRAMES = 8


def project_frames_to_layer() -> list[str] | None:
    """clearformer's frames from cli.main down to DecoderLayer.forward (outermost first), or None when the
    stack holds no DecoderLayer.forward."""
    frame, stack = sys._getframe(), []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    stack.reverse()
    codes = [f.f_code for f in stack]
    if DecoderLayer.forward.__code__ not in codes or cli.main.__code__ not in codes:
        return None
    start, end = codes.index(cli.main.__code__), codes.index(DecoderLayer.forward.__code__)
    return [f"{Path(f.f_code.co_filename).stem}.{f.f_code.co_qualname}" for f in stack[start: end + 1]
            if str(Path(f.f_code.co_filename).resolve()).startswith(SOURCE)]


def frames_of_translate(checkpoint: Path, *options: str) -> list[str]:
    """The frames of the first step that reaches a decoder layer while `clearformer translate` runs."""
    seen: list[list[str]] = []

    def hook(module, inputs):
        if not seen and (frames := project_frames_to_layer()) is not None:
            seen.append(frames)

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        assert cli.main(["translate", "--checkpoint", str(checkpoint), *options, "I love you"]) == 0
    finally:
        handle.remove()
    assert seen, "translate never ran a DecoderLayer"
    return seen[0]


@pytest.mark.parametrize("search", [["--beam", "1"], ["--beam", "4"]], ids=["greedy", "beam 4"])
def test_at_most_eight_frames_from_translate_to_the_decoder_layer(checkpoint, capsys, search):
    frames = frames_of_translate(checkpoint, *search)
    assert frames[0] == "cli.main" and frames[-1] == "layers.DecoderLayer.forward", frames
    assert len(frames) <= MOST_FRAMES, f"{len(frames)} frames: {' -> '.join(frames)}"
    # The search calls the model's own decode: no step wrapper, no compile check, between them.
    search_frame = "greedy.greedy_decode" if search[1] == "1" else "beam.beam_search"
    assert frames[frames.index(search_frame) + 1] == "transformer.Transformer.decode", frames
