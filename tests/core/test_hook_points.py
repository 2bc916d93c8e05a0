"""record/points.py: a model's hook points are listed without running it (each module declares the points it
emits, beside its `trace.emit` calls), and the list is exactly what the recorder sees, both ways, for every model
kind the project builds: in a forward pass and in a real decoding (greedy and beam for a translator, sampling for a
language model), the search's own records (`generate.*`, `beam.*`) apart."""

from __future__ import annotations

import pytest
import torch

from clearformer.config import MLAConfig, ModelConfig, preset
from clearformer.generate import DecodingOptions, beam_search, greedy_decode
from clearformer.generate.sampling import SamplingOptions, generate
from clearformer.model.build import build_model
from clearformer.model.lm import LanguageModel
from clearformer.model.protocol import is_encoder_decoder
from clearformer.record import trace
from clearformer.record.points import hook_points

SMALL = dict(d_model=16, n_heads=2, d_ff=32, max_len=32)
SEARCH_RECORDS = ("generate.", "beam.", "glossary.")  # the search's, not the model's


def translators() -> dict[str, ModelConfig]:
    sizes = dict(src_vocab_size=24, tgt_vocab_size=24, n_encoder_layers=2, n_decoder_layers=2, **SMALL)
    return {
        "transformer": preset("toy-translate", **sizes),
        "pre-norm, learned positions": preset("toy-translate", **sizes, norm_first=True, positional="learned"),
        "rope, gqa, unscaled embeddings": preset("toy-translate", **sizes, positional="rope", n_kv_heads=1,
                                                 scale_embedding=False),
        # Firefox's students (interop/firefox.py): the SSRU, Marian's zero start and positions, all tied
        "ssru student": ModelConfig(**sizes, autoregressive_layer="ssru", zero_start=True, tie_embeddings="all",
                                    position_layout="halves", position_timescales="tensor2tensor"),
        "mla translator": preset("toy-translate", **sizes, attention="mla", positional="rope",
                                 mla=MLAConfig(kv_lora_rank=8, qk_nope_head_dim=4, v_head_dim=8,
                                               qk_rope_head_dim=4, q_lora_rank=8)),
        "gru": ModelConfig(src_vocab_size=24, tgt_vocab_size=24, d_model=16, n_encoder_layers=1,
                           n_decoder_layers=1, max_len=32, architecture="rnn"),
    }


def language_models() -> dict[str, tuple[ModelConfig, bool]]:
    """(config, MLA's absorbed path) per language model kind `lm train` builds."""
    base = dict(tgt_vocab_size=24, **SMALL)
    mla = MLAConfig(kv_lora_rank=8, qk_nope_head_dim=4, v_head_dim=8, qk_rope_head_dim=4)
    query_latent = MLAConfig(kv_lora_rank=8, qk_nope_head_dim=4, v_head_dim=8, q_lora_rank=8)
    return {
        "lm": (preset("lm-tiny", **base), False),
        "lm rope mqa": (preset("lm-tiny", **base, positional="rope", n_kv_heads=1), False),
        "lm mla naive": (preset("lm-tiny", **base, positional="rope", attention="mla", mla=mla), False),
        "lm mla absorbed": (preset("lm-tiny", **base, positional="rope", attention="mla", mla=mla), True),
        "lm mla, query latent, no rope": (preset("lm-tiny", **base, positional="sinusoidal", attention="mla",
                                                 mla=query_latent), False),
    }


def recorded(run) -> set[str]:
    """The names the recorder sees while `run()` runs (an explicit attention path, as under any hook)."""
    with torch.no_grad(), trace.Recorder() as recorder:
        run()
    return {name for name in recorder.names() if not name.startswith(SEARCH_RECORDS)}


def forward(model):
    src = torch.tensor([[3, 4, 5, 6]])
    return (lambda: model(src, src[:, :3])) if is_encoder_decoder(model) else (lambda: model(src))


@pytest.mark.parametrize("kind", list(translators()))
def test_a_translators_points_are_its_forwards_and_its_decodings(kind):
    torch.manual_seed(0)
    model = build_model(translators()[kind]).eval()
    listed = hook_points(model)
    assert listed and all(name.count(".") >= 1 for name in listed)
    assert recorded(forward(model)) == listed
    assert trace.points_reached(forward(model)) == listed  # under hooks too (the path interventions take)
    src = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])
    for search, options in ((greedy_decode, DecodingOptions(max_new=4, brevity=0.0)),
                            (beam_search, DecodingOptions(beam=2, max_new=4, brevity=0.0)),
                            (greedy_decode, DecodingOptions(max_new=3, use_cache=False, brevity=0.0))):
        assert recorded(lambda s=search, o=options: s(model, src, o)) == listed, (search.__name__, options)


@pytest.mark.parametrize("kind", list(language_models()))
def test_a_language_models_points_are_its_forwards_and_its_generations(kind):
    torch.manual_seed(0)
    config, absorbed = language_models()[kind]
    model = build_model(config).eval()
    assert isinstance(model, LanguageModel)
    model.set_mla_path(absorbed)
    listed = hook_points(model)
    assert recorded(forward(model)) == listed
    generated = recorded(lambda: generate(model, [3, 4, 5], 4, SamplingOptions(greedy=True)))
    assert generated == listed


def test_the_points_are_listed_without_running_the_model(monkeypatch):
    """Nothing runs: a model whose forward raises lists its points all the same."""
    model = build_model(translators()["transformer"])

    def refuse(*args, **kwargs):
        raise AssertionError("hook_points ran the model")

    monkeypatch.setattr(type(model), "forward", refuse)
    listed = hook_points(model)
    assert {"encoder.layers.0.self_attention.weights", "decoder.layers.1.cross_attention.head_outputs",
            "decoder.layers.0.add_norm_1.skip", "src_embed.positions.PE", "output.logits"} <= listed
    assert "decoder.layers.0.recurrence.forget_gate" in hook_points(build_model(translators()["ssru student"]))


def test_an_unknown_hook_name_lists_the_models_points(monkeypatch):
    from clearformer.explain.interventions import model_hooks

    model = build_model(translators()["transformer"])
    with pytest.raises(trace.UnknownHookPoint, match=r"did you mean decoder\.layers\.0\.cross_attention\.weights"):
        model_hooks(model, {"decoder.layers.0.cross_attention.weight": lambda value, point: None})
    with pytest.raises(trace.UnknownHookPoint, match=r"its points: .*decoder\.layers\.\{0-1\}\.cross_attention\."):
        model_hooks(model, {"nothing.like.it": lambda value, point: None})
