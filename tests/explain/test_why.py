"""Why did it say that: hook points, the logit lens, activation patching and attribution, tested on their
identities (the lens's last layer is the model's own choice; patching the whole encoder output restores all,
patching nothing restores nothing; integrated gradients are complete; gradient x input is a derivative),
and the three commands in the terminal, as JSON and on bad input (one line, no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from clearformer.cli import main
from clearformer.explain.attribution import DEFAULT_STEPS, attribute, source_inputs, target_logprobs
from clearformer.explain.lens import lens_translation
from clearformer.explain.patching import PatchPoint, activation_patching, patched_metrics
from clearformer.explain.why import source_and_output_ids
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.options import DecodingOptions, search_tokens
from clearformer.generate.source import check_source
from clearformer.record import trace

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

CLEAN, CORRUPTED = "I love you", "I love music"


@pytest.fixture(scope="module")
def run_dir(toy_model):
    """The toy translator (2 + 2 layers, 4 heads): the session's, trained once for every folder that reads it
    (tests/conftest.py `toy_model`), and its folder (read only)."""
    from clearformer.load import load_model

    model, tokenizer, _ = load_model(toy_model)
    return toy_model, model, tokenizer


@pytest.fixture(scope="module")
def trained(run_dir):
    return run_dir[1], run_dir[2]


# ----------------------------------------------------------------------------- hook points


def test_every_recorded_name_is_writable(trained):
    """A hook at any recorded name that feeds the computation on changes what is computed after it (the next
    records differ); a hook that returns None changes nothing."""
    model, tokenizer = trained
    src = torch.tensor([check_source(tokenizer, CLEAN, model.config.max_len)])
    tgt = torch.tensor([[tokenizer.bos_id, 5, 6]])
    with trace.Recorder() as plain:
        logits = model(src, tgt)
    read_only = (".mask", ".probabilities", ".token_ids", "output.logits")  # views of what flows, ids, the end
    names = sorted({name for name in plain.names() if not name.endswith(read_only)})
    assert "encoder.layers.0.output" in names and "decoder.layers.1.add_norm_2.skip" in names
    for name in names:
        # noise in every cell, as large as the values: a change a LayerNorm or a softmax cannot undo
        noise = lambda value, point: value + value.abs().mean().clamp(min=1) * torch.randn_like(value)  # noqa: E731
        with trace.Recorder() as changed, trace.Hooks({name: noise}):
            model(src, tgt)
        first = plain.names().index(name)
        later = zip(plain.records[first + 1:], changed.records[first + 1:], strict=True)
        assert any(a.value.is_floating_point() and not torch.allclose(a.value, b.value) for a, b in later), \
            f"writing {name} changed nothing"
    with trace.Hooks({name: lambda value, point: None for name in names}):  # None: unchanged
        torch.testing.assert_close(model(src, tgt), logits, rtol=0, atol=1e-6)


# ----------------------------------------------------------------------------- the lens


def test_lens_last_layer_is_the_models_choice(trained):
    model, tokenizer = trained
    options = DecodingOptions(brevity=0.0)  # the rule that may move <eos> off the argmax is off
    ids = check_source(tokenizer, CLEAN, model.config.max_len)
    steps = lens_translation(model, ids, options, search_tokens(model, tokenizer, options))
    assert len(steps) >= 2
    with trace.Recorder() as recorder:  # the search again, its own probabilities recorded
        greedy_decode(model, torch.tensor([ids]), options, search_tokens(model, tokenizer, options))
    for step in steps:
        top, p_top, p_chosen = step.layers[-1]
        assert top == step.chosen and p_top == p_chosen
        model_p = torch.softmax(recorder.get("output.logits", step=step.step)[0, -1].float(), dim=-1)
        assert abs(float(model_p[step.chosen]) - p_chosen) < 1e-6


# ----------------------------------------------------------------------------- patching


def test_patching_encoder_output_restores_all_and_nothing_restores_nothing(trained):
    model, tokenizer = trained
    clean, translation = source_and_output_ids(model, tokenizer, CLEAN, DecodingOptions())
    corrupted = check_source(tokenizer, CORRUPTED, model.config.max_len)
    _, _, points = activation_patching(model, clean, corrupted, translation, tokenizer.bos_id)
    restored = {p.name: r for p, r in points}
    assert abs(restored["encoder.output"] - 1) < 1e-6
    assert abs(restored["decoder.layers.1.output"] - 1) < 1e-6  # the last layer's output is all the decoder says
    names = set(restored)
    assert {"encoder.layers.0.output[0]", "encoder.layers.1.output[3]", "decoder.layers.0.output",
            "decoder.layers.1.cross_attention.head.1", "encoder.layers.0.self_attention.head.0"} <= names
    device = torch.device("cpu")
    to = lambda ids: torch.tensor([ids], device=device)  # noqa: E731
    tgt_in = to([tokenizer.bos_id, *translation[:-1]])
    # The decoder's input is the same clean translation in both runs: copying it restores nothing.
    same = PatchPoint("decoder input", "tgt_embed.X")
    m_clean, m_corrupted, (nothing,) = patched_metrics(model, to(clean), to(corrupted), tgt_in,
                                                       torch.tensor(translation), [same])
    assert nothing == m_corrupted and m_clean != m_corrupted  # restored 0
    with pytest.raises(trace.UnknownHookPoint, match="'encoder.outptu' is not a hook point of this model "
                                                     r"\(did you mean encoder.output"):
        patched_metrics(model, to(clean), to(corrupted), tgt_in, torch.tensor(translation),
                        [PatchPoint("a typo", "encoder.outptu")])  # never a patch that silently does nothing


def test_patching_refuses_sources_of_different_lengths(trained):
    model, tokenizer = trained
    clean, translation = source_and_output_ids(model, tokenizer, CLEAN, DecodingOptions())
    longer = check_source(tokenizer, "I love the cat", model.config.max_len)
    with pytest.raises(Exception, match="same number of tokens"):
        activation_patching(model, clean, longer, translation, tokenizer.bos_id)


# ----------------------------------------------------------------------------- attribution


def test_integrated_gradients_are_complete(trained):
    model, tokenizer = trained
    ids, translation = source_and_output_ids(model, tokenizer, CLEAN, DecodingOptions())
    result = attribute(model, ids, translation, tokenizer.bos_id, "integrated-gradients", DEFAULT_STEPS)
    assert result.scores.shape == (len(translation), len(ids))
    total, moved = sum(result.sums), sum(result.differences)
    assert abs(total - moved) <= 0.01 * abs(moved)
    torch.testing.assert_close(result.scores.sum(dim=1).double(), torch.tensor(result.sums, dtype=torch.float64),
                               rtol=1e-5, atol=1e-5)


def test_gradient_x_input_is_a_directional_derivative(trained):
    """score[t, i] = grad_i f_t · (x_i - x'_i) = d/de f_t(x + e (x_i - x'_i)) at e = 0, by central differences."""
    model, tokenizer = trained
    model = model.double()
    try:
        ids, translation = source_and_output_ids(model, tokenizer, CLEAN, DecodingOptions())
        result = attribute(model, ids, translation, tokenizer.bos_id, "gradient-x-input")
        src, target = torch.tensor([ids]), torch.tensor(translation)
        tgt_in = torch.tensor([[tokenizer.bos_id, *translation[:-1]]])
        x, baseline = source_inputs(model, src, tgt_in)
        eps = 1e-5
        with torch.no_grad():
            for i in range(len(ids)):
                direction = torch.zeros_like(x)
                direction[0, i] = x[0, i] - baseline[0, i]
                up = target_logprobs(model, src, tgt_in, target, x + eps * direction)[0]
                down = target_logprobs(model, src, tgt_in, target, x - eps * direction)[0]
                torch.testing.assert_close(result.scores[:, i].double(), (up - down) / (2 * eps), rtol=1e-4,
                                           atol=1e-5)
    finally:
        model.float()


def test_attention_scores_are_rows_of_weights(trained):
    model, tokenizer = trained
    ids, translation = source_and_output_ids(model, tokenizer, CLEAN, DecodingOptions())
    result = attribute(model, ids, translation, tokenizer.bos_id, "attention")
    torch.testing.assert_close(result.scores.sum(dim=1), torch.ones(len(translation)))


# ----------------------------------------------------------------------------- the commands


def cli(run_dir, *words: str, timeout: int = 120):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "clearformer.cli", *words, "--checkpoint", str(run_dir[0])],
                          capture_output=True, text=True, env=env, timeout=timeout)


def in_process(run_dir, capsys, *words: str) -> str:
    """`clearformer WORDS --checkpoint RUN` in this process -> its standard output."""
    assert main([*words, "--checkpoint", str(run_dir[0])]) == 0
    return capsys.readouterr().out


def test_lens_command_text_and_json(run_dir, capsys):
    text = in_process(run_dir, capsys, "lens", CLEAN)
    assert "layer 1" in text and "result:" in text
    report = json.loads(in_process(run_dir, capsys, "lens", CLEAN, "--format", "json"))
    assert set(report) == {"result", "steps"}
    step = report["steps"][0]
    assert set(step) == {"step", "chosen", "layers"}
    assert set(step["layers"][0]) >= {"layer", "top", "p_chosen"} and len(step["layers"]) == 2


def test_patch_command_json(run_dir, capsys):
    report = json.loads(in_process(run_dir, capsys, "patch", CLEAN, CORRUPTED, "--format", "json"))
    assert {"clean", "corrupted", "metric", "points"} <= set(report)
    restored = {p["name"]: p["restored"] for p in report["points"]}
    assert abs(restored["encoder.output"] - 1) < 1e-6
    assert "encoder.output" in in_process(run_dir, capsys, "patch", CLEAN, CORRUPTED, "--top", "3")


def test_attribute_command_json_and_alignments(run_dir, capsys, tmp_path):
    in_process(run_dir, capsys, "attribute", CLEAN, "--format", "json", "--steps", "32", "--output",
               str(tmp_path / "a.json"))
    report = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert set(report["completeness"]) >= {"sum", "difference"}
    assert len(report["scores"]) == len(report["target_tokens"])
    links = in_process(run_dir, capsys, "attribute", CLEAN, "--alignments", "--method", "attention").split()
    assert links and all(link.count("-") == 1 and all(x.isdigit() for x in link.split("-")) for link in links)


def test_lens_of_a_language_model_ends_at_its_choice():
    from clearformer.config import preset
    from clearformer.explain.lens import lens_lm
    from clearformer.model.lm import LanguageModel

    torch.manual_seed(1)
    model = LanguageModel(preset("lm-tiny", tgt_vocab_size=40, d_model=16, n_heads=2, n_decoder_layers=2)).eval()
    steps = lens_lm(model, [3, 7, 9], 4)  # pre-norm: through the decoder's final LayerNorm
    assert len(steps) == 4
    for step in steps:
        assert step.layers[-1][0] == step.chosen and step.layers[-1][1] == step.layers[-1][2]


@pytest.mark.parametrize("words, message", [
    (("patch", CLEAN, "I love the cat"), "same number of tokens"),
    (("attribute", CLEAN, "--method", "saliency"), "--method 'saliency'"),
    (("attribute", CLEAN, "--steps", "0"), "--steps must be between"),
    (("lens", ""), "empty sentence"),
    (("lens", CLEAN, "--max-new-tokens", "0"), "--max-new-tokens"),
])
def test_bad_input_is_one_line(run_dir, words, message, capsys):
    code = main([*words, "--checkpoint", str(run_dir[0])])
    err = capsys.readouterr().err
    assert code != 0
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_bad_input_is_one_line_from_the_installed_command(run_dir):
    """The same refusal through a real process: its exit code and its standard error, nothing else."""
    done = cli(run_dir, "lens", "")
    assert done.returncode == 2 and done.stdout == ""
    assert "empty sentence" in done.stderr and len(done.stderr.strip().splitlines()) == 1
