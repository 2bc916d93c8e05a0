"""A translator's assistant measured (issue 52): the glossary obeyed, the memory reused, the catalogue learnt.

    python -m benchmarks.assistant glossary --run /work/prep/runs/firefox-en-pt --data /work/prep/data/en-pt-software

`glossary`: a glossary of the corpus's own terms is built from its training split (the catalogues' short entries,
UI labels such as "Bookmarks" -> "Favoritos", whose translation the catalogues' translators keep in their longer
messages: `project_glossary`), then every test-split sentence holding one of its terms is translated without and
with `--glossary` (greedy and beam 4): the terms' targets used (word boundaries, any case, an inflection of up to
two letters counted as used), and BLEU and chrF (sacrebleu) against the references, so that a constraint is not
bought with fluency. The run never saw the test split.

    python -m benchmarks.assistant adapt --run /work/prep/runs/firefox-en-pt --data - --work /tmp/b --minutes 5
    python -m benchmarks.assistant recipe --run /work/prep/runs/firefox-en-pt --data - --work /tmp/b --minutes 5

`adapt`: real catalogues (ADAPT_PACKAGES' pt_BR), halved; `translate --po HALF.po` without and with `--adapt`, the
untranslated half scored. `recipe`: the first package's half learnt with candidate recipes (`train --init`).
`memory`: one half as a translation memory for the other.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import shlex
import shutil
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
# The packages whose pt_BR catalogues `adapt` learns from and scores: none is in a corpus recipe (data/software.py)
# or in benchmarks/placeholders.py's held-out packages. Django ships .po files, Synaptic a .mo.
ADAPT_PACKAGES = (DJANGO, "synaptic")


def project_catalogue(work: Path, language: str = "pt_BR", package: str = DJANGO) -> list[polib.POEntry]:
    """Every translated singular entry of a Debian package's `language` catalogues (its .po files, or its .mo files
    where it ships no .po; fetched with `apt-get download`): one project's own translations, kept apart from the
    corpus the runs saw."""
    folder = work / ("django" if package == DJANGO else package)
    if not folder.exists():
        work.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", package], cwd=work, check=True, capture_output=True)
        deb = next(work.glob(f"{package}_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(folder)], check=True)
    paths = sorted(folder.rglob(f"locale/{language}/LC_MESSAGES/*.po"))
    catalogues = [polib.pofile(str(path)) for path in paths] or \
        [polib.mofile(str(path)) for path in sorted(folder.rglob(f"locale/{language}/LC_MESSAGES/*.mo"))]
    entries, seen = [], set()
    for catalogue in catalogues:
        for entry in catalogue:
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


def write_catalogue(entries: list[polib.POEntry], path: Path, language: str = "pt_BR",
                    untranslated: tuple[polib.POEntry, ...] = ()) -> None:
    """A catalogue of `entries` as translated, then `untranslated` with their msgstr emptied."""
    po = polib.POFile()
    po.metadata = {"Language": language, "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                   "Content-Transfer-Encoding": "8bit", "Plural-Forms": "nplurals=2; plural=(n > 1);"}
    for entry in entries:
        po.append(polib.POEntry(msgid=entry.msgid, msgstr=entry.msgstr, msgctxt=entry.msgctxt, flags=entry.flags))
    for entry in untranslated:
        po.append(polib.POEntry(msgid=entry.msgid, msgstr="", msgctxt=entry.msgctxt, flags=entry.flags))
    po.save(str(path))


def fill(run: str, half: Path, out: Path, *extra: str) -> tuple[str, float]:
    """`translate --po HALF --out OUT` (beam 4, no memory: the model alone), nice'd, one thread; (stderr, wall s)."""
    command = ["nice", "-n", "10", sys.executable, "-m", "clearformer.cli", "translate", "--checkpoint", run,
               "--po", str(half), "--out", str(out), "--overwrite", "--no-memory", "--beam", "4", "--threads", "1",
               *extra]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(command)} failed:\n{done.stderr}")
    return done.stderr, time.perf_counter() - start


