"""How `clearformer serve` holds load: 50 concurrent /api/explain requests on loopback.

Serves a random-weight model of the toy-translate preset's sizes whose <eos> is never chosen (so an
explanation decodes to its length limit: as costly as the trained toy model's, or more) as a real
`clearformer serve` process, then measures the time to first byte of

* one request alone (the median of three sentences the server has not seen),
* 50 concurrent requests for one new sentence (the pool computes it once and answers all 50),
* 50 concurrent requests for 50 different new sentences (the pool's workers share the 2 cores).

    python -m benchmarks.server_load

The tests check the behaviour without timing (tests/viz/test_viz_server.py); the numbers live here.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import torch

from benchmarks.report import markdown_table, write_section
from clearformer.config import preset
from clearformer.model.transformer import Transformer
from clearformer.store.checkpoint import save_model
from clearformer.tokenize import SPECIALS, WordTokenizer

WORDS = "I love you the cat Je t' aime le chat".split()


def toy_size_checkpoint(directory: Path) -> Path:
    tokenizer = WordTokenizer(list(SPECIALS) + WORDS)
    torch.manual_seed(0)
    model = Transformer(preset("toy-translate", src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer)))
    with torch.no_grad():
        model.output.linear.bias[tokenizer.eos_id] = -1e4  # decode to the length limit
    return save_model(directory, model, tokenizer, {"note": "random weights, for benchmarks/server_load.py"})


async def time_to_first_byte(url: str, sentence: str) -> tuple[int, float]:
    """POST {"sentence": ...} on a fresh connection -> (status, seconds until the answer's headers)."""
    parts = urlsplit(url)
    body = json.dumps({"sentence": sentence}).encode()
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(f"POST /api/explain HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                 f"Accept-Encoding: gzip\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    head = await reader.readuntil(b"\r\n\r\n")
    seconds = time.perf_counter() - start
    payload = await reader.read()
    writer.close()
    if b"content-encoding: gzip" in head.lower():
        gzip.decompress(payload)
    return int(head.split()[1]), seconds


def storm(url: str, sentences: list[str]) -> list[float]:
    async def run():
        return await asyncio.gather(*(time_to_first_byte(url, s) for s in sentences))

    results = asyncio.run(run())
    if any(status != 200 for status, _ in results):
        sys.exit(f"not every request was answered 200: {sorted({s for s, _ in results})}")
    return sorted(seconds for _, seconds in results)


def start_server(checkpoint: Path, runs: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "clearformer.cli", "serve", "--checkpoint", str(checkpoint),
                                "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=dict(os.environ, CLEARFORMER_RUNS=str(runs)))
    url = f"http://127.0.0.1:{port}/"
    for _ in range(450):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process, url
        except OSError:
            time.sleep(0.2)
    process.kill()
    sys.exit("clearformer serve did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        process, url = start_server(toy_size_checkpoint(Path(scratch) / "toy-size"), Path(scratch) / "runs")
        try:
            storm(url, ["you"])  # warm-up: imports and first-call costs are not a request's
            single = statistics.median(storm(url, [s])[0] for s in ("le chat", "the cat", "I love"))
            same = storm(url, ["you love"] * 50)
            words = WORDS
            distinct = storm(url, [f"{words[i % 10]} {words[(i // 10) % 10]} {words[(i * 7) % 10]}" for i in range(50)])
        finally:
            process.terminate()
            process.wait(timeout=15)

    def row(name: str, latencies: list[float]) -> list[str]:
        p90 = latencies[int(0.9 * len(latencies)) - 1]
        return [name, f"{statistics.median(latencies):.2f}", f"{p90:.2f}", f"{latencies[-1]:.2f}",
                f"{p90 / single:.1f}x"]

    rows = [["1 request alone (median of 3)", f"{single:.2f}", "—", "—", "1.0x"],
            row("50 at once, one sentence", same), row("50 at once, 50 sentences", distinct)]
    print(markdown_table(["requests", "median s", "p90 s", "max s", "p90 / alone"], rows))
    if args.no_write:
        return
    body = ("`clearformer serve` of a random-weight model of the toy-translate preset's sizes whose <eos> is never "
            "chosen (each explanation decodes to its length limit), on loopback; time to first byte of each "
            "request, over fresh connections, asking for gzip as browsers do.\n\n"
            + markdown_table(["requests", "median s", "p90 s", "max s", "p90 / alone"], rows)
            + "\n\nIdentical requests in flight share one computation; different sentences run in the pool's "
            "workers, which share the machine's cores, so 50 distinct explanations cost about 50 explanations of "
            "CPU time.")
    write_section("server_load", "Server under load: 50 concurrent explanations", body)


if __name__ == "__main__":
    main()
