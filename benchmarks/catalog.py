"""Catalogues and the LibreTranslate API, measured on a trained en-fr run.

Catalogues: the French catalogues of Debian packages outside the en-fr-software recipe (PACKAGES below,
none of data/software.py's), downloaded and read with the recipe's own code (data/deb.py, data/mo.py).
Each package's messages (a spread sample of at most --per-package) become a template (.pot: msgid,
msgid_plural, msgctxt; `c-format` where the message holds a C directive, as xgettext marks C sources),
filled by `translate --po`'s code (catalog/fill.py), then checked:

* the share of filled entries `msgfmt --check-format --use-fuzzy` accepts: ours, the plain `translate` path
  on the same messages (no catalogue rules: the peer), and the package's own translations (the flags'
  sanity check: they should all pass);
* placeholders kept (tokenize/placeholders.py's score), ours and plain;
* BLEU and chrF (sacrebleu) against the package's own translations; entries per second (filling alone,
  the model loaded);
* how many of the messages are also a source of the training corpus (the overlap).

API: two `clearformer serve` processes on the same run, one batching requests (--batch 32, 5 ms wait) and
one decoding each request alone (--batch 1: the peer), each asked POST /translate for short messages by 1,
8 and 64 concurrent clients, in the order batched, alone, alone, batched: throughput and p50/p99 latency.

    python -m benchmarks.catalog --checkpoint RUN [--per-package 120] [--skip-api]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polib
import sacrebleu
import torch

from benchmarks.report import markdown_table, write_section
from clearformer.catalog.fill import CatalogueSettings, plan_catalogue
from clearformer.catalog.formats import C_DIRECTIVE
from clearformer.data.deb import apt_download, deb_info, iter_files
from clearformer.data.mo import read_mo
from clearformer.data.paths import downloads_dir
from clearformer.data.software import PACKAGES as RECIPE
from clearformer.generate import DecodingOptions
from clearformer.generate.result import NoteKind
from clearformer.generate.source import prepare_sources
from clearformer.generate.translator import PyTorchTranslator
from clearformer.languages import run_languages
from clearformer.load import load_model
from clearformer.tokenize.placeholders import placeholder_score

PACKAGES = ("tar", "grep", "sed", "wget", "nano", "findutils", "diffutils")
FRENCH_MO = re.compile(r"/fr/LC_MESSAGES/[^/]+\.mo$")
LEVELS = ((1, 16), (8, 8), (64, 4))  # concurrent clients, requests each
HEADER = {"Project-Id-Version": "", "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
          "Content-Transfer-Encoding": "8bit"}


def c_format(text: str) -> bool:
    return any(match != "%%" for match in re.findall(C_DIRECTIVE, text))


def package_messages(deb: Path, limit: int) -> list:
    """The translated messages of a package's French catalogues, a spread sample of at most `limit`."""
    entries = []
    for _, data in iter_files(deb, lambda name: bool(FRENCH_MO.search(name))):
        entries += [e for e in read_mo(data).entries if e.msgid and all(e.msgstr)]
    step = max(1, len(entries) // limit)
    return entries[::step][:limit]


def template_of(messages) -> polib.POFile:
    po = polib.POFile(wrapwidth=78)
    po.metadata = dict(HEADER, **{"Plural-Forms": "nplurals=2; plural=(n > 1);", "Language": "fr"})
    for message in messages:
        entry = polib.POEntry(msgid=message.msgid, msgctxt=message.context, flags=["c-format"] if c_format(
            message.msgid + (message.msgid_plural or "")) else [])
        if message.msgid_plural:
            entry.msgid_plural = message.msgid_plural
            entry.msgstr_plural = {0: "", 1: ""}
        po.append(entry)
    return po


def with_translations(template: polib.POFile, translations: list[tuple[str, ...]]) -> polib.POFile:
    """A copy of the template with these msgstr (one, or one per plural form), every entry fuzzy."""
    po = polib.pofile(template.__unicode__())
    for entry, forms in zip(po, translations, strict=True):
        if entry.msgid_plural:
            entry.msgstr_plural = {0: forms[0], 1: forms[-1]}
        else:
            entry.msgstr = forms[0]
        entry.flags.insert(0, "fuzzy")
    return po


def msgfmt_failures(po: polib.POFile, folder: Path, name: str) -> int:
    """How many entries `msgfmt --check-format --use-fuzzy` reports an error for (by the msgid's line)."""
    path = folder / f"{name}.po"
    path.write_text(po.__unicode__(), encoding="utf-8")
    result = subprocess.run(["msgfmt", "--check-format", "--use-fuzzy", "-o", "/dev/null", str(path)],
                            capture_output=True, text=True)
    lines = {int(m.group(1)) for m in re.finditer(rf"^{re.escape(str(path))}:(\d+): (?!warning)", result.stderr,
                                                  re.M)}
    starts = sorted(entry.linenum for entry in polib.pofile(str(path)))
    return len({max((s for s in starts if s <= line), default=0) for line in lines})


def forms_of(entry: polib.POEntry) -> tuple[str, ...]:
    return (entry.msgstr_plural[0], entry.msgstr_plural[1]) if entry.msgid_plural else (entry.msgstr,)


def fill(model, tokenizer, template: polib.POFile, decoding: DecodingOptions) -> tuple[polib.POFile, float]:
    """`translate --po`'s path on a copy of the template: (the filled catalogue, seconds)."""
    po = polib.pofile(template.__unicode__())
    start = time.perf_counter()
    settings = CatalogueSettings(language="fr", model_masks=bool(tokenizer.mask_placeholders),
                                 model_patterns=tuple(tokenizer.placeholder_patterns or ()))
    plan = plan_catalogue(po, settings, "bench")
    translator = PyTorchTranslator(model, tokenizer)
    results = translator.translate(translator.read(plan.texts, decoding.split, unreadable="note"), decoding)
    plan.fill([None if any(note.kind is NoteKind.UNREADABLE for note in result.notes) else result.text
               for result in results])
    return po, time.perf_counter() - start


def plain(model, tokenizer, template: polib.POFile, decoding: DecodingOptions) -> list[tuple[str, ...]]:
    """The peer: `translate`'s own path on each msgid and msgid_plural (unchecked, as evaluate reads a corpus)."""
    texts = [text for entry in template for text in (entry.msgid, entry.msgid_plural) if text]
    pieces = prepare_sources(tokenizer, texts, model.config.max_len, decoding.split, check=False)
    outputs = iter(result.text for result in PyTorchTranslator(model, tokenizer).translate(pieces, decoding))
    return [(next(outputs), next(outputs)) if entry.msgid_plural else (next(outputs),) for entry in template]


def pairs_of(template: polib.POFile, translations: list[tuple[str, ...]]) -> tuple[list[str], list[str]]:
    """(sources, translations) form by form: msgid with the singular, msgid_plural with the plural."""
    sources, outputs = [], []
    for entry, forms in zip(template, translations, strict=True):
        sources.append(entry.msgid)
        outputs.append(forms[0])
        if entry.msgid_plural:
            sources.append(entry.msgid_plural)
            outputs.append(forms[-1])
    return sources, outputs


def catalogues(args, model, tokenizer, folder: Path) -> tuple[str, list[str]]:
    debs = apt_download(list(PACKAGES), Path(args.downloads), log=lambda line: print(line, file=sys.stderr))
    decoding = DecodingOptions(batch_size=32)
    train = Path(json.loads((Path(args.checkpoint) / "meta.json").read_text())["data_dir"]) / "train.tsv"
    trained = {line.split("\t", 1)[0] for line in train.read_text(encoding="utf-8").splitlines()}
    rows, short, totals = [], [], dict(entries=0, ours=0, plain=0, reference=0, seconds=0.0, overlap=0)
    hyps, refs, ours_pairs, plain_pairs = [], [], ([], []), ([], [])
    versions = []
    for name in PACKAGES:
        if name not in debs:
            continue
        versions.append(f"{name} {deb_info(debs[name]).version}")
        messages = package_messages(debs[name], args.per_package)
        template = template_of(messages)
        references = [tuple(m.msgstr) for m in messages]
        filled, seconds = fill(model, tokenizer, template, decoding)
        ours = [forms_of(entry) for entry in filled]
        theirs = plain(model, tokenizer, template, decoding)
        count = len(messages)
        fails = {key: msgfmt_failures(with_translations(template, value), folder, f"{name}-{key}")
                 for key, value in (("ours", ours), ("plain", theirs), ("reference", references))}
        overlap = sum(m.msgid in trained for m in messages)
        for key in ("ours", "plain", "reference"):
            totals[key] += count - fails[key]
        totals["entries"] += count
        totals["seconds"] += seconds
        totals["overlap"] += overlap
        source_texts, our_texts = pairs_of(template, ours)
        _, plain_texts = pairs_of(template, theirs)
        _, ref_texts = pairs_of(template, references)
        hyps += our_texts
        refs += ref_texts
        ours_pairs[0].extend(source_texts)
        ours_pairs[1].extend(our_texts)
        plain_pairs[0].extend(source_texts)
        plain_pairs[1].extend(plain_texts)
        bleu = sacrebleu.corpus_bleu(our_texts, [ref_texts]).score
        chrf = sacrebleu.corpus_chrf(our_texts, [ref_texts]).score
        rows.append([name, count, sum(c_format(m.msgid) for m in messages), overlap,
                     f"{100 * (count - fails['ours']) / count:.1f}%", f"{100 * (count - fails['plain']) / count:.1f}%",
                     f"{100 * (count - fails['reference']) / count:.1f}%", f"{bleu:.1f}", f"{chrf:.1f}",
                     f"{count / seconds:.1f}"])
        short += [m.msgid for m in messages if len(m.msgid.split()) <= 5 and "\n" not in m.msgid]
    total = totals["entries"]
    ours_score, plain_score = placeholder_score(*ours_pairs), placeholder_score(*plain_pairs)
    rows.append(["**all**", total, "", totals["overlap"], f"{100 * totals['ours'] / total:.1f}%",
                 f"{100 * totals['plain'] / total:.1f}%", f"{100 * totals['reference'] / total:.1f}%",
                 f"{sacrebleu.corpus_bleu(hyps, [refs]).score:.1f}", f"{sacrebleu.corpus_chrf(hyps, [refs]).score:.1f}",
                 f"{total / totals['seconds']:.1f}"])
    table = markdown_table(["package", "entries", "c-format", "in training", "msgfmt ok: ours", "plain translate",
                            "package's own", "BLEU", "chrF", "entries/s"], rows)
    body = (f"Packages (Debian, `apt-get download`, none in the en-fr-software recipe): {', '.join(versions)}; "
            f"a spread sample of at most {args.per_package} translated messages each. \"msgfmt ok\": the share of "
            f"entries `msgfmt --check-format --use-fuzzy` accepts; \"plain translate\": the same model through "
            f"`translate`'s path, without the catalogue rules; \"package's own\": the packages' French "
            f"translations under the same flags. Placeholders kept exactly: ours {ours_score.share:.1%} "
            f"({ours_score.kept}/{ours_score.total} forms), plain translate {plain_score.share:.1%} "
            f"({plain_score.kept}/{plain_score.total}). Greedy decoding, batches of 32, "
            f"torch threads: {torch.get_num_threads()}; entries/s counts filling alone (the model loaded)."
            f"\n\n{table}\n")
    return body, sorted(set(short))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(checkpoint: str, batch: int, runs: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ, CLEARFORMER_RUNS=str(runs))
    with open(log, "wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "clearformer.cli", "serve", "--checkpoint", checkpoint,
                                    "--port", str(port), "--batch", str(batch), "--batch-wait", "5",
                                    "--threads", str(torch.get_num_threads())],
                                   stdout=output, stderr=subprocess.STDOUT, env=env)
    return process, f"http://127.0.0.1:{port}"