def filled_score(out: Path, scored: list[polib.POEntry], glossary: Glossary) -> list[str]:
    """BLEU, chrF and the glossary's terms used of the scored entries as the command filled them."""
    filled = {(e.msgctxt, e.msgid): e.msgstr for e in polib.pofile(str(out))}
    sources, references = [e.msgid for e in scored], [e.msgstr for e in scored]
    outputs = [filled[(e.msgctxt, e.msgid)] for e in scored]
    used, total = term_use(glossary, sources, outputs)
    return [f"{sacrebleu.corpus_bleu(outputs, [references]).score:.1f}",
            f"{sacrebleu.corpus_chrf(outputs, [references]).score:.1f}", f"{used}/{total}"]


def adapt_catalogue(args, package: str) -> tuple[list[list[str]], str]:
    """One package's pt_BR catalogue halved: `translate --po HALF.po` without and with `--adapt MINUTES`, the
    scored half (the untranslated one) against the translators' own; rows and a sentence for the section."""
    work = Path(args.work) / package
    train, test = halves(project_catalogue(Path(args.work), package=package))
    work.mkdir(parents=True, exist_ok=True)
    half = work / f"{package}-half.po"
    write_catalogue(train, half, untranslated=tuple(test))
    glossary, _ = project_glossary([(e.msgid, e.msgstr) for e in train], min_entries=1, min_sentences=2)
    before, _ = fill(args.run, half, work / "before.po")
    rows = [[package, f"`{Path(args.run).name}` as shipped", *filled_score(work / "before.po", test, glossary), ""]]
    fill(args.run, half, work / "before-noshortlist.po", "--shortlist", "off")
    rows.append([package, "as shipped, `--shortlist off`", *filled_score(work / "before-noshortlist.po", test,
                                                                        glossary), ""])
    print(rows[-2], rows[-1], flush=True)
    log, wall = fill(args.run, half, work / "after.po", "--adapt", f"{args.minutes:g}")
    adapted = Path(re.search(r"the adapted run is kept in (\S+):", log).group(1))
    summary = json.loads((adapted / "summary.json").read_text(encoding="utf-8"))
    trained = (f"{summary['step']} steps, {summary['stopped_because']}, model of step {summary['best_step']}; "
               f"{wall / 60:.1f} min wall in all")
    rows.append([package, f"`translate --po --adapt {args.minutes:g}`", *filled_score(work / "after.po", test,
                                                                                      glossary), trained])
    fill(str(adapted), half, work / "after-noshortlist.po", "--shortlist", "off")
    rows.append([package, "the adapted run, `--shortlist off`", *filled_score(work / "after-noshortlist.po", test,
                                                                             glossary), ""])
    print(rows[-2], rows[-1], flush=True)
    shutil.rmtree(adapted)  # 70 MB a run; its numbers are here
    pairs = re.search(r"(\d+) training pairs, (\d+) validation pairs", log)
    said = (f"{package}: {len(train)} translated entries ({pairs.group(1)} pairs trained on, {pairs.group(2)} "
            f"validated on), {len(test)} scored, {len(glossary)} terms")
    return rows, said


def adapt_part(args) -> None:
    """`translate --po HALF.po --adapt MINUTES` on real catalogues half translated, scored on the other half."""
    rows, said = [], []
    for package in args.packages.split(","):
        found, line = adapt_catalogue(args, package)
        rows += found
        said.append(line)
    body = (f"The pt_BR catalogues of {len(said)} Debian packages (`apt-get download`, outside every corpus "
            f"recipe), each halved by SHA-256 of the source: a catalogue of one half translated and the other "
            f"untranslated (`HALF.po`), filled by `translate --po HALF.po --no-memory --beam 4 --threads 1`, "
            f"without and with `--adapt {args.minutes:g}` (the one command: `train --init RUN --data HALF.po` "
            f"on the translated half, a tenth of it held out to choose the kept model, then the filling). The "
            f"scored half is never trained on nor used to choose anything; its filled entries are scored against "
            f"the translators' own (BLEU, chrF; terms: the targets of the training half's terms, "
            f"`project_glossary`, used). {'; '.join(said)}.\n\n"
            + markdown_table(["catalogue", "model", "BLEU", "chrF", "terms used", "adapting"], rows)
            + "\n\nWhy the first pass stopped at +2.8 and longer runs kept the start: 2% of the catalogue's pairs (7) "
              "validated, once at step 0 and once at the end (every 200 steps); on 7 pairs the starting weights' "
              "loss happened to win, and the run kept them, while the model of step 12 it discarded scored 65.6 "
              "BLEU on Django's scored half against 56.8 for the start (scored as the first pass scored: each "
              "msgid given to the translator, not through `translate --po`). "
              "Now a tenth validates (`CATALOGUE_VALID_SHARE`), about once an epoch, with "
              "early stopping after 5 validations without a better loss (train/init.py `catalogue_recipe`); the "
              "recipe is `train --init`'s own (peak rate 2.8e-4 after 20 steps, no label smoothing, the start's "
              "dropout 0). The `--shortlist off` rows: Firefox's lexical shortlist (the candidates its engine "
              "scores) is kept by the adapted run and used by default as for the shipped one; both runs decode "
              "float32 weights (the int8 matrices were dequantized at import, and fine-tuning writes float32). "
              "Training ran nice'd, one thread, on a machine shared with other engineers' jobs (load average "
              f"{load_average()}): the minutes are this machine's, not a laptop's.")
    write_section("adapt_catalogue", "Learning from the catalogue: translate --po --adapt MINUTES", body)


