"""Every quick claim on tiny sizes: the direction of what each one asserts (never fixed timings)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from seeds import seed_args

from clearformer.claims import heads, parallel, positions, residuals, scaling
from clearformer.claims.common import toy_data, toy_transformer, valid_nll
from clearformer.claims.registry import CLAIMS
from clearformer.cli import main
from clearformer.config import ModelConfig
from clearformer.generate import DecodingOptions
from clearformer.generate.greedy import greedy_decode
from clearformer.model.transformer import Transformer
from clearformer.record.trace import Recorder

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)


def test_claim1_the_rnn_chain_grows_with_length_and_ours_does_not():
    results = parallel.run(lengths=(8, 128), batch=2, d_model=16, layers=1, vocab=50, repeats=1)
    # What the claim is about, measured without a clock (timings belong in BENCHMARKS.md, "Claims"): the
    # chain of operations that must run one after another. The Transformer's does not grow with the
    # length; the GRU's grows by at least one step per position.
    depth = results["graph_depth"]
    assert depth["transformer"][0] == depth["transformer"][1]
    assert depth["gru"][1] - depth["gru"][0] >= 128 - 8
    assert depth["gru"][0] > depth["transformer"][0]
    assert results["sequential_steps"] == {"transformer": [2, 2], "gru": [16, 256]}
    assert all(t > 0 for times in results["step_seconds"].values() for t in times)


def test_claim2_entropy_falls_with_d_k_only_without_scaling():
    results = scaling.run(dims=(4, 64, 512), length=16, batch=4, contest={})
    for source in ("unit", "init"):
        unscaled, scaled = results[source]["unscaled"], results[source]["scaled"]
        assert unscaled["entropy"][0] > unscaled["entropy"][1] > unscaled["entropy"][2]
        assert min(scaled["entropy"]) > 0.8 * results["uniform_entropy"]
        assert unscaled["entropy"][2] < 0.5 * scaled["entropy"][2]
    unit = results["unit"]
    # The softmax's own gain falls with d_k without the scaling and holds with it ...
    assert unit["unscaled"]["softmax_gain"][2] < 0.5 * unit["unscaled"]["softmax_gain"][0]
    gains = unit["scaled"]["softmax_gain"]
    assert max(gains) < 1.5 * min(gains)
    # ... yet the gradient reaching Q is larger without it (|k| grows like sqrt(d_k)): what we measured.
    assert unit["unscaled"]["grad_q"][2] > unit["scaled"]["grad_q"][2]


def test_claim2_statistics_match_autograd_through_the_softmax():
    q, k, v = (torch.randn(1, 1, 5, 8) for _ in range(3))
    upstream = torch.randn(1, 1, 5, 8)
    stats = scaling.attention_statistics(q, k, v, 1.0, upstream)
    scores = (q @ k.transpose(-2, -1)).requires_grad_(True)
    weights = torch.softmax(scores, -1)
    weights.retain_grad()
    ((weights @ v) * upstream).sum().backward()
    gain = (scores.grad.norm(dim=-1) / weights.grad.norm(dim=-1)).mean().item()
    assert stats["softmax_gain"] == pytest.approx(gain, rel=1e-5)


def scaled_pair(**fields):
    """Two models with the same weights, one with the paper's 1/sqrt(d_k) and one without."""
    models = []
    for scaled in (True, False):
        torch.manual_seed(0)
        config = ModelConfig(**{**dict(src_vocab_size=30, tgt_vocab_size=30, d_model=32, n_heads=2, d_ff=64,
                                       n_encoder_layers=2, n_decoder_layers=2), **fields, "scale_attention": scaled})
        models.append(Transformer(config).eval())
    return models


