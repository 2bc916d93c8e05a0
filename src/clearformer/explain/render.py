"""Print a walkthrough in the terminal: one labelled matrix per step, in computation order (rich tables).

The one renderer of both explain commands (`clearformer explain` and `clearformer lm explain`):
`render` for text, `to_json` for `--format json`.
"""

from __future__ import annotations

import io
import json

from rich.console import Console
from rich.table import Table
from rich.text import Text

from clearformer.explain.walkthrough import Matrix, Step, Walkthrough

STAGE_TITLES = {"input": "INPUT", "encoder": "ENCODER", "decoder": "DECODER", "output": "OUTPUT",
                "example": "WORKED EXAMPLE", "multi-head": "MULTI-HEAD ATTENTION", "cache": "KEY/VALUE CACHE"}


def to_json(walk: Walkthrough) -> str:
    """`--format json`: every step of the walkthrough (no layer, head or step selection), one line."""
    return json.dumps(walk.to_dict(), ensure_ascii=False) + "\n"


def matrix_table(matrix: Matrix, decimals: int, max_cols: int, max_rows: int) -> Table:
    """A rich Table with token labels on rows and columns; wide matrices are cut with a note."""
    cols = matrix.col_labels or [str(j) for j in range(len(matrix.values[0]) if matrix.values else 0)]
    shown_cols = cols if max_cols <= 0 else cols[:max_cols]
    table = Table(show_header=True, header_style="bold", box=None if not matrix.row_labels else None,
                  pad_edge=False, title=f"head {matrix.head}" if matrix.head is not None else None,
                  title_justify="left", title_style="italic")
    table.add_column("", style="bold cyan", no_wrap=True)
    for label in shown_cols:
        table.add_column(label, justify="right", no_wrap=True)
    if max_cols > 0 and len(cols) > max_cols:
        table.add_column(f"… +{len(cols) - max_cols}", justify="left", style="dim")
    rows = matrix.values if max_rows <= 0 else matrix.values[:max_rows]
    for index, row in enumerate(rows):
        label = matrix.row_labels[index] if index < len(matrix.row_labels) else str(index)
        cells = [_number(x, decimals) for x in (row if max_cols <= 0 else row[:max_cols])]
        if max_cols > 0 and len(cols) > max_cols:
            cells.append("")
        table.add_row(label, *cells)
    if max_rows > 0 and len(matrix.values) > max_rows:
        table.add_row(f"… +{len(matrix.values) - max_rows} rows", *[""] * len(shown_cols))
    return table


def _number(x: float, decimals: int) -> str:
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "∞" if x > 0 else "-∞"
    if float(x).is_integer() and abs(x) < 1e6 and decimals > 0:
        return f"{x:.{decimals}f}"
    return f"{x:.{decimals}f}"


def step_heading(step: Step) -> str:
    where = []
    if step.layer is not None:
        where.append(f"layer {step.layer}")
    if step.sublayer:
        where.append(step.sublayer.replace("_", " "))
    if step.decode_step is not None:
        where.append(f"generation step {step.decode_step + 1}")
    return step.title + (f"  [{', '.join(where)}]" if where else "")


def render(walk: Walkthrough, decimals: int = 4, layer: int | None = None, head: int | None = None,
           max_cols: int = 10, max_rows: int = 12, width: int | None = None, color: bool | None = None,
           start: int = 1) -> str:
    """The whole walkthrough as terminal text, `width` columns wide (default: the terminal's, at most 120);
    steps are numbered from `start` (a step shown alone keeps its number in the walkthrough, as on the page)."""
    width = width or min(Console().width, 120)
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, color_system="auto" if color else None,
                      highlight=False)
    console.print(Text(walk.title, style="bold underline"))
    if walk.source_tokens:
        console.print(f"tokens: {walk.source_tokens}")
    stage = None
    number = start - 1
    for step in walk.steps:
        if layer is not None and step.layer is not None and step.layer != layer:
            continue
        if step.stage != stage or (step.decode_step is not None and step.name.endswith("token_ids")):
            stage = step.stage
            label = STAGE_TITLES.get(stage, stage.upper())
            if step.decode_step is not None:
                label += f" — generation step {step.decode_step + 1}"
            console.rule(Text(label, style="bold magenta"))
        number += 1
        console.print(Text(f"Step {number}. {step_heading(step)}", style="bold green"))
        if step.formula:
            console.print(Text(f"  {step.formula}", style="yellow"))
        if step.explanation:
            console.print(Text(f"  {step.explanation}", style="dim"))
        for matrix in step.matrices:
            if head is not None and matrix.head is not None and matrix.head != head:
                continue
            if step.kind == "ids" and step.name.endswith("chosen"):
                console.print(f"  -> {matrix.note!r} (id {int(matrix.values[0][0])})")
                continue
            if matrix.note:
                console.print(Text(f"  ({matrix.note})", style="dim"))
            whole = step.kind == "ids" or step.name.endswith(".mask")  # ids and 0/1 masks
            console.print(matrix_table(matrix, 0 if whole else decimals, max_cols, max_rows))
        console.print()
    if walk.result:
        console.rule(Text("RESULT", style="bold magenta"))
        if getattr(walk, "masked_source", ""):  # placeholders masked before the model, restored after
            console.print(Text(f"the model read: {walk.masked_source}\nit wrote:       {walk.masked_result}"))
        console.print(Text(walk.result, style="bold"), soft_wrap=True)  # one line, for scripts
    return buffer.getvalue()
