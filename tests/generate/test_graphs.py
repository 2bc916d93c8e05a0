"""generate/graphs.py on the CPU: the static, preallocated cache (model/cache.py's StaticKVCache) run as
the CUDA graph would run it gives the growing cache's logits (1e-5) and tokens, greedy and beam 4, on the
lessons' trained toy model; its buffers never move between steps; the positions double when a
sentence outgrows them. (The graph's replay itself needs a GPU: benchmarks/gpu_window.py checks its
tokens against the eager path there.)"""

from __future__ import annotations

import pytest
import torch
from gen_helpers import random_model

from clearformer.generate import DecoderState, DecodingOptions, beam_search, graphs, greedy_decode
from clearformer.load import load_model
from clearformer.tokenize import encode_source


@pytest.fixture(scope="module")
def trained(toy_model):
    model, tokenizer, _ = load_model(toy_model)
    sentences = ["the cat sleeps", "a small dog runs in the garden", "hello", "the red house is big"]
    ids = [encode_source(tokenizer, s) for s in sentences]
    width = max(len(i) for i in ids)
    src = torch.tensor([i + [model.config.pad_id] * (width - len(i)) for i in ids])
    return model.eval(), src


def next_logits(model, state: DecoderState, decode) -> torch.Tensor:
    """One step as the searches run it: the decoder over `state.inputs()`, then the projection."""
    return model.project(decode(*state.inputs())[:, -1:])[:, 0]


def test_static_steps_give_the_growing_cache_logits_row_by_row(trained):
    model, src = trained
    memory, src_mask = model.encode(src)
    with torch.inference_mode():
        growing = DecoderState(model, memory, src_mask, 1)
        static = DecoderState(model, memory, src_mask, 1)
        step = static.cache = graphs.GraphStep(model)
        assert not step.capture  # the CPU: the same static computation, eagerly
        for t in range(6):
            expected, got = next_logits(model, growing, model.decode), next_logits(model, static, step)
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
            chosen = expected.argmax(-1)
            for state in (growing, static):
                state.append(chosen)
            if t == 0:
                buffers = [b.data_ptr() for c in step.static_caches() for b in (c.k, c.v)]
            if t == 2:  # a sentence leaves, the others swap places: the cache follows in place
                rows = torch.tensor([2, 0, 3])
                for state in (growing, static):
                    state.select(rows, sentences=rows)
        assert [b.data_ptr() for c in step.static_caches() for b in (c.k, c.v)] == buffers


def test_a_search_with_compile_graph_decodes_through_the_static_step(monkeypatch):
    model = random_model(dtype=torch.float32)
    built, original = [], graphs.GraphStep
    monkeypatch.setattr(graphs, "GraphStep", lambda m, *a: built.append(original(m, *a)) or built[-1])
    greedy_decode(model, torch.tensor([[5, 6, 7]]), DecodingOptions(max_new=3, compile="graph"))
    greedy_decode(model, torch.tensor([[5, 6, 7]]), DecodingOptions(max_new=3, compile="off"))
    assert len(built) == 1 and built[0].cache is not None


@pytest.mark.parametrize("beam", [1, 4])
def test_static_decoding_gives_the_tokens_of_the_growing_cache(trained, beam):
    model, src = trained
    search = greedy_decode if beam == 1 else beam_search
    options = DecodingOptions(beam=beam, max_extra=12)
    eager = search(model, src, options.but(compile="off"))
    static = search(model, src, options.but(compile="graph"))
    assert torch.equal(static.tokens, eager.tokens) and torch.equal(static.lengths, eager.lengths)
    torch.testing.assert_close(static.scores, eager.scores, rtol=1e-5, atol=1e-5)


def test_positions_double_when_a_sentence_outgrows_them(monkeypatch):
    monkeypatch.setattr(graphs, "FIRST_TIME", 4)
    model = random_model(dtype=torch.float32)
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 0]])
    options = DecodingOptions(max_new=20, min_length=20)
    for beam in (1, 3):
        search = greedy_decode if beam == 1 else beam_search
        expected = search(model, src, options.but(beam=beam, compile="off"))
        got = search(model, src, options.but(beam=beam, compile="graph"))
        assert torch.equal(got.tokens, expected.tokens)


