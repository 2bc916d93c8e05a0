"""The LibreTranslate API under Weblate's load: throughput and p50/p99 latency at 1, 8 and 64 clients.

Each client sends Weblate 5.14.3's own request, byte for byte as its LibreTranslate backend sent it
(tests/firefox/weblate-5.14.3.jsonl: a page of 20 strings with [X{n}X] placeholders, JSON, en -> pt), on its
own keep-alive connection, one request after the other. The server: `clearformer serve` on Firefox's en-pt
student (`--batch 32 --batch-wait 5`, the defaults), and the peer, the same server decoding each request alone
(`--batch 1`), alternating batched, alone, alone, batched at each level (a drift in the machine's load
cancels). Loopback only; bounded: 1 client x 2 pages, 8 x 1, 64 x 1 (the peer at 1 and 8 clients only).

    python -m benchmarks.weblate_api --checkpoint /work/prep/runs/firefox-en-pt [--threads 1] [--skip-peer]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.catalog import load, percentile, start_server, wait_ready
from benchmarks.report import markdown_table, write_section

CAPTURED = Path(__file__).parents[1] / "tests" / "firefox" / "weblate-5.14.3.jsonl"
LEVELS = ((1, 2), (8, 1), (64, 1))  # (clients, pages each)
# The peer decodes each sentence alone (~1 string/s here): at 64 clients its 1,280 sentences would hold the shared
# machine for some 20 minutes, so it is measured at 1 and 8 clients only.
PEER_LEVELS = (1, 8)


def weblate_page() -> bytes:
    """The body of Weblate's captured POST /translate."""
    rows = [json.loads(line) for line in CAPTURED.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")]
    return next(row for row in rows if row["method"] == "POST")["body"].encode("utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="Firefox's en-pt student (`clearformer import firefox`)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads in the servers (default 1)")
    parser.add_argument("--skip-peer", action="store_true", help="the batched server only")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    body = weblate_page()
    strings = len(json.loads(body)["q"])
    names = ("batched",) if args.skip_peer else ("batched", "alone")
    order = ("batched",) if args.skip_peer else ("batched", "alone", "alone", "batched")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        servers = {name: start_server(args.checkpoint, 32 if name == "batched" else 1, Path(folder) / f"runs-{name}",
                                      Path(folder) / f"{name}.log") for name in names}
        try:
            for process, url in servers.values():
                asyncio.run(wait_ready(url, process))
                asyncio.run(load(url, 1, 1, [], [body]))  # warm up
            results: dict = {}
            for clients, each in LEVELS:
                here = names if clients in PEER_LEVELS else ("batched",)
                rounds: dict[str, list] = {name: [] for name in here}
                for name in (order if clients in PEER_LEVELS else ("batched", "batched")):
                    rounds[name].append(asyncio.run(load(servers[name][1], clients, each, [], [body])))
                    print(name, clients, f"{rounds[name][-1][0]:.3f} pages/s", file=sys.stderr, flush=True)
                for name, measured in rounds.items():
                    seconds = sum(clients * each / rate for rate, _, _ in measured)
                    results[name, clients] = (len(measured) * clients * each / seconds,
                                              [t for _, times, _ in measured for t in times],
                                              sum(failed for _, _, failed in measured))
        finally:
            for process, _ in servers.values():
                process.terminate()
                process.wait(timeout=30)
    load_after = os.getloadavg()[0]
    rows = []
    for clients, _ in LEVELS:
        for name in [name for name in names if (name, clients) in results]:
            rate, latencies, failures = results[name, clients]
            label = "batched (--batch 32)" if name == "batched" else "alone (--batch 1)"
            rows.append([clients, len(latencies), label, f"{rate:.3f}", f"{rate * strings:.1f}",
                         f"{percentile(latencies, 0.5):.2f}", f"{percentile(latencies, 0.99):.2f}", failures])
        if ("alone", clients) in results:
            ratio = results["batched", clients][0] / results["alone", clients][0]
            rows.append([clients, "", "**ratio**", f"**{ratio:.2f}x**", "", "", "", ""])
    table = markdown_table(["clients", "pages", "server", "pages/s", "strings/s", "p50 s", "p99 s", "failed"], rows)
    write_section("weblate-api", "The LibreTranslate API under Weblate's pages (Firefox's en-pt student)",
                  f"Weblate 5.14.3's own POST /translate (a page of {strings} strings with `[X{{n}}X]` placeholders, "
                  f"its exact bytes: tests/firefox/weblate-5.14.3.jsonl), sent by 1, 8 and 64 concurrent clients, "
                  f"each on its own keep-alive connection, one page after another; greedy, `--threads "
                  f"{args.threads}`, loopback. A page counts once answered whole (200); failed: any other status. "
                  f"The peer, `--batch 1`, decodes each sentence alone; at 64 clients it was not run (its 1,280 "
                  f"sentences one at a time would hold the shared machine some 20 minutes). The machine was shared "
                  f"(2 cores among several people's work; load average {load_before:.1f} "
                  f"before, {load_after:.1f} after): the ratios, measured in one run and alternating, are the "
                  f"claim; the absolute figures are this load's.\n\n{table}\n")


if __name__ == "__main__":
    main()
