"""PNG figures of a walkthrough: positional encoding, attention heatmaps, output distributions, small grids.

`write_plots(walk, directory)` draws what the walkthrough holds (it never recomputes the model):

- positional_encoding.png      the sinusoidal table at the model's width (positions x dimensions), plus
                               a few of its columns as curves, showing the wavelengths growing
- input_vectors.png            embedding, PE and X of the source (models wider than the toy examples)
- attention_<where>.png        per layer, one panel per head, token labels on both axes: encoder
                               self-attention, decoder masked self-attention (blank upper triangle) and
                               cross-attention alignment, each at the last generation step (full prefix)
- probabilities_step<t>.png    the output distribution at every generated step, chosen word highlighted
- grid_<n>_<name>.png          toy examples (d_model <= 16): every matrix as an annotated grid

Figures are drawn with matplotlib's object API on an Agg canvas (no pyplot state, safe in threads).
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from clearformer.errors import UserError
from clearformer.explain.walkthrough import Step, Walkthrough
from clearformer.model.embedding import sinusoidal_table
from clearformer.store.atomic import atomic_write_bytes

TOY_WIDTH = 16  # walkthroughs whose matrices are at most this wide get every step as an annotated grid
ANNOTATE_CELLS = 12  # write the numbers into heatmap cells up to this many rows and columns
PE_POSITIONS = 100
DPI = 100


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Figure, path: Path) -> Path:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    atomic_write_bytes(path, buffer.getvalue())
    return path


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower() or "step"


def _array(values: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in values], dtype=np.float64)


def _heatmap(axes, values: np.ndarray, rows: list[str], cols: list[str], *, sequential: bool,
             blocked: np.ndarray | None = None, annotate: bool = False, decimals: int = 2, limit=None):
    """Draw one matrix on `axes`: colour per cell, token labels on the axes, numbers if `annotate`.

    sequential: non-negative data (weights, probabilities) on a white-to-blue scale from 0;
    otherwise a diverging red/blue scale symmetric around 0. Blocked cells are left blank.
    """
    hidden = ~np.isfinite(values) if blocked is None else (blocked | ~np.isfinite(values))
    shown = np.ma.masked_array(values, mask=hidden)
    finite = np.abs(values[np.isfinite(values)])
    bound = limit or max(float(finite.max()) if finite.size else 1.0, 1e-12)
    cmap, vmin, vmax = ("Blues", 0.0, bound) if sequential else ("RdBu_r", -bound, bound)
    image = axes.imshow(shown, cmap=colormaps[cmap].with_extremes(bad="white"), vmin=vmin, vmax=vmax,
                        aspect="auto", interpolation="nearest")
    many_cols = len(cols) > 24
    axes.set_xticks(range(0, len(cols), 8) if many_cols else range(len(cols)))
    axes.set_xticklabels(cols[::8] if many_cols else cols, rotation=0 if many_cols else 45,
                         ha="center" if many_cols else "right", fontsize=8)
    axes.set_yticks(range(0, len(rows), max(1, len(rows) // 24)))
    axes.set_yticklabels(rows[:: max(1, len(rows) // 24)], fontsize=8)
    if annotate and len(rows) <= ANNOTATE_CELLS and len(cols) <= ANNOTATE_CELLS:
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                if blocked is not None and blocked[i, j]:
                    continue
                value = values[i, j]
                strong = not np.isnan(value) and abs(value) > 0.6 * (vmax if value >= 0 else -vmin)
                axes.text(j, i, f"{value:.{decimals}f}", ha="center", va="center", fontsize=7,
                          color="white" if strong else "black")
    return image


def _find(walk: Walkthrough, name: str, decode_step: int | None) -> Step | None:
    for step in walk.steps:
        if step.name == name and step.decode_step == decode_step:
            return step
    return None


def _blocked(walk: Walkthrough, step: Step) -> np.ndarray | None:
    """Cells the attention's recorded mask blocked (mask 0), or None when it recorded no mask."""
    mask = _find(walk, step.name.rsplit(".", 1)[0] + ".mask", step.decode_step)
    if mask is None or not mask.matrices:
        return None
    return _array(mask.matrices[0].values) == 0


# --- positional encoding -----------------------------------------------------------------------------------

# The sinusoids a model may add (layout, timescales), and how each is written (model/embedding.py).
SINUSOIDS = {
    ("interleaved", "paper"): ("even = sin, odd = cos",
                               "PE(pos, 2i) = sin(pos / 10000^(2i/d)),   PE(pos, 2i+1) = cos(pos / 10000^(2i/d))"),
    ("halves", "paper"): ("sines, then cosines (Marian's layout)",
                          "PE(pos, i) = sin(pos / 10000^(2i/d)),   PE(pos, d/2 + i) = cos(pos / 10000^(2i/d))"),
    ("halves", "tensor2tensor"): ("sines, then cosines (Marian's layout)",
                                  "PE(pos, i) = sin(pos / 10000^(i/(d/2-1))),   "
                                  "PE(pos, d/2 + i) = cos(pos / 10000^(i/(d/2-1)))  (Marian's C++ engine)")}


