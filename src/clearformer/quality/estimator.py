"""The fitted confidence: a logistic regression over the sentence features, small and saved with the run.

    confidence = sigmoid(b + Σ_i w_i (x_i - mean_i) / std_i)          (Bergamot's form: standardise, combine)

fitted on translations of held-out pairs (a corpus' valid split) with each translation's sentence chrF / 100
as a soft target (binary cross-entropy), so the score orders translations as chrF does and reads as the
chance that a reviewer finds nothing to change. The weights are a few dozen numbers in JSON
(`confidence.json` in the run folder, written by `clearformer confidence fit`; never a pickle). A model
imported from a file the project has fitted (Firefox's students) finds its weights in `quality/shipped/`.
A run without either gets the unsupervised score (`estimate.unsupervised_score`), and the commands say so.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.quality.features import FEATURES
from clearformer.store.atomic import atomic_write_text
from clearformer.store.safeio import read_json_object

WEIGHTS_FILE = "confidence.json"
SHIPPED = Path(__file__).parent / "shipped"  # the project's fits of imported models (benchmarks/confidence.py)
FORMAT = "clearformer-confidence-1"


@dataclass(frozen=True)
class Weights:
    """A fitted logistic regression: `features` (names from `features.FEATURES`), their `means` and `stds`
    on the fitting data, the `coefficients` and the `intercept`; `fitted_on` says on what (free-form)."""

    features: tuple[str, ...]
    means: tuple[float, ...]
    stds: tuple[float, ...]
    coefficients: tuple[float, ...]
    intercept: float
    fitted_on: dict = field(default_factory=dict)

    def score(self, row: list[float]) -> float:
        """One translation's confidence in [0, 1] from its feature row (in `FEATURES` order)."""
        values = dict(zip(FEATURES, row, strict=True))
        z = self.intercept + sum(c * (values[name] - m) / s for name, m, s, c in
                                 zip(self.features, self.means, self.stds, self.coefficients, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))

    def to_dict(self) -> dict:
        return {"format": FORMAT, "features": list(self.features), "means": list(self.means),
                "stds": list(self.stds), "coefficients": list(self.coefficients), "intercept": self.intercept,
                "fitted_on": self.fitted_on}

    @classmethod
    def from_dict(cls, data: dict, where: str) -> Weights:
        """Checked: the format, known feature names, one finite number per feature in each list."""
        if data.get("format") != FORMAT:
            raise UserError(f"{where}: not a clearformer confidence file (format {data.get('format')!r}, "
                            f"expected {FORMAT!r})")
        names = data.get("features")
        if not isinstance(names, list) or not names or any(name not in FEATURES for name in names):
            raise UserError(f"{where}: features must be a list of known feature names ({', '.join(FEATURES)})")
        lists = {}
        for key in ("means", "stds", "coefficients"):
            values = data.get(key)
            if (not isinstance(values, list) or len(values) != len(names)
                    or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)):
                raise UserError(f"{where}: {key} must hold {len(names)} finite numbers")
            lists[key] = tuple(float(v) for v in values)
        if any(s <= 0 for s in lists["stds"]):
            raise UserError(f"{where}: stds must be positive")
        intercept = data.get("intercept")
        if not isinstance(intercept, (int, float)) or not math.isfinite(intercept):
            raise UserError(f"{where}: intercept must be a finite number")
        fitted_on = data.get("fitted_on", {})
        return cls(tuple(names), lists["means"], lists["stds"], lists["coefficients"], float(intercept),
                   fitted_on if isinstance(fitted_on, dict) else {})

    def save(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=1) + "\n")


def load_weights(run: Path) -> Weights | None:
    """The run's fitted weights (`confidence.json`); for a model imported from a file the project fitted
    (Firefox's students: an import cannot fit), the weights shipped in `quality/shipped/` whose
    `fitted_on.model_sha256` is the imported file's (the run's provenance.json); else None."""
    path = Path(run) / WEIGHTS_FILE
    if path.exists():
        return Weights.from_dict(read_json_object(path), str(path))
    imported = imported_model_sha256(Path(run))
    if imported is None:
        return None
    for shipped in sorted(SHIPPED.glob("*.json")):
        weights = Weights.from_dict(read_json_object(shipped), str(shipped))
        if weights.fitted_on.get("model_sha256") == imported:
            return weights
    return None


def imported_model_sha256(run: Path) -> str | None:
    """The sha256 of the model file a run was imported from (its provenance.json), or None."""
    path = run / "provenance.json"
    if not path.exists():
        return None
    files = read_json_object(path).get("files")
    model = files.get("model") if isinstance(files, dict) else None
    digest = model.get("sha256") if isinstance(model, dict) else None
    return digest if isinstance(digest, str) else None


def fit(rows: torch.Tensor, targets: torch.Tensor, names: tuple[str, ...] = tuple(FEATURES),
        l2: float = 1e-2, fitted_on: dict | None = None) -> Weights:
    """rows (n, len(FEATURES)) float64, targets (n,) in [0, 1] -> `Weights` over the features `names`:
    standardised, then L-BFGS on the mean binary cross-entropy + l2 · |w|² (deterministic: no sampling)."""
    if rows.shape[0] < 20:
        raise UserError(f"{rows.shape[0]} translations to fit on; at least 20 are needed")
    columns = [list(FEATURES).index(name) for name in names]
    x = rows[:, columns].double()
    means, stds = x.mean(0), x.std(0).clamp(min=1e-6)
    x = (x - means) / stds
    y = targets.double().clamp(0, 1)
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros((), dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.LBFGS([w, b], lr=1.0, max_iter=500, tolerance_grad=1e-10, line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        optimiser.zero_grad()
        value = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y) + l2 * (w * w).sum()
        value.backward()
        return value

    optimiser.step(loss)
    return Weights(tuple(names), tuple(means.tolist()), tuple(stds.tolist()), tuple(w.detach().tolist()),
                   float(b.detach()), dict(fitted_on or {}))
