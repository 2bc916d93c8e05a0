"""Why did it say that, measured: the alignment error rate (AER) of each attribution method against hand
alignments of toy sentences (benchmarks/data/toy_alignments.tsv, sure links), and the time per sentence of
`lens`, `patch` and `attribute` (each method) on the trained toy model and on a `small`-sized model with random
weights (the time of the computation does not depend on the weights).

    clearformer train --preset toy-translate     # the toy model (under a minute)
    python benchmarks/why_tools.py [--checkpoint DIR] [--repeats 3]

AER (Och & Ney 2003) with sure links S only (so P = S): AER = 1 - 2 |A ∩ S| / (|A| + |S|), A the method's
links (each target token to the source token it scores highest, `explain.attribution.alignments`), summed
over the sentences. The attribution is teacher-forced on the hand-aligned translation (`--target`), so the
links are over the same tokens. Writes the section "why" of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer.config import preset  # noqa: E402
from clearformer.explain.attribution import DEFAULT_STEPS, METHODS, alignments, attribute  # noqa: E402
from clearformer.explain.lens import lens_translation  # noqa: E402
from clearformer.explain.patching import activation_patching  # noqa: E402
from clearformer.generate.options import DecodingOptions, search_tokens  # noqa: E402
from clearformer.generate.source import check_source  # noqa: E402
from clearformer.load import load_model  # noqa: E402
from clearformer.model.build import build_model  # noqa: E402
from clearformer.store.runs import resolve_checkpoint  # noqa: E402

DATA = Path(__file__).parent / "data" / "toy_alignments.tsv"


def read_alignments(tokenizer) -> list[tuple[str, list[int], list[int], set[tuple[int, int]]]]:
    """(source, source ids, target ids with <eos>, sure links) per line; the links must fit the tokens."""
    rows = []
    for number, line in enumerate(DATA.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        source, target, links = line.split("\t")
        src = check_source(tokenizer, source, 64)
        tgt = [*tokenizer.encode(target), tokenizer.eos_id]
        sure = {tuple(int(x) for x in link.split("-")) for link in links.split()}
        words = len(src) - (1 if src[-1] == tokenizer.eos_id else 0)
        if any(i >= words or j >= len(tgt) - 1 for i, j in sure):
            raise SystemExit(f"{DATA}:{number}: a link falls outside the tokens {source!r} / {target!r}")
        rows.append((source, src, tgt, sure))
    return rows


def aer(model, tokenizer, rows, method: str) -> tuple[float, int, int, int]:
    """(AER, |A ∩ S|, |A|, |S|) of `method` over every row."""
    hits = proposed = sure_total = 0
    for _, src, tgt, sure in rows:
        result = attribute(model, src, tgt, tokenizer.bos_id, method, DEFAULT_STEPS)
        specials = {tokenizer.eos_id, tokenizer.bos_id, tokenizer.pad_id}
        links = set(alignments(result.scores, [i for i, t in enumerate(src) if t not in specials],
                               [j for j, t in enumerate(tgt) if t not in specials]))
        hits += len(links & sure)
        proposed += len(links)
        sure_total += len(sure)
    return 1 - 2 * hits / (proposed + sure_total), hits, proposed, sure_total


def seconds(work, repeats: int) -> float:
    """The median wall time of `work()` over `repeats` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def tool_times(model, src: list[int], corrupted: list[int], translation: list[int], bos: int, options,
               tokens, repeats: int) -> dict[str, float]:
    model.eval()
    times = {"lens": seconds(lambda: lens_translation(model, src, options, tokens), repeats),
             "patch": seconds(lambda: activation_patching(model, src, corrupted, translation, bos), repeats)}
    for method in METHODS:
        times[f"attribute {method}"] = seconds(lambda m=method: attribute(model, src, translation, bos, m), repeats)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="the toy model's folder (default: the latest run)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    model, tokenizer, _ = load_model(resolve_checkpoint(args.checkpoint))
    rows = read_alignments(tokenizer)
    table = []
    for method in METHODS:
        rate, hits, proposed, sure = aer(model, tokenizer, rows, method)
        table.append([method, f"{rate:.3f}", hits, proposed, sure])
        print(method, table[-1], flush=True)
    options = DecodingOptions(max_new=8, brevity=0.0)
    source, src, tgt, _ = next(r for r in rows if r[0] == "She does not love you")
    corrupted = check_source(tokenizer, "She does not love me", 64)
    toy = tool_times(model, src, corrupted, tgt, tokenizer.bos_id, options, search_tokens(model, tokenizer, options),
                     args.repeats)
    small_config = preset("small", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer))
    small = build_model(small_config).eval()
    small_times = tool_times(small, src, corrupted, tgt, tokenizer.bos_id, options, search_tokens(small, tokenizer,
                             options), args.repeats)
    timing = [[tool, f"{toy[tool] * 1000:.0f}", f"{small_times[tool] * 1000:.0f}"] for tool in toy]
    params = sum(p.numel() for p in small.parameters())
    body = (f"Alignment error rate against {len(rows)} hand-aligned toy sentences ({DATA.name}, "
            f"{sum(len(r[3]) for r in rows)} sure links), the trained toy model (toy-translate, 400 steps), "
            f"teacher-forced on the hand-aligned translations; a method links each target token to the source "
            f"token it scores highest. Integrated gradients: {DEFAULT_STEPS} midpoint steps, baseline = every "
            f"source token embedding zero (positions kept). Lower is better.\n\n"
            + markdown_table(["method", "AER", "|A∩S|", "|A|", "|S|"], table)
            + f"\n\nTime per sentence (median of {args.repeats}; ms) for \"{source}\" ({len(src)} source tokens, "
              f"{len(tgt)} target tokens; lens: greedy with at most 8 steps; patch against \"She does not love me\": "
              f"every point as one row of a batched forward pass). `small`: the preset's sizes ({params:,} "
              f"parameters) with RANDOM weights (timing only), on the same tokens. The machine was shared with "
              f"other jobs (load around 10 on 2 cores), so the times are upper bounds.\n\n"
            + markdown_table(["tool", "toy (ms)", "small, random weights (ms)"], timing))
    write_section("why", "Why did it say that: attribution AER and tool times", body)
    print(body)


if __name__ == "__main__":
    main()
