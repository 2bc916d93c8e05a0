"""The lessons' snippets: short programs that call clearformer's own modules on the seeds' test data.

A snippet is stored as source text, and that text is what runs: `run_snippet` executes it and
captures what it prints, so the terminal lesson, the notebook and the tests all show real output
(nothing is typed in by hand). Each snippet leaves its results in its namespace, where the tests
compare them with the golden values of tests/golden/seed_examples.json.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

import torch

# Shared by every snippet: four decimals, no scientific notation (the seeds print that way), and no
# gradients (the lessons look at numbers; printed tensors then carry no grad_fn).
PREAMBLE = "import torch\ntorch.set_printoptions(precision=4, sci_mode=False)\ntorch.set_grad_enabled(False)\n"


@dataclass
class SnippetRun:
    source: str
    output: str
    namespace: dict


def run_snippet(source: str) -> SnippetRun:
    """Execute `source` (after PREAMBLE) in a fresh namespace; return what it printed and its variables.

    Torch's global seed, gradient mode and print options are restored afterwards, so a lesson leaves no trace."""
    namespace: dict = {"__name__": "__clearformer_lesson__"}
    buffer = io.StringIO()
    rng, grad = torch.get_rng_state(), torch.is_grad_enabled()
    try:
        with contextlib.redirect_stdout(buffer):
            exec(compile(PREAMBLE + source, "<lesson snippet>", "exec"), namespace)
    finally:
        torch.set_rng_state(rng)
        torch.set_grad_enabled(grad)
        torch.set_printoptions(profile="default")
    return SnippetRun(source, buffer.getvalue(), namespace)
