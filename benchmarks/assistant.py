"""A translator's assistant measured (issue 52): the glossary obeyed, the memory reused, the catalogue learnt.

    python -m benchmarks.assistant glossary --run /work/prep/runs/firefox-en-pt --data /work/prep/data/en-pt-software

`glossary`: a glossary of the corpus's own terms is built from its training split (the catalogues' short entries,
UI labels such as "Bookmarks" -> "Favoritos", whose translation the catalogues' translators keep in their longer
messages: `project_glossary`), then every test-split sentence holding one of its terms is translated without and
with `--glossary` (greedy and beam 4): the terms' targets used (word boundaries, any case, an inflection of up to
two letters counted as used), and BLEU and chrF (sacrebleu) against the references, so that a constraint is not
bought with fluency. The run never saw the test split.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import polib
import sacrebleu
import torch

from benchmarks.report import markdown_table, write_section
from clearformer.generate import DecodingOptions
from clearformer.generate.glossary import glossary_notes
from clearformer.generate.translator import PyTorchTranslator
from clearformer.glossary import Glossary, Term, read_glossary, uses
from clearformer.load import load_model
from clearformer.memory import DEFAULT_THRESHOLD, Memory, Unit

WORD = re.compile(r"^[A-Za-z][A-Za-z -]*[A-Za-z]$")


def read_pairs(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        source, _, target = line.partition("\t")
        if source and target:
            pairs.append((source, target))
    return pairs


def project_glossary(pairs: list[tuple[str, str]], min_entries: int = 2, min_share: float = 0.6,
                     min_sentences: int = 5, min_consistency: float = 0.5) -> tuple[Glossary, dict]:
    """The corpus's terms: a short entry (1-3 words) translated the same way in >= min_share of its >= min_entries
    occurrences, whose target the translators also wrote in >= min_consistency of the >= min_sentences longer
    messages (5 words or more) that hold the source term."""
    labels: dict[str, Counter] = defaultdict(Counter)
    for source, target in pairs:
        if WORD.match(source) and len(source.split()) <= 3 and len(target.split()) <= 4 and len(source) >= 3:
            labels[source.lower()][target.lower().strip(".:")] += 1
    candidates = []
    for source, targets in labels.items():
        target, count = targets.most_common(1)[0]
        share = count / sum(targets.values())
        if count >= min_entries and share >= min_share and len(target) >= 3 and target != source:
            candidates.append(Term(source, target))
    glossary = Glossary(tuple(candidates))
    seen, used = Counter(), Counter()
    for source, target in pairs:
        if len(source.split()) < 5:
            continue
        for term in glossary.terms_in(source):
            seen[term] += 1
            used[term] += uses(target, term.target)
    kept = tuple(term for term in candidates
                 if seen[term] >= min_sentences and used[term] >= min_consistency * seen[term])
    return Glossary(kept, "project glossary"), {"candidates": len(candidates), "kept": len(kept)}


def write_csv(glossary: Glossary, path: Path) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["source", "target"])
        for term in glossary.terms:
            writer.writerow([term.source, term.target])


def term_use(glossary: Glossary, sources: list[str], outputs: list[str]) -> tuple[int, int]:
    """(terms of the sources whose target the outputs use, terms in all)."""
    used = total = 0
    for source, output in zip(sources, outputs, strict=True):
        terms = glossary.terms_in(source)
        total += len(terms)
        used += len(terms) - len(glossary_notes(glossary, source, output))
    return used, total


def glossary_part(args) -> None:
    data = Path(args.data)
    glossary, counts = project_glossary(read_pairs(data / "train.tsv"))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    csv_path = work / "project-glossary.csv"
    write_csv(glossary, csv_path)
    glossary = read_glossary(csv_path)  # through the reader `translate --glossary` uses
    test = [(s, t) for s, t in read_pairs(data / "test.tsv") if glossary.terms_in(s)][: args.sentences]
    sources, references = [s for s, _ in test], [t for _, t in test]
    model, tokenizer, _ = load_model(args.run, "cpu")
    translator = PyTorchTranslator(model, tokenizer)
    ref_used, total = term_use(glossary, sources, references)
    rows = []
    for beam in (1, 4):
        options = DecodingOptions(beam=beam)
        for label, used_glossary in (("none", None), ("--glossary", glossary)):
            pieces = translator.read(sources, check=False)
            start = time.perf_counter()
            outputs = [t.text for t in translator.translate(pieces, options, glossary=used_glossary)]
            seconds = time.perf_counter() - start
            used, _ = term_use(glossary, sources, outputs)
            bleu = sacrebleu.corpus_bleu(outputs, [references]).score
            chrf = sacrebleu.corpus_chrf(outputs, [references]).score
            search = "greedy" if beam == 1 else f"beam {beam}"
            rows.append([search, label, f"{used}/{total} ({100 * used / total:.1f}%)", f"{bleu:.1f}", f"{chrf:.1f}",
                         f"{seconds:.1f}"])
            print(rows[-1], flush=True)
            if used_glossary is not None and beam == 1:
                (work / "greedy-glossary.txt").write_text("\n".join(outputs) + "\n", encoding="utf-8")
    body = (f"A glossary of the corpus's own terms ({data.name}'s training split: {counts['kept']} of "
            f"{counts['candidates']} candidate UI labels, `project_glossary`), applied to the {len(sources)} "
            f"sentences of its test split that hold one of them ({total} term occurrences; the references use "
            f"{ref_used} of them, {100 * ref_used / total:.1f}%), translated by `{Path(args.run).name}`.\n\n"
            + markdown_table(["search", "glossary", "terms used", "BLEU", "chrF", "seconds"], rows)
            + "\n\nA term counts as used when its target is in the translation on word boundaries, in any case, "
              "inflected or not (`glossary.uses`: a word of five letters or more may change its last letter and "
              "add up to two, \"primeira\" for \"primeiro\"); the decoding counts the same inflections as used. "
              "The machine was shared with other "
              "engineers' jobs (load average " + load_average() + "); the seconds compare rows of this run only.")
    write_section("glossary", "Glossary: terms used, and what it costs in BLEU", body)


DJANGO = "python3-django"  # a real project's catalogues outside every recipe (en-pt-software's packages)


def project_catalogue(work: Path, language: str = "pt_BR") -> list[polib.POEntry]:
    """Every translated singular entry of Django's `language` catalogues (the Debian package's .po files, fetched
    with `apt-get download`): one project's own translations, kept apart from the corpus the runs saw."""
    folder = work / "django"
    if not folder.exists():
        work.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", DJANGO], cwd=work, check=True, capture_output=True)
        deb = next(work.glob(f"{DJANGO}_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(folder)], check=True)
    entries, seen = [], set()
    for path in sorted(folder.rglob(f"locale/{language}/LC_MESSAGES/*.po")):
        for entry in polib.pofile(str(path)):
            if entry.msgid and entry.msgstr and not entry.msgid_plural and "fuzzy" not in entry.flags \
                    and not entry.obsolete and entry.msgid not in seen:
                seen.add(entry.msgid)
                entries.append(entry)
    return entries


def halves(entries: list[polib.POEntry]) -> tuple[list[polib.POEntry], list[polib.POEntry]]:
    """Two halves chosen by the SHA-256 of the source (the same split on every machine)."""
    first = [e for e in entries if hashlib.sha256(e.msgid.encode()).digest()[0] % 2 == 0]
    second = [e for e in entries if hashlib.sha256(e.msgid.encode()).digest()[0] % 2 == 1]
    return first, second


def memory_part(args) -> None:
    """Half of a real catalogue as the memory, the other half as the template to fill: per band of fuzzy score,
    the memory's target and the model's translation scored against the translators' own."""
    train, test = halves(project_catalogue(Path(args.work)))
    memory = Memory([Unit(e.msgid, e.msgstr, origin="half") for e in train])
    model, tokenizer, _ = load_model(args.run, "cpu")
    sources = [e.msgid for e in test]
    translator = PyTorchTranslator(model, tokenizer)
    outputs = [t.text for t in translator.translate(translator.read(sources, check=False), DecodingOptions(beam=4))]
    bands = [(100, 101, "exact"), (95, 100, "95-99%"), (90, 95, "90-94%"), (85, 90, "85-89%"), (75, 85, "75-84%")]
    found: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for entry, output in zip(test, outputs, strict=True):
        match = memory.lookup(entry.msgid)
        if match is None:
            found["no match"].append(("", output, entry.msgstr))
            continue
        name = next(label for low, high, label in bands if low <= match.score < high)
        found[name].append((match.unit.target, output, entry.msgstr))
    rows = []
    for name in [label for _, _, label in bands] + ["no match"]:
        items = found.get(name, [])
        if not items:
            rows.append([name, 0, "", ""])
            continue
        memory_out, model_out, refs = zip(*items, strict=True)
        score = [f"{sacrebleu.corpus_bleu(list(out), [list(refs)]).score:.1f} / "
                 f"{sacrebleu.corpus_chrf(list(out), [list(refs)]).score:.1f}" for out in (memory_out, model_out)]
        rows.append([name, len(items), score[0] if name != "no match" else "", score[1]])
    body = (f"Django's pt_BR catalogues (`apt-get download {DJANGO}`; no package of en-pt-software's recipe): "
            f"{len(train) + len(test)} translated entries, halved by SHA-256 of the source; one half is the memory, "
            f"the other the template filled. Per band of translate-toolkit's similarity score (`memory.lookup`), the "
            f"memory's target and `{Path(args.run).name}`'s translation (beam 4), each scored (BLEU / chrF) against "
            f"the translators' own.\n\n"
            + markdown_table(["match", "entries", "memory's target", "model"], rows)
            + f"\n\n`translate --po --memory` fills from {DEFAULT_THRESHOLD}% up (`memory.DEFAULT_THRESHOLD`): "
              "from 90% the memory's target scored well above the model; from 85% to 89% the two were even (BLEU "
              "for the memory, chrF for the model), below they were closer than a wrong word in a filled entry is "
              "worth (a fuzzy match differs by a word: \"greater\" for \"less\"), so the model fills those entries "
              "and the comment names the match. Exact matches are filled verbatim. The bands hold few entries (one "
              "real catalogue): a threshold, not a curve. Load average " + load_average() + " (a shared machine).")
    write_section("memory", "Translation memory: fuzzy matches against the model", body)
    for row in rows:
        print(row)


def write_catalogue(entries: list[polib.POEntry], path: Path, language: str = "pt_BR") -> None:
    po = polib.POFile()
    po.metadata = {"Language": language, "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                   "Content-Transfer-Encoding": "8bit", "Plural-Forms": "nplurals=2; plural=(n > 1);"}
    for entry in entries:
        po.append(polib.POEntry(msgid=entry.msgid, msgstr=entry.msgstr, msgctxt=entry.msgctxt, flags=entry.flags))
    po.save(str(path))


def scored(run: str, sources: list[str], references: list[str], glossary: Glossary) -> tuple[float, float, str]:
    model, tokenizer, _ = load_model(run, "cpu")
    translator = PyTorchTranslator(model, tokenizer)
    outputs = [t.text for t in translator.translate(translator.read(sources, check=False), DecodingOptions(beam=4))]
    used, total = term_use(glossary, sources, outputs)
    return (sacrebleu.corpus_bleu(outputs, [references]).score, sacrebleu.corpus_chrf(outputs, [references]).score,
            f"{used}/{total}")


def adapt_part(args) -> None:
    """`train --init RUN --data HALF.po` on one half of a real catalogue, scored on the other half."""
    work = Path(args.work)
    train, test = halves(project_catalogue(work))
    half = work / "train-half.po"
    write_catalogue(train, half)
    glossary, _ = project_glossary([(e.msgid, e.msgstr) for e in train], min_entries=1, min_sentences=2)
    sources, references = [e.msgid for e in test], [e.msgstr for e in test]
    before = scored(args.run, sources, references, glossary)
    print("before", before, flush=True)
    out = work / "adapted"
    budget = ["--steps", str(args.steps)] if args.steps else ["--minutes", str(args.minutes)]
    command = ["nice", "-n", "10", sys.executable, "-m", "clearformer.cli", "train", "--init", args.run,
               "--data", str(half), *budget, "--threads", "1", "--out", str(out), "--quiet",
               *(["--overwrite"] if out.exists() else [])]
    start = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - start
    after = scored(str(out), sources, references, glossary)
    print("after", after, flush=True)
    rows = [[f"`{Path(args.run).name}` as shipped", f"{before[0]:.1f}", f"{before[1]:.1f}", before[2]],
            [f"after `train --init --data train-half.po {' '.join(budget)}`", f"{after[0]:.1f}",
             f"{after[1]:.1f}", after[2]]]
    body = (f"Django's pt_BR catalogues (`apt-get download {DJANGO}`, outside every recipe), halved by SHA-256 of "
            f"the source: {len(train)} translated entries written as a catalogue (`train-half.po`) to train on, "
            f"the other {len(test)} scored (beam 4, BLEU and chrF against the translators' own; terms: the "
            f"targets of {len(glossary)} terms of the training half used, `project_glossary`).\n\n"
            + markdown_table(["model", "BLEU", "chrF", "terms used"], rows)
            + f"\n\nTraining ran `--threads 1`, nice'd, `{' '.join(budget)}` ({wall / 60:.1f} minutes wall, "
              f"validation included) on a machine shared with other engineers' "
              f"jobs (load average {load_average()}). `translate --po --adapt MINUTES` is not built: adapting "
              f"is minutes of training per catalogue that leave a new run behind, which a translator should name "
              f"and keep (`--out`) and reuse for the next catalogue, not pay again at every `translate --po`.")
    write_section("adapt_catalogue", "Learning from the catalogue: train --init --data CATALOGUE.po", body)


def load_average() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=["glossary", "memory", "adapt"])
    parser.add_argument("--minutes", type=float, default=5.0, help="adapt: minutes of training")
    parser.add_argument("--steps", type=int, default=None, help="adapt: steps of training instead of minutes")
    parser.add_argument("--run", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--work", default="/tmp/assistant-bench")
    parser.add_argument("--sentences", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the machine is shared: one thread, a fair share
    {"glossary": glossary_part, "memory": memory_part, "adapt": adapt_part}[args.part](args)


if __name__ == "__main__":
    main()