def test_scale_attention_switch_changes_the_scores_exactly_by_sqrt_d_k():
    scaled_model, unscaled_model = scaled_pair()  # d_k = 32 / 2 = 16: sqrt(d_k) = 4, exact in floating point
    src, tgt = torch.tensor([[5, 6, 7, 8]]), torch.tensor([[2, 9, 10]])
    records = []
    for model in (scaled_model, unscaled_model):
        with Recorder() as recorder:
            model(src, tgt)
        records.append(recorder)
    for name in ("encoder.layers.0.self_attention", "decoder.layers.0.self_attention"):
        # the first attention of each stack: the same input in both models, so the same scores
        assert torch.equal(records[1].get(f"{name}.scores"), records[0].get(f"{name}.scores"))
        # ... and the unscaled model's scores are the scaled model's times sqrt(d_k), exactly
        assert torch.equal(records[0].get(f"{name}.scaled") * 4, records[1].get(f"{name}.scaled"))
    for name in ("encoder.layers.1.self_attention", "decoder.layers.1.cross_attention"):
        for recorder, scale in zip(records, (4, 1), strict=True):  # scaled = scores / sqrt(d_k), or scores
            assert torch.equal(recorder.get(f"{name}.scaled") * scale, recorder.get(f"{name}.scores"))
    assert unscaled_model.encoder.layers[0].self_attention.scale == 1.0
    assert scaled_model.encoder.layers[0].self_attention.scale == 0.25
    # The fused kernel (no recorder) computes what the recorded, explicit path computed.
    with Recorder():
        explicit = unscaled_model(src, tgt)
    torch.testing.assert_close(unscaled_model(src, tgt), explicit)
    assert not torch.allclose(scaled_model(src, tgt), explicit)


def test_cached_decoding_honours_the_switch():
    _, model = scaled_pair()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 0]])
    fast = greedy_decode(model, src, DecodingOptions(max_new=6))
    slow = greedy_decode(model, src, DecodingOptions(max_new=6, use_cache=False))
    assert torch.equal(fast.tokens, slow.tokens)
    torch.testing.assert_close(fast.scores, slow.scores)


def test_old_configs_are_scaled_and_train_set_turns_it_off(tmp_path, monkeypatch):
    data = ModelConfig().to_dict()
    del data["scale_attention"]
    assert ModelConfig.from_dict(data).scale_attention is True
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    out = tmp_path / "run"
    assert main(["train", "--out", str(out), "--set", "scale_attention=false", "--set", "d_model=16",
                 "--set", "n_heads=2", "--set", "d_ff=32", "--steps", "2", "--batch-tokens", "120",
                 "--bleu-sentences", "2", "--threads", "1", "--quiet", *seed_args()]) == 0
    assert json.loads((out / "config.json").read_text())["scale_attention"] is False


def test_claim2_training_contest_is_in_the_results():
    results = scaling.run(dims=(4, 64), length=8, batch=2, contest={"toy-translate": (5, {})})
    contest = results["training_without_scaling"]["toy-translate"]
    assert contest["d_k"] == 16
    for scale in ("scaled", "unscaled"):
        run = contest[scale]
        assert run["steps"] == 5 and len(run["losses"]) == 5
        assert all(math.isfinite(run[key]) for key in ("valid_nll", "bleu", "attention_entropy", "last_loss"))
    # Same weights and batches: the first losses differ only through the scaling.
    assert contest["scaled"]["first_loss"] != contest["unscaled"]["first_loss"]
    assert any("without the scaling" in line for line in scaling.summary(results))
    scaling.figure(results)


def test_claim3_without_positions_the_orders_are_a_permutation():
    results = positions.run(seeds=2, d_model=32)
    assert results["none"]["encoder_permutation_gap"] < 1e-5
    assert results["none"]["decoder_probability_gap"] < 1e-6
    for kind in ("sinusoidal", "learned", "rope"):
        assert results[kind]["min_encoder_permutation_gap"] > 1e-3
        assert results[kind]["min_decoder_probability_gap"] > 1e-5


def test_claim3_holds_for_any_reordering():
    model = positions.build("none", seed=3, d_model=32)
    gaps = positions.compare(model, "dog bites man", "bites man dog")
    assert gaps["encoder_permutation_gap"] < 1e-5 and gaps["decoder_probability_gap"] < 1e-6


