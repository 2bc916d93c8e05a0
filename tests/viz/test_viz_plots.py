"""The figures draw the walkthrough's own numbers: PE table, attention (masked cells blank), distributions."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import to_hex

from clearformer.cli import main
from clearformer.explain import plots
from clearformer.explain.examples import run_example
from clearformer.explain.translation import explain_translation
from clearformer.generate import DecodingOptions
from clearformer.model.embedding import sinusoidal_table

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def translation(tiny_model):
    model, tokenizer = tiny_model
    return explain_translation(model, tokenizer, "I love you", DecodingOptions(max_new=3))


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_explain_cli_writes_every_figure_and_page(tmp_path):
    figures, page = tmp_path / "figures", tmp_path / "walk.html"
    assert main(["explain", "--example", "i-love-you", "--plots", str(figures), "--html", str(page),
                 "-o", str(tmp_path / "walk.txt")]) == 0
    names = sorted(p.name for p in figures.iterdir())
    for expected in ("positional_encoding.png", "attention_self_attention.png",
                     "attention_masked_example.png", "probabilities.png",
                     "grid_02_embedding_tokens_lookup.png",
                     "grid_03_embedding_positions_pe.png", "grid_04_embedding_x.png"):
        assert expected in names
    for path in figures.iterdir():
        width, height = _png_size(path)
        assert 200 < width < 2500 and 150 < height < 2500, (path.name, width, height)
    assert page.read_text(encoding="utf-8").startswith("<!doctype html>")


def test_positional_encoding_figure_is_the_real_table_at_the_model_width(translation):
    figure = plots.positional_encoding_figure(translation)
    heat = figure.axes[0]
    drawn = np.asarray(heat.images[0].get_array())
    assert drawn.shape == (plots.PE_POSITIONS, 16)
    np.testing.assert_allclose(drawn, sinusoidal_table(plots.PE_POSITIONS, 16).double().numpy())
    assert "16" in heat.get_title() and heat.get_xlabel() and heat.get_ylabel()


def test_no_pe_figure_without_a_recorded_pe():
    walk, _ = run_example("india-is-great")  # the seed gives X directly
    assert plots.positional_encoding_figure(walk) is None


def test_decoder_self_attention_has_a_blank_upper_triangle_and_the_recorded_weights(translation):
    last = max(s.decode_step for s in translation.steps if s.decode_step is not None)
    step = translation.find("decoder.layers.0.self_attention.weights", last)[0]
    figure, stem = plots.attention_figure(translation, step)
    assert stem == "attention_decoder_self_layer0"
    panels = [a for a in figure.axes if a.images and a.get_title().startswith("head")]
    assert len(panels) == 2
    for axes, matrix in zip(panels, step.matrices, strict=True):
        drawn = axes.images[0].get_array()
        n = len(matrix.values)
        assert drawn.shape == (n, n) and n == last + 1
        assert np.array_equal(np.ma.getmaskarray(drawn), np.triu(np.ones((n, n), bool), k=1))
        np.testing.assert_allclose(np.tril(drawn.filled(0)), np.array(matrix.values))
        assert [t.get_text() for t in axes.get_xticklabels()] == matrix.col_labels
        assert [t.get_text() for t in axes.get_yticklabels()] == matrix.row_labels


def test_cross_attention_figure_aligns_target_rows_with_source_columns(translation):
    last = max(s.decode_step for s in translation.steps if s.decode_step is not None)
    step = translation.find("decoder.layers.0.cross_attention.weights", last)[0]
    figure, stem = plots.attention_figure(translation, step)
    assert stem == "attention_cross_layer0" and "Cross-attention" in figure.get_suptitle()
    axes = next(a for a in figure.axes if a.images and a.get_title() == "head 0")
    assert [t.get_text() for t in axes.get_xticklabels()] == translation.source_tokens
    assert not np.ma.getmaskarray(axes.images[0].get_array()).any()


def test_distribution_figure_draws_the_probabilities_and_marks_the_chosen_word(translation):
    step = translation.find("output.probabilities", 0)[0]
    figure = plots.distribution_figure(translation, step)
    axes = figure.axes[0]
    heights = [bar.get_width() for bar in axes.patches]
    np.testing.assert_allclose(heights, step.matrices[0].values[0])
    chosen = translation.target_tokens[1]
    labels = [label.get_text() for label in axes.get_yticklabels()]
    assert labels == step.matrices[0].col_labels and chosen in labels
    highlighted = [label for label, bar in zip(labels, axes.patches, strict=True)
                   if to_hex(bar.get_facecolor()) == "#e8710a"]
    assert highlighted == [chosen] and repr(chosen) in axes.get_title()


def test_write_plots_for_a_translation(translation, tmp_path):
    written = [p.name for p in plots.write_plots(translation, tmp_path)]
    steps = sorted({s.decode_step for s in translation.steps if s.decode_step is not None})
    assert written == ["positional_encoding.png", "input_vectors.png", "attention_encoder_layer0.png",
                       "attention_decoder_self_layer0.png", "attention_cross_layer0.png",
                       *[f"probabilities_step{t:02d}.png" for t in steps]]
    for name in written:
        _png_size(tmp_path / name)
