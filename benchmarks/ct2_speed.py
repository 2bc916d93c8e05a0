"""CTranslate2 only: a clearformer model exported with `clearformer export --to ctranslate2` against a
MarianMTModel of the same size converted by CTranslate2's own converter, float32 and int8.

    python benchmarks/ct2_speed.py                       # writes its section of BENCHMARKS.md
    python benchmarks/ct2_speed.py --no-write --sentences 128 --rounds 7

The same batches, forced lengths and worker processes as benchmarks/decode_speed.py (whose functions
it uses): the `small` size with random weights, vocabulary --vocab, every sentence made to generate
exactly --new-tokens tokens. Both models are converted in this process before any worker starts; each
row runs in its own worker, which only loads a converted folder, warms up and times. Each round times
every row once, in an order that alternates from round to round; the figure is the median over rounds
of the ratio (Marian's time / the exported model's time) within a round, so a slow phase of the machine
cancels out. The goal (issue 25): exported >= 0.95x the converted Marian, greedy and beam 4.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import ct2_export_row  # noqa: E402
from benchmarks.decode_speed import (  # noqa: E402
    marian_model,
    save_and_convert,
    source_lengths,
    start_workers,
    stop_workers,
)
from benchmarks.report import markdown_table, write_section  # noqa: E402

MARIAN = "CTranslate2 float32"
PAIRS = [(ct2_export_row.SYSTEM, MARIAN), (ct2_export_row.SYSTEM_INT8, ct2_export_row.MARIAN_INT8)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=30)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args()
    args.ab, args.skip_uncached = None, True  # what decode_speed's workers read

    temporary = tempfile.TemporaryDirectory()
    directory = Path(temporary.name)
    save_and_convert(marian_model(args.vocab), args.vocab, directory)
    ct2_export_row.prepare(args, directory)
    load_before = os.getloadavg()[0]
    workers, processes = start_workers(["ctranslate2", *ct2_export_row.SYSTEMS], args, temporary.name)
    times: dict[tuple[str, int], list[float]] = {}
    for round_ in range(args.rounds):
        keys = list(workers) if round_ % 2 == 0 else list(reversed(workers))
        for key in keys:
            workers[key].send(key)
            times.setdefault(key, []).append(workers[key].recv())
        print(f"round {round_ + 1}: " + ", ".join(f"{name} beam {beam} {times[(name, beam)][-1]:.2f} s"
                                                  for name, beam in keys), flush=True)
    stop_workers(processes)
    load = f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    temporary.cleanup()
    tokens = args.sentences * args.new_tokens
    rows = []
    for ours, theirs in PAIRS:
        for beam in (1, 4):
            mine, peer = times[(ours, beam)], times[(theirs, beam)]
            ratio = statistics.median(p / m for p, m in zip(peer, mine, strict=True))
            rows.append([ours, theirs, "greedy" if beam == 1 else f"beam {beam}",
                         f"{tokens / statistics.median(mine):,.0f}", f"{tokens / statistics.median(peer):,.0f}",
                         f"{ratio:.3f}x", "yes" if ratio >= 0.95 else "no"])
    lengths_note = source_lengths(args.sentences, args.seed)[1]
    body = (f"{args.sentences} sentences ({lengths_note}), batches of {args.batch}, exactly {args.new_tokens} new "
            f"tokens each, vocabulary {args.vocab}, the `small` size with random weights, {args.threads} threads "
            f"(intra_threads), {args.rounds} rounds in alternating order, each row in its own worker process. "
            f"tokens/s: median over rounds; ratio: median over rounds of (Marian's time / the export's time) "
            f"within a round. 1-minute load average: {load}.\n\n"
            + markdown_table(["exported clearformer model", "converted MarianMTModel", "search", "exported tokens/s",
                              "Marian tokens/s", "ratio", ">= 0.95x"], rows))
    print(body)
    if not args.no_write:
        write_section("ct2_speed", "CTranslate2: exported clearformer model vs converted Marian (float32, int8)",
                      body)


if __name__ == "__main__":
    main()
