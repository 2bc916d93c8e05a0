"""int8 against float32: on how many test sentences `translate --quantize int8` writes float32's translation,
greedy and beam 4, and where the others come from.

For every run given (each with its test sentences), one table row per search, one column per way of decoding:

- float32 as `translate` decodes it (the reference);
- int8 as first shipped: every linear layer int8 (float-trained weights requantized), one int8 row per input
  row, the output projection not rescored (`quantize_int8(passes=1, rescored=0, requantize=True)`);
- as the second pass shipped it: every layer int8, two int8 rows per input row (integers and remainder), the
  output's best logits rescored in float (`requantize=True`);
- int8 as `translate --quantize int8` decodes now: the output projection (rescored) and the layers whose
  file shipped int8 integers (Firefox's students: every one), float-trained layers left float;
- for Firefox's students, the browser's int8 arithmetic: float32 with every int8 layer's input rounded as
  intgemm rounds it in Firefox (the file's fixed `*_QuantMultA` scales; learn/browser.py, lesson 16).

    python -m benchmarks.int8_agreement --run /work/prep/runs/firefox-en-pt firefox \\
        --run runs/small data/en-fr-software/test.tsv --run runs/toy toy   # writes its section of BENCHMARKS.md

SENTENCES: `firefox` (the English lines of tests/firefox/sentences.txt), `toy` (the built-in toy pairs' English)
or a .tsv file (its first column); --sentences caps how many.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.firefox import english, int8_translator  # noqa: E402
from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer.generate import DecodingOptions  # noqa: E402
from clearformer.generate.int8 import RESCORED  # noqa: E402
from clearformer.generate.layout import for_decoding  # noqa: E402
from clearformer.generate.translator import PyTorchTranslator  # noqa: E402
from clearformer.learn.browser import activation_scales, int8_activations  # noqa: E402
from clearformer.load import load_decoding_facts, load_model  # noqa: E402

# (column, int8 rows per input row, output logits rescored in float, float-trained layers requantized too)
SETUPS = (("every layer int8, one row per input (first pass)", 1, 0, True),
          (f"every layer int8, two rows, output's best {RESCORED} rescored (second pass)", 2, RESCORED, True),
          (f"int8 now: output projection (best {RESCORED} rescored) and shipped layers (two rows)", 2, RESCORED, False))


def sentences_of(spec: str, count: int) -> list[str]:
    if spec == "firefox":
        lines = english(10_000)
    elif spec == "toy":
        from clearformer.data.toy import toy_pairs

        lines = [source for source, _ in toy_pairs()]
    else:
        text = Path(spec).read_text(encoding="utf-8")
        lines = [line.split("\t")[0] for line in text.splitlines() if line.strip()]
    return lines[:count]


class BrowserArithmetic(PyTorchTranslator):
    """float32 with every int8 layer's input rounded as the browser's engine rounds it (learn/browser.py
    `int8_activations`: the Marian file's fixed QuantMultA scales of Firefox's en-pt student)."""

    def __init__(self, model, tokenizer, facts) -> None:
        super().__init__(for_decoding(model), tokenizer, facts=facts)
        self.scales = activation_scales(model.config)

    def translate(self, inputs, options=None, **kwargs):
        with int8_activations(self.model, self.scales):
            return super().translate(inputs, options, **kwargs)


def agreement(run: Path, sentences: list[str], browser: bool) -> list[list[str]]:
    model, tokenizer, _ = load_model(run)
    facts = load_decoding_facts(run, tokenizer)  # the engine's shortlist and length factor (decoding.json)
    translators = {name: int8_translator(model, tokenizer, facts, passes, rescored, requantize)
                   for name, passes, rescored, requantize in SETUPS}
    if browser:
        translators["browser"] = BrowserArithmetic(model, tokenizer, facts)
    reference = PyTorchTranslator.open(model, tokenizer, None, facts=facts)
    rows = []
    for beam in (1, 4):
        options = DecodingOptions(batch_size=64, beam=beam)
        expected = [t.text for t in reference.translate(sentences, options)]
        cells = [run.name, "greedy" if beam == 1 else f"beam {beam}"]
        for translator in translators.values():
            got = [t.text for t in translator.translate(sentences, options)]
            cells.append(f"{sum(a == b for a, b in zip(got, expected, strict=True))} of {len(sentences)}")
        cells += [""] * (len(SETUPS) + 1 - len(translators))
        rows.append(cells)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", nargs=2, action="append", metavar=("RUN", "SENTENCES"), required=True)
    parser.add_argument("--sentences", type=int, default=260)
    parser.add_argument("--browser", action="append", default=[], metavar="RUN",
                        help="a run that is Firefox's en-pt student: add the browser's arithmetic")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before, start = os.getloadavg()[0], time.perf_counter()
    rows = []
    for run, spec in args.run:
        rows += agreement(Path(run), sentences_of(spec, args.sentences), run in args.browser)
        print(rows[-2:], flush=True)
    table = markdown_table(["run", "search", *(name for name, *_ in SETUPS),
                            "the browser's int8 arithmetic (QuantMultA)"], rows)
    runs = ", ".join(f"{Path(run).name} ({spec}, first {args.sentences})" for run, spec in args.run)
    body = (f"Test sentences translated exactly as float32 translates them (`translate`, batches of 64), out of "
            f"how many: {runs}. Columns: generate/int8.py's settings (`quantize_int8(passes, rescored, "
            f"requantize)`; the last is `translate --quantize int8`), and for Firefox's student the browser's "
            f"arithmetic (float32 with each int8 layer's input rounded by the file's fixed QuantMultA, as intgemm in "
            f"Firefox does). 1 thread; {time.perf_counter() - start:.0f} s; 1-minute load average "
            f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after (agreement does not depend on load).\n\n"
            f"{table}\n")
    if not args.no_write:
        write_section("int8_agreement", "int8 against float32: where the translations move", body)
    print(body)


if __name__ == "__main__":
    main()
