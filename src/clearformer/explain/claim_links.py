"""Which walkthrough step each of `clearformer claims`' experiments belongs to.

The walkthrough explains a step; the claim measures what the tutorials say about it. A step whose
recorded name matches one of the rules below carries `Step.claim`: the claim's number, its
statement, the command that measures it and the section of docs/claims.md that shows the result.
The HTML page (exported and served) shows it as a link under the step's explanation.

    the scaled scores  Q K^T / sqrt(d_k)             -> claim 2 (why scale by sqrt(d_k))
    the positional encoding                           -> claim 3 (word order without positions)
    the heads' outputs and their concatenation        -> claim 4 (multiple heads)
    Add & Norm (its residual sum and its norm)        -> claim 5 (residuals and normalisation)
    the encoder output; the GRU decoder's states      -> claim 1 (all tokens at once vs step by step)

Claims 3, 4 and 5 also carry `experiment`: the what-if rerun (`--ablate`, docs/whatif.md) that shows the claim
on the learner's own sentence: without the positions, with a head of this layer switched off, without this
residual connection. `{head}` in it stands for the head the page shows.
"""

from __future__ import annotations

from pathlib import Path

from clearformer.claims.registry import claim
from clearformer.explain.interventions import POSITION_OWNERS

DOCS = "docs/claims.md"  # relative to the project's root: the page links docs/claims.md#claim-N


def claims_doc() -> Path | None:
    """docs/claims.md of the checkout clearformer runs from, or None (an installed package has no docs/): the
    server answers it at /docs/claims.md and an exported page links its file; without it the page names the
    section without a link (never a broken one)."""
    path = Path(__file__).resolve().parents[3] / DOCS
    return path if path.is_file() else None

# (claim number, test on the recorded name); the first rule that matches wins.
RULES: tuple[tuple[int, object], ...] = (
    (2, lambda name: name.endswith(".scaled") and not name.endswith("tokens.scaled")),  # not E·sqrt(d_model)
    (3, lambda name: name.endswith(".PE")),
    (4, lambda name: name.endswith((".head_outputs", ".concat"))),
    (5, lambda name: ".add_norm_" in name and name.endswith((".residual", ".norm"))),
    (1, lambda name: name in ("encoder.output", "decoder.states")),
)


def claim_number(name: str) -> int | None:
    """The claim that measures the step recorded as `name`, or None."""
    for number, matches in RULES:
        if matches(name):
            return number
    return None


def claim_link(name: str) -> dict | None:
    """{"number", "statement", "command", "docs"} for the step recorded as `name`, or None."""
    number = claim_number(name)
    if number is None:
        return None
    entry = claim(number)
    return {"number": number, "statement": entry.statement, "command": f"clearformer claims {number} --quick",
            "docs": f"{DOCS}#claim-{number}", "experiment": experiment(number, name)}


def experiment(number: int, name: str) -> dict | None:
    """{"ablate": intervention name, "label": what it does} for claims 3-5 on the step recorded as `name`."""
    module = name.rsplit(".", 1)[0]
    if number == 3 and module.split(".")[0] in POSITION_OWNERS:
        owner = POSITION_OWNERS[module.split(".")[0]]
        return {"ablate": f"{owner}.positions", "label": f"rerun without the {owner}'s positions"}
    if number == 4:
        return {"ablate": f"{module.removesuffix('.absorbed')}.head.{{head}}",
                "label": "switch head {head} of this layer off and rerun"}
    if number == 5:
        return {"ablate": f"{module}.residual", "label": "drop this residual connection and rerun"}
    return None