RECIPES = (("--lr-factor", "0.01"), ("--lr-factor", "0.02"), ("--lr-factor", "0.04"), ("--dropout", "0.1"))


def recipe_part(args) -> None:
    """`train --init RUN --data HALF.po` with the candidates of RECIPES (one flag changed from the default), each
    filling the same half: what the validation chose, and the scored half (shown, not used to choose)."""
    package = args.packages.split(",")[0]
    work = Path(args.work) / package
    half = work / f"{package}-half.po"
    train, test = halves(project_catalogue(Path(args.work), package=package))
    if not half.exists():
        work.mkdir(parents=True, exist_ok=True)
        write_catalogue(train, half, untranslated=tuple(test))
    glossary, _ = project_glossary([(e.msgid, e.msgstr) for e in train], min_entries=1, min_sentences=2)
    rows = []
    for flag, value in RECIPES:
        out = work / f"recipe{flag}-{value}"
        command = ["nice", "-n", "10", sys.executable, "-m", "clearformer.cli", "train", "--init", args.run,
                   "--data", str(half), "--minutes", f"{args.minutes:g}", "--threads", "1", "--out", str(out),
                   "--quiet", flag, value, *(["--overwrite"] if out.exists() else [])]
        subprocess.run(command, check=True, capture_output=True)
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        fill(str(out), half, work / "recipe.po")
        rows.append([f"`{flag} {value}`", str(summary["step"]), str(summary["best_step"]),
                     f"{summary['best_valid_loss']:.3f}", *filled_score(work / "recipe.po", test, glossary)])
        print(rows[-1], flush=True)
        shutil.rmtree(out)
    body = (f"{package}'s pt_BR catalogue halved as in \"Learning from the catalogue: translate --po --adapt "
            f"MINUTES\"; `train --init {Path(args.run).name} --data "
            f"HALF.po --minutes {args.minutes:g} --threads 1` with one flag changed from `train --init`'s recipe "
            f"(`--lr-factor 0.02`: a peak rate of 2.8e-4; the start's dropout 0), the kept model filling the scored "
            f"half (`--beam 4 --no-memory`). The validation (a tenth of the training half) chose each run's model; "
            f"the scored half's BLEU is shown, never used to choose. The rates' best validation losses are too "
            f"close for a few dozen pairs to rank them, so `train --init`'s rate (chosen on en-pt-software, "
            f"\"Fine-tuning: the recipe\") stays; dropout, which the distilled student never trained with, is "
            f"the one change that loses.\n\n"
            + markdown_table(["recipe", "steps", "kept step", "its validation loss", "BLEU", "chrF", "terms used"],
                             rows)
            + f"\n\nLoad average {load_average()} (a shared machine): the steps a budget buys vary with the load.")
    write_section("adapt_recipe", "Learning from the catalogue: the recipe", body)


def load_average() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=["glossary", "memory", "adapt", "recipe"])
    parser.add_argument("--minutes", type=float, default=5.0, help="adapt: minutes of training")
    parser.add_argument("--run", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--work", default="/tmp/assistant-bench")
    parser.add_argument("--sentences", type=int, default=400)
    parser.add_argument("--packages", default=",".join(ADAPT_PACKAGES), help="adapt: the packages' catalogues")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the machine is shared: one thread, a fair share
    {"glossary": glossary_part, "memory": memory_part, "adapt": adapt_part, "recipe": recipe_part}[args.part](args)


if __name__ == "__main__":
    main()