def sinusoid_of(values: np.ndarray) -> tuple[str, str] | None:
    """Which of SINUSOIDS a recorded position table (positions, d_model) is; None: not one of them (learned)."""
    for layout, timescales in SINUSOIDS:
        table = sinusoidal_table(values.shape[0], values.shape[1], layout=layout, timescales=timescales)
        if np.allclose(values, table.double().numpy(), atol=1e-5):
            return layout, timescales
    return None


def wavelength(column: int, d_model: int, layout: str, timescales: str) -> float:
    """2π over the angular speed of one column of the table."""
    pair = column // 2 if layout == "interleaved" else column % (d_model // 2)
    exponent = pair / (d_model // 2 - 1) if timescales == "tensor2tensor" else 2 * pair / d_model
    return 2 * math.pi * 10000 ** exponent


def positional_encoding_figure(walk: Walkthrough) -> Figure | None:
    """The real sinusoidal table (the model's width, layout and timescales) as a heatmap, and some of its
    columns as curves.

    Drawn only when the walkthrough recorded a PE that is such a table; a learned position table is
    shown as recorded instead."""
    recorded = next((s for s in walk.steps if s.name.endswith(".PE") and s.matrices), None)
    if recorded is None:
        return None
    values = _array(recorded.matrices[0].values)
    d_model = values.shape[1]
    kind = sinusoid_of(values)
    figure = _figure(12, 4.8)
    heat, curves = figure.subplots(1, 2, width_ratios=[1.3, 1])
    if kind is None:
        image = _heatmap(heat, values, recorded.matrices[0].row_labels,
                         [f"d{j}" for j in range(d_model)], sequential=False)
        heat.set(title="Position table as recorded (learned, not sinusoidal)", xlabel="dimension",
                 ylabel="position")
        figure.colorbar(image, ax=heat, shrink=0.8)
        curves.set_axis_off()
        return figure
    layout, timescales = kind
    columns_text, formula = SINUSOIDS[kind]
    table = sinusoidal_table(PE_POSITIONS, d_model, layout=layout, timescales=timescales).double().numpy()
    image = heat.imshow(table, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    heat.set(title=f"Sinusoidal positional encoding: {PE_POSITIONS} positions × d_model = {d_model}",
             xlabel=f"dimension ({columns_text})", ylabel="position")
    if d_model <= 16:
        heat.set_xticks(range(d_model))
    figure.colorbar(image, ax=heat, shrink=0.85, label="PE value")
    step = 2 if layout == "interleaved" else 1
    sines = [d_model * k // 8 // 2 * step for k in (0, 1, 2, 4)] + [d_model - 2 if step == 2 else d_model // 2 - 1]
    columns = sorted(set(sines)) if d_model > 4 else list(range(d_model))
    for column in columns:
        curves.plot(table[:, column], linewidth=1.4,
                    label=f"dim {column}  (wavelength {wavelength(column, d_model, layout, timescales):,.0f})")
    curves.set(title="Columns are waves of growing wavelength",
               xlabel="position", ylabel="PE(position, dim)", ylim=(-1.15, 1.6))
    curves.legend(fontsize=8, loc="upper right", ncol=2)
    curves.grid(alpha=0.3)
    figure.suptitle(formula, fontsize=10)
    return figure


# --- attention ---------------------------------------------------------------------------------------------

def _attention_title(step: Step) -> tuple[str, str]:
    """(title, file stem) of an attention-weights step."""
    layer = f", layer {step.layer}" if step.layer is not None else ""
    at = f" (generation step {step.decode_step + 1}: whole prefix)" if step.decode_step is not None else ""
    if ".cross_attention." in step.name:  # the GRU baseline's one attention has no layer number
        stem = "attention_cross" + (f"_layer{step.layer}" if step.layer is not None else "")
        return f"Cross-attention alignment{layer}{at}", stem
    if step.name.startswith("decoder"):
        return f"Decoder masked self-attention{layer}{at}", f"attention_decoder_self_layer{step.layer}"
    if step.name.startswith("encoder"):
        return f"Encoder self-attention{layer}", f"attention_encoder_layer{step.layer}"
    prefix = step.name.rsplit(".", 1)[0]
    return step.title, f"attention_{_slug(prefix)}"


def attention_figure(walk: Walkthrough, step: Step) -> tuple[Figure, str]:
    """One panel per head of an attention-weights step; blocked (masked) cells left blank."""
    title, stem = _attention_title(step)
    blocked = _blocked(walk, step)
    matrices = step.matrices
    rows, cols = len(matrices[0].row_labels), len(matrices[0].col_labels)
    cell = 0.42 if max(rows, cols) <= 12 else 0.26
    width = max(3.2, cols * cell + 1.4)
    columns = len(matrices) if len(matrices) <= 2 else 2 if len(matrices) <= 4 else 4
    lines = math.ceil(len(matrices) / columns)
    figure = _figure(min(1.6 + width * columns, 20), max(3.4, lines * (rows * cell + 1.6) + 1.2))
    panels = np.atleast_1d(figure.subplots(lines, columns)).ravel()
    for unused in panels[len(matrices):]:
        unused.set_axis_off()
    panels = panels[: len(matrices)]
    cross = ".cross_attention." in step.name
    for axes, matrix in zip(panels, matrices, strict=True):
        image = _heatmap(axes, _array(matrix.values), matrix.row_labels, matrix.col_labels, sequential=True,
                         blocked=blocked, annotate=True, limit=1.0)
        axes.set_title(f"head {matrix.head}" if matrix.head is not None else "weights", fontsize=10)
        axes.set_xlabel("source token (key)" if cross else "attended-to token (key)", fontsize=9)
    for axes in panels[::columns]:
        axes.set_ylabel("target token (query)" if step.name.startswith("decoder") else "token (query)")
    figure.colorbar(image, ax=list(panels), shrink=0.8, label="attention weight")
    masked = blocked is not None and blocked.any()
    note = "\nblank = masked: a word may not look at later words" if masked else ""
    figure.suptitle(f"{title}\n{step.formula}: each row sums to 1{note}", fontsize=10)
    return figure, stem


# --- output distribution -----------------------------------------------------------------------------------

def distribution_figure(walk: Walkthrough, step: Step) -> Figure:
    """Bar chart of the output probabilities at one generation step; the chosen word in orange."""
    matrix = step.matrices[0]
    values = _array(matrix.values)[0]
    labels = list(matrix.col_labels)
    chosen_step = _find(walk, "generate.chosen", step.decode_step)
    chosen = chosen_step.matrices[0].note if chosen_step else labels[int(np.nanargmax(values))]
    figure = _figure(7.5, max(2.6, 0.32 * len(labels) + 1.4))
    axes = figure.subplots()
    positions = np.arange(len(labels))
    colors = ["#e8710a" if label == chosen else "#4c78a8" for label in labels]
    axes.barh(positions, values, color=colors)
    axes.set_yticks(positions)
    axes.set_yticklabels(labels, fontsize=9)
    axes.invert_yaxis()
    for y, value in zip(positions, values, strict=True):
        axes.text(value, y, f" {value:.3f}", va="center", fontsize=8)
    axes.set_xlim(0, max(1e-9, float(np.nanmax(values))) * 1.18)
    axes.set_xlabel("probability p = softmax(logits)")
    axes.set_ylabel("next word" + (f" ({matrix.note})" if matrix.note else ""))
    when = f"Generation step {step.decode_step + 1}" if step.decode_step is not None else "Output layer"
    after = " ".join(matrix.row_labels)
    axes.set_title(f"{when}: next word after '{after}'  →  chosen: {chosen!r}", fontsize=10)
    axes.grid(axis="x", alpha=0.3)
    return figure


# --- grids (toy examples) and the input vectors of wider models --------------------------------------------

def grid_figure(step: Step) -> Figure:
    """Every matrix of a step (one per head) as an annotated grid, with the step's formula."""
    matrices = step.matrices
    rows, cols = len(matrices[0].values), len(matrices[0].values[0])
    sequential = step.name.endswith((".weights", ".mask", ".probabilities"))
    figure = _figure(min(2.2 + len(matrices) * (0.62 * cols + 1.3), 20), 0.45 * rows + 2.0)
    panels = np.atleast_1d(figure.subplots(1, len(matrices)))
    for axes, matrix in zip(panels, matrices, strict=True):
        image = _heatmap(axes, _array(matrix.values), matrix.row_labels or [str(i) for i in range(rows)],
                         matrix.col_labels or [str(j) for j in range(cols)], sequential=sequential,
                         blocked=None, annotate=True, decimals=2 if cols > 6 else 3)
        if matrix.head is not None and len(matrices) > 1:
            axes.set_title(f"head {matrix.head}", fontsize=9)
        axes.set_xlabel("token (key)" if step.kind == "attention" else "dimension", fontsize=8)
    panels[0].set_ylabel("token")
    figure.colorbar(image, ax=list(panels), shrink=0.9)
    figure.suptitle(f"{step.title}:   {step.formula}", fontsize=10)
    return figure


def input_figure(walk: Walkthrough) -> Figure | None:
    """The input's embedding, positional encoding and X side by side (d_model columns each): the source's
    (a translation), or the prompt's (a language model: its first pass, generation step 0)."""
    lm = walk.model_kind == "lm"
    prefix, at = ("embed", 0) if lm else ("src_embed", None)
    names = tuple(f"{prefix}.{name}" for name in ("tokens.scaled", "tokens.lookup", "positions.PE", "X"))
    steps = [s for s in walk.steps if s.name in names and s.decode_step == at and s.matrices]
    if any(s.name.endswith("scaled") for s in steps):
        steps = [s for s in steps if not s.name.endswith("lookup")]
    if not steps:
        return None
    rows = len(steps[0].matrices[0].values)
    figure = _figure(5.0 * len(steps), 0.3 * rows + 2.2)
    panels = np.atleast_1d(figure.subplots(1, len(steps)))
    # One colour scale for all three, so that X = E + PE can be read off the colours.
    limit = max(float(np.nanmax(np.abs(_array(s.matrices[0].values)))) for s in steps)
    for axes, step in zip(panels, steps, strict=True):
        matrix = step.matrices[0]
        image = _heatmap(axes, _array(matrix.values), matrix.row_labels, matrix.col_labels, sequential=False,
                         limit=limit)
        axes.set_title(f"{step.title}\n{step.formula}", fontsize=9)
        axes.set_xlabel("dimension", fontsize=8)
        figure.colorbar(image, ax=axes, shrink=0.8)
    panels[0].set_ylabel("prompt token" if lm else "source token")
    added = any(s.name.endswith(".PE") for s in steps)
    figure.suptitle("Input vectors: token embedding + positional encoding = X" if added else
                    "Input vectors: X = token embedding (no position vector is added)", fontsize=11)
    return figure


def _is_toy(walk: Walkthrough) -> bool:
    widths = [len(m.values[0]) for s in walk.steps if s.kind in ("matrix", "attention") for m in s.matrices
              if m.values]
    return bool(widths) and max(widths) <= TOY_WIDTH


FIGURE_NAMES = ("positional_encoding.png", "input_vectors.png", "attention_*.png", "probabilities*.png",
                "grid_*.png")  # every name write_plots gives a figure


def check_plots_dir(directory: Path, overwrite: bool) -> Path:
    """Refuse, before any work, a --plots path that is a file, or a folder holding figures unless `overwrite`."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise UserError(f"--plots {directory} is a file; give a folder for the figures")
    if directory.is_dir() and not overwrite:
        figures = sorted(path.name for pattern in FIGURE_NAMES for path in directory.glob(pattern))
        if figures:
            raise UserError(f"{directory} already holds figures ({', '.join(figures[:3])}"
                            f"{', ...' if len(figures) > 3 else ''}): pass --overwrite to replace them, "
                            "or choose another --plots DIR")
    return directory


def write_plots(walk: Walkthrough, directory: Path) -> list[Path]:
    """Write the walkthrough's figures as PNG files into `directory`; return their paths in order."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    figure = positional_encoding_figure(walk)
    if figure is not None:
        written.append(_save(figure, directory / "positional_encoding.png"))
    toy = _is_toy(walk)
    if toy:
        for number, step in enumerate(walk.steps, 1):
            drawn_as_attention = step.name.endswith(".weights")
            if step.decode_step is None and step.kind in ("matrix", "attention") and step.matrices \
                    and not drawn_as_attention:
                path = directory / f"grid_{number:02d}_{_slug(step.name)}.png"
                written.append(_save(grid_figure(step), path))
    else:
        figure = input_figure(walk)
        if figure is not None:
            written.append(_save(figure, directory / "input_vectors.png"))
    # Attention: the last occurrence of each weights step (the last generation step sees the whole prefix).
    last: dict[str, Step] = {}
    for step in walk.steps:
        if step.name.endswith(".weights") and step.kind == "attention" and step.matrices:
            last[step.name] = step
    for step in last.values():
        figure, stem = attention_figure(walk, step)
        written.append(_save(figure, directory / f"{stem}.png"))
    for step in walk.steps:
        if step.name.endswith("probabilities") and step.kind == "distribution" and step.matrices:
            t = step.decode_step
            stem = "probabilities" if t is None else f"probabilities_step{t:02d}"
            written.append(_save(distribution_figure(walk, step), directory / f"{stem}.png"))
    return written