async def wait_ready(url: str, process: subprocess.Popen) -> None:
    import httpx

    async with httpx.AsyncClient() as client:
        for _ in range(600):
            if process.poll() is not None:
                raise SystemExit(f"clearformer serve exited with {process.returncode}")
            try:
                if (await client.get(url + "/languages", timeout=2)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.5)
    raise SystemExit("clearformer serve did not start")


async def post(reader, writer, netloc: str, body: bytes) -> int:
    """One POST /translate on an open keep-alive connection -> the status (the answer read whole)."""
    writer.write(f"POST /translate HTTP/1.1\r\nHost: {netloc}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    length = int(re.search(r"(?im)^content-length:\s*(\d+)", head).group(1))
    await reader.readexactly(length)
    return int(head.split(" ", 2)[1])


async def load(url: str, clients: int, each: int, messages: list[str],
               bodies: list[bytes] | None = None) -> tuple[float, list[float], int]:
    """`clients` concurrent clients, each on its own keep-alive connection sending `each` requests one after
    the other (a bare asyncio client: little of the 2 cores goes to the clients) ->
    (requests per second, latencies in seconds, failures). `bodies`: the requests' exact bytes, sent in turn
    instead of the messages (benchmarks/weblate_api.py: Weblate's own page)."""
    netloc = url.removeprefix("http://")
    host, port = netloc.split(":")
    latencies: list[float] = []
    failures = 0

    async def client_loop(number: int) -> None:
        nonlocal failures
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            for k in range(each):
                turn = number * each + k
                body = bodies[turn % len(bodies)] if bodies else \
                    json.dumps({"q": messages[turn % len(messages)], "source": "en", "target": "fr"}).encode()
                start = time.perf_counter()
                status = await post(reader, writer, netloc, body)
                latencies.append(time.perf_counter() - start)
                failures += status != 200
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client_loop(number) for number in range(clients)))
    return clients * each / (time.perf_counter() - start), latencies, failures


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def api(args, messages: list[str], folder: Path) -> str:
    servers = {name: start_server(args.checkpoint, batch, folder / f"runs-{name}", folder / f"{name}.log")
               for name, batch in (("batched", 32), ("alone", 1))}
    try:
        for process, url in servers.values():
            asyncio.run(wait_ready(url, process))
            asyncio.run(load(url, 4, 2, messages))  # warm up: the first decodes of a process are slower
        results = {}
        for clients, each in LEVELS:
            rounds: dict[str, list] = {"batched": [], "alone": []}
            for name in ("batched", "alone", "alone", "batched"):  # ABBA: a drift in the machine's load cancels
                rounds[name].append(asyncio.run(load(servers[name][1], clients, each, messages)))
                print(name, clients, f"{rounds[name][-1][0]:.2f} req/s", file=sys.stderr)
            for name, measured in rounds.items():
                seconds = sum(clients * each / rate for rate, _, _ in measured)
                results[name, clients] = (2 * clients * each / seconds, [t for _, times, _ in measured for t in times],
                                          sum(failed for _, _, failed in measured))
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(timeout=30)
    rows = []
    for clients, each in LEVELS:
        batched, alone = results["batched", clients], results["alone", clients]
        for name, (rate, latencies, failures) in (("batched (--batch 32)", batched), ("alone (--batch 1)", alone)):
            rows.append([clients, 2 * clients * each, name, f"{rate:.2f}", f"{percentile(latencies, 0.5):.3f}",
                         f"{percentile(latencies, 0.99):.3f}", failures])
        rows.append([clients, "", "**ratio**", f"**{batched[0] / alone[0]:.2f}x**", "", "", ""])
    table = markdown_table(["clients", "requests", "server", "requests/s", "p50 s", "p99 s", "failed"], rows)
    most = LEVELS[-1][0]
    batched_most = results["batched", most]
    p99 = ", ".join(f"{percentile(results['batched', c][1], 0.99):.2f} s at {c}" for c, _ in LEVELS)
    verdict = (f"At {most} clients, batching gives {batched_most[0] / results['alone', most][0]:.2f}x the throughput "
               f"of decoding each request alone (the goal: at least 4x). The batched server's p99 for a short "
               f"message: {p99} client(s) (the goal: under 1 s). With {most} clients each waiting for its answer "
               f"before sending the next, a request waits behind the others in flight: at "
               f"{batched_most[0]:.1f} requests/s the mean latency cannot be under {most} / {batched_most[0]:.1f} = "
               f"{most / batched_most[0]:.2f} s, whatever the batching.")
    return (f"POST /translate, one short message a request ({len(messages)} distinct messages of at most five "
            f"words from the catalogues above), greedy; each client sends its requests one after the other on "
            f"its own connection. Two servers on the same run (`serve --batch 32 --batch-wait 5` and "
            f"`--batch 1`), each warmed up with 8 requests; each level runs batched, alone, alone, batched "
            f"(the machine's load drifts), the two rounds pooled.\n\n{table}\n\n{verdict}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a trained en-fr run")
    parser.add_argument("--per-package", type=int, default=120, help="messages per package (a spread sample)")
    parser.add_argument("--downloads", default=str(downloads_dir() / "debian"),
                        help="where the packages are downloaded (the data folder's downloads, as the recipe)")
    parser.add_argument("--skip-api", action="store_true", help="catalogues only")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads, here and in the servers (default 1: on a busy 2-core machine two "
                             "threads spin against each other and decode several times slower)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    assert not set(PACKAGES) & set(RECIPE), "the benchmark's packages must be outside the training recipe"
    if shutil.which("msgfmt") is None:
        raise SystemExit("msgfmt is missing: scripts/install-gettext.sh")
    model, tokenizer, meta = load_model(args.checkpoint)
    languages = run_languages(meta)
    if languages is None or (languages.source, languages.target) != ("en", "fr"):
        raise SystemExit(f"{args.checkpoint}: not an en-fr run")
    summary = json.loads((Path(args.checkpoint) / "summary.json").read_text())
    run = (f"The run: preset `{meta.get('preset')}` trained on en-fr-software for {summary['elapsed_s'] / 60:.1f} "
           f"minutes ({summary['step']} steps, {summary['tokens_seen']:,} target tokens; validation loss "
           f"{summary['best_valid_loss']:.2f}, BLEU {summary['last_valid_bleu']:.1f}) on this shared 2-core "
           f"machine: a young model, so BLEU and chrF say little about what a trained model reaches; what the "
           f"catalogue rules guarantee (msgfmt, placeholders) and the speeds do not depend on it.")
    with tempfile.TemporaryDirectory(prefix="clearformer-catalog-bench-") as temporary:
        folder = Path(temporary)
        body, short = catalogues(args, model, tokenizer, folder)
        del model
        api_body = "" if args.skip_api else "#### The LibreTranslate API\n\n" + api(args, short[:64], folder)
    write_section("catalog", "Catalogues (translate --po) and the LibreTranslate API",
                  f"{run}\n\n#### Catalogues of packages outside the recipe\n\n{body}\n{api_body}")


if __name__ == "__main__":
    main()
