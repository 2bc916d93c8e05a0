"""The training record: metrics.csv (one row per log interval or validation) and curve.png.

The CSV is appended to as training goes (so a killed run keeps its history); on --resume the rows
after the checkpoint's step are dropped, since the resumed run computes them again.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from clearformer.store.atomic import atomic_write_text

COLUMNS = ["step", "epoch", "elapsed_s", "train_loss", "train_ppl", "lr", "tokens_per_s", "mfu", "padding_share",
           "grad_norm", "valid_loss", "valid_ppl", "valid_bleu", "valid_vs_start"]


class MetricsLog:
    """Appends dict rows (missing columns left empty) to `path`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def truncate_after(self, step: int) -> None:
        """Forget rows of steps after `step` (a resumed run recomputes them)."""
        rows = self.read()
        kept = [row for row in rows if row.get("step") is not None and row["step"] <= step]
        if len(kept) != len(rows) or self._header() not in (None, COLUMNS):
            self._rewrite(kept)

    def _header(self) -> list[str] | None:
        try:
            with open(self.path, encoding="utf-8") as stream:
                return stream.readline().rstrip("\n").split(",")
        except FileNotFoundError:
            return None

    def _rewrite(self, rows: list[dict]) -> None:
        """Write `rows` under the current COLUMNS (a file from an older version had fewer)."""
        lines = [",".join(COLUMNS)] + [",".join(_cell(row.get(c)) for c in COLUMNS) for row in rows]
        atomic_write_text(self.path, "\n".join(lines) + "\n")

    def append(self, row: dict) -> None:
        header = self._header()
        if header is not None and header != COLUMNS:
            self._rewrite(self.read())
        new = header is None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8", newline="") as stream:
            if new:
                stream.write(",".join(COLUMNS) + "\n")
            stream.write(",".join(_cell(row.get(column)) for column in COLUMNS) + "\n")

    def read(self) -> list[dict]:
        if not self.path.exists():
            return []
        rows = []
        with open(self.path, encoding="utf-8", newline="") as stream:
            for raw in csv.DictReader(stream):
                rows.append({k: _number(v) for k, v in raw.items() if k in COLUMNS})
        return rows


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _number(text: str | None):
    if text is None or text == "":
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return int(number) if number.is_integer() and "." not in text and "e" not in text else number


def plot_curves(rows: list[dict], path: Path, title: str) -> Path | None:
    """Loss (train and validation) and learning rate against the step, as a PNG; None if no rows."""
    train = [(r["step"], r["train_loss"]) for r in rows if r.get("train_loss") is not None]
    valid = [(r["step"], r["valid_loss"]) for r in rows if r.get("valid_loss") is not None]
    rates = [(r["step"], r["lr"]) for r in rows if r.get("lr") is not None]
    if not train and not valid:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, (loss_axes, lr_axes) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True,
                                                gridspec_kw={"height_ratios": [2, 1]})
    if train:
        loss_axes.plot(*zip(*train, strict=True), label="training loss (label-smoothed)", linewidth=1.2)
    if valid:
        loss_axes.plot(*zip(*valid, strict=True), "o-", label="validation loss (label-smoothed)")
    loss_axes.set_ylabel("loss (nats per target token)")
    loss_axes.set_title(title)
    loss_axes.grid(alpha=0.3)
    loss_axes.legend()
    if rates:
        lr_axes.plot(*zip(*rates, strict=True), color="tab:green")
    lr_axes.set_xlabel("optimizer step")
    lr_axes.set_ylabel("learning rate")
    lr_axes.grid(alpha=0.3)
    figure.tight_layout()
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp.png")
    figure.savefig(temporary, dpi=110)
    plt.close(figure)
    temporary.replace(path)
    return path


def perplexity(loss: float | None) -> float | None:
    if loss is None:
        return None
    return math.exp(min(loss, 50.0))