def test_js_distance_bounds_and_symmetry():
    p = torch.tensor([0.5, 0.5, 0.0])
    q = torch.tensor([0.0, 0.0, 1.0])
    r = torch.tensor([0.2, 0.3, 0.5])
    assert heads.js_distance(p, p).item() == pytest.approx(0.0, abs=1e-6)
    assert heads.js_distance(p, q).item() == pytest.approx(1.0)
    assert heads.js_distance(p, r).item() == pytest.approx(heads.js_distance(r, p).item())
    m = (p + r) / 2
    kl = lambda a: sum(x * math.log2(x / y) for x, y in zip(a.tolist(), m.tolist(), strict=True) if x > 0)  # noqa: E731
    assert heads.js_distance(p, r).item() == pytest.approx(math.sqrt(0.5 * kl(p) + 0.5 * kl(r)), rel=1e-5)


def test_claim4_training_makes_heads_differ_and_ablation_restores_weights():
    results = heads.run(steps=30)
    names = list(results["js_trained"])
    assert len(names) == 6 and all(len(results["ablation_nll_rise"][n]) == 4 for n in names)
    # Direction: after training, the heads' maps are further apart than at initialisation.
    assert sum(results["js_trained"].values()) > sum(results["js_at_init"].values())
    assert max(max(c) for c in results["ablation_nll_rise"].values()) > 0


def test_ablation_leaves_the_model_as_it_was():
    data = toy_data()
    model = toy_transformer(data).eval()
    before = valid_nll(model, data)
    heads.ablation_costs(model, data)
    assert valid_nll(model, data) == before


def test_claim5_without_residuals_the_decoder_gradient_vanishes():
    results = residuals.run(depths=(6,), sentences=8, train_steps=3)
    for variant in ("post-norm", "pre-norm"):
        with_skip = results["norms"][f"{variant}, 6 layers"]
        without = results["norms"][f"{variant}, no residual, 6 layers"]
        assert residuals.spread(with_skip) < 10
        assert without[6] < 1e-6 * with_skip[6]  # first decoder layer
        # why: without the skip path the encoder's rows collapse to one vector (rank collapse)
        assert results["memory_spread"][f"{variant}, no residual, 6 layers"] < 1e-3
        assert results["memory_spread"][f"{variant}, 6 layers"] > 0.1


def test_claim5_measures_the_gradients_again_after_training():
    results = residuals.run(depths=(2,), sentences=8, train_steps=4)
    after = results["after_training"]
    assert after["steps"] == 4
    for variant in ("post-norm", "pre-norm"):
        key = f"{variant}, 2 layers"
        norms = after["norms"][key]
        assert len(norms) == 4 and all(math.isfinite(n) and n > 0 for n in norms)
        assert norms != results["norms"][key]  # trained weights, another gradient
        assert math.isfinite(after["loss"][key]) and math.isfinite(after["train_loss"][key])
        assert after["loss"][key] < results["loss"][key]  # it did learn something in 4 steps
    assert "post-norm, no residual, 2 layers" not in after["norms"]  # quick: the residual variants only
    assert any("after 4 training steps" in line for line in residuals.summary(results))
    residuals.figure(results)


def test_without_residual_is_norm_of_sublayer():
    model = residuals.build(toy_data(), 1, norm_first=False, residual=False, seed=0)
    add_norm = model.encoder.layers[0].add_norm_1
    x = torch.randn(2, 3, 64)
    torch.testing.assert_close(add_norm(x, torch.tanh), add_norm.norm(torch.tanh(x)))
    assert not any(type(m).__name__ == "AddNorm" for m in model.modules())


def test_cli_lists_runs_and_refuses_to_overwrite(capsys, tmp_path):
    assert main(["claims"]) == 0
    listing = capsys.readouterr().out
    assert all(f"{c.number}. " in listing for c in CLAIMS)
    assert main(["claims", "3", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "without positions: a permutation" in out
    results = json.loads((tmp_path / "claim3-positions-quick.json").read_text())
    assert results["claim"] == 3 and results["command"] == "clearformer claims 3 --quick"
    assert (tmp_path / "claim3-positions-quick.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["claims", "3", "--quick", "--out", str(tmp_path)]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["claims", "3", "--quick", "--out", str(tmp_path), "--overwrite"]) == 0
    assert main(["claims", "9"]) == 2
    assert "no claim 9" in capsys.readouterr().err