class ReplayedOnTheCpu(graphs.GraphStep):
    """GraphStep with its recording and replay, but the CUDA graph replaced by a CPU stand-in that reruns the
    recorded step into the same output buffer: the bookkeeping around the graph (static inputs, rows past
    the live ones, a new recording after the buffers moved) runs here as it runs on a GPU."""

    def capture_graph(self):
        inputs, step = self.inputs, self

        class Replay:
            def replay(self) -> None:
                step.hidden.copy_(step.static_forward(inputs["x"], None, inputs["src_mask"]))

        return Replay(), self.static_forward(inputs["x"], None, inputs["src_mask"])


@pytest.mark.parametrize("beam", [1, 3])
def test_the_recorded_step_is_replayed_with_the_eager_tokens(monkeypatch, beam):
    monkeypatch.setattr(graphs, "FIRST_TIME", 8)
    built = []
    monkeypatch.setattr(graphs, "GraphStep", lambda m, *a: built.append(ReplayedOnTheCpu(m, capture=True)) or built[-1])
    model = random_model(dtype=torch.float32)
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 0], [12, 13, 0, 0]])
    search = greedy_decode if beam == 1 else beam_search
    for options in (DecodingOptions(beam=beam, max_new=20, min_length=20), DecodingOptions(beam=beam, max_extra=6)):
        expected = search(model, src, options.but(compile="off"))
        got = search(model, src, options.but(compile="graph"))
        assert torch.equal(got.tokens, expected.tokens) and torch.equal(got.lengths, expected.lengths)
        torch.testing.assert_close(got.scores, expected.scores, rtol=1e-5, atol=1e-5)
    # 20 tokens: recorded at step 1, again when the 8 positions doubled to 16 and to 32
    assert built[0].captures == 3


def test_the_static_step_runs_only_when_asked_until_a_gpu_has_measured_it():
    assert not graphs.wants_graph("auto", torch.device("cuda")) and not graphs.wants_graph("auto", torch.device("cpu"))
    assert graphs.wants_graph("graph", torch.device("cpu")) and not graphs.wants_graph("off", torch.device("cuda"))
    assert graphs.supported(random_model()) and not graphs.supported(random_model(positional="rope"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run by benchmarks/gpu_window.sh)")
def test_the_cuda_graph_replays_the_eager_tokens():
    model = random_model(dtype=torch.float32).cuda()
    src = torch.tensor([[5, 6, 7, 8, 9], [9, 10, 11, 0, 0], [12, 13, 0, 0, 0]], device="cuda")
    for beam in (1, 4):
        search = greedy_decode if beam == 1 else beam_search
        options = DecodingOptions(beam=beam, max_new=20, min_length=20)
        eager = search(model, src, options.but(compile="off"))
        graphed = search(model, src, options.but(compile="graph"))
        assert torch.equal(graphed.tokens, eager.tokens)
        torch.testing.assert_close(graphed.scores, eager.scores, rtol=1e-4, atol=1e-4)
    memory, src_mask = model.encode(src)
    state = DecoderState(model, memory, src_mask, 1)
    assert graphs.applies(model, "graph", memory.device)
    step = state.cache = graphs.GraphStep(model)
    for _ in range(3):
        state.append(next_logits(model, state, step).argmax(-1))
    assert step.capture and step.captures == 1


def test_the_translator_builds_its_static_step_once_over_its_own_model(toy_model, monkeypatch):
    """GraphStep is built where the run is opened for decoding (`PyTorchTranslator.open`), once, over the
    translator's model; every `--compile graph` search begins that one step; the caller's model is not it."""
    from clearformer.generate.translator import PyTorchTranslator

    model, tokenizer, _ = load_model(toy_model)
    translator = PyTorchTranslator.open(model, tokenizer, toy_model)
    step = translator.graph
    assert isinstance(step, graphs.GraphStep) and step.model is translator.model and step.model is not model
    built = []
    monkeypatch.setattr(graphs, "GraphStep", lambda m, *a: built.append(m))  # a search must not build one
    begun = []
    original_begin = type(step).begin
    monkeypatch.setattr(type(step), "begin", lambda self, m: begun.append(self) or original_begin(self, m))
    sentences = ["the cat sleeps", "a small dog runs in the garden"]
    eager = [t.text for t in translator.translate(sentences, DecodingOptions())]
    for beam in (1, 4):
        graphed = [t.text for t in translator.translate(sentences, DecodingOptions(beam=beam, compile="graph"))]
        if beam == 1:
            assert graphed == eager
    assert built == [] and begun and all(s is step for s in begun)
    with pytest.raises(ValueError, match="another model"):
        step.begin(model)
