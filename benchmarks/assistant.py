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
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

import sacrebleu
import torch

from benchmarks.report import markdown_table, write_section
from clearformer.generate import DecodingOptions
from clearformer.generate.glossary import glossary_notes
from clearformer.generate.source import prepare_sources
from clearformer.generate.translate import translate_pieces
from clearformer.glossary import Glossary, Term, read_glossary, uses
from clearformer.load import load_model

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
    ref_used, total = term_use(glossary, sources, references)
    rows = []
    for beam in (1, 4):
        options = DecodingOptions(beam=beam)
        for label, used_glossary in (("none", None), ("--glossary", glossary)):
            pieces = prepare_sources(tokenizer, sources, model.config.max_len, check=False)
            start = time.perf_counter()
            outputs = translate_pieces(model, tokenizer, pieces, options, glossary=used_glossary)
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
            + "\n\nA term counts as used when its target is in the translation on word boundaries, any case, "
              "an inflection of up to two letters included (`glossary.uses`). The machine was shared with other "
              "engineers' jobs (load average " + load_average() + "); the seconds compare rows of this run only.")
    write_section("glossary", "Glossary: terms used, and what it costs in BLEU", body)


def load_average() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("part", choices=["glossary"])
    parser.add_argument("--run", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--work", default="/tmp/assistant-bench")
    parser.add_argument("--sentences", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the machine is shared: one thread, a fair share
    glossary_part(args)


if __name__ == "__main__":
    main()
