"""Which translations to review: the confidence against sentence chrF, Bergamot's baseline against clearformer's.

For a run and a file of pairs (source TAB reference [TAB package]) it translates every source (greedy unless
--beam, one thread), keeps each translation (its text, chrF and the search's ids per piece) cached on disk
so that reruns only repeat the forced pass, and reads the features back (clearformer.quality). It fits the
confidence on the corpora's valid splits and reports, per score, the Spearman correlation with sentence chrF
and the ROC AUC for finding the translations under chrF 40 on held-out messages of packages outside every
recipe (benchmarks/confidence_data.py builds them), then writes its section of BENCHMARKS.md.

    python benchmarks/confidence.py --cache /tmp/confidence            (the runs under /work/prep, see RUNS)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

from clearformer.generate import DecodingOptions
from clearformer.generate.options import search_tokens
from clearformer.generate.source import prepare_sources
from clearformer.load import load_model
from clearformer.quality.estimate import unsupervised_score
from clearformer.quality.estimator import fit
from clearformer.quality.features import FEATURES
from clearformer.quality.fitting import (
    BAD_CHRF,
    ReadBack,
    Scored,
    auc_bad,
    feature_matrix,
    input_rows,
    read_pairs,
    spearman,
)
from clearformer.translator import load_run

ROOT = Path(__file__).resolve().parent.parent


def translated(run: Path, pairs_path: Path, cache: Path, beam: int, limit: int | None = None,
               batch: int = 250) -> list[dict]:
    """Every pair translated ({source, reference, hypothesis, chrf, searched}), cached in `cache` per batch."""
    from sacrebleu.metrics import CHRF

    pairs = read_pairs(pairs_path, limit)
    key = hashlib.sha256(f"{run.resolve()}|{pairs_path.resolve()}|{beam}|{len(pairs)}".encode()).hexdigest()[:16]
    done: list[dict] = []
    if cache.exists():
        saved = json.loads(cache.read_text())
        if saved.get("key") == key:
            done = saved["rows"]
    if len(done) >= len(pairs):
        return done
    translator = load_run(run).open()
    options = DecodingOptions(beam=beam).check()
    chrf = CHRF()
    for start in range(len(done), len(pairs), batch):
        chunk = pairs[start: start + batch]
        pieces = translator.read([s for s, _ in chunk], options.split, check=False)
        reader = ReadBack(estimate=False)  # only the ids the search chose: the features are read back below
        texts = [t.text for t in translator.translate(pieces, options, confidence=reader)]
        searched = reader.searched
        for index, ((source, reference), hypothesis) in enumerate(zip(chunk, texts, strict=True)):
            done.append({"source": source, "reference": reference, "hypothesis": hypothesis,
                         "chrf": chrf.sentence_score(hypothesis, [reference]).score,
                         "searched": [ids for ids, owner in zip(searched, pieces.owners, strict=True)
                                      if owner == index]})
        cache.parent.mkdir(parents=True, exist_ok=True)
        temporary = cache.with_suffix(".partial")
        temporary.write_text(json.dumps({"key": key, "rows": done}))
        temporary.replace(cache)
        print(f"  {cache.name}: {len(done)}/{len(pairs)} translated", file=sys.stderr, flush=True)
    return done


def code_key() -> str:
    """A digest of the code the features come from: a cache of feature rows is reused only while it holds."""
    folder = ROOT / "src/clearformer/quality"
    return hashlib.sha256(b"".join((folder / n).read_bytes() for n in ("evidence.py", "features.py", "estimate.py"))
                          ).hexdigest()[:16]


def read_back(run: Path, rows: list[dict], beam: int, cache: Path | None = None) -> list[Scored]:
    """The translations' feature rows (the forced pass: clearformer.quality.estimate, as translate runs it),
    cached in `cache` while the code and the translations are the same."""
    key = hashlib.sha256(f"{code_key()}|{json.dumps(rows)}".encode()).hexdigest()[:16]
    if cache is not None and cache.exists():
        saved = json.loads(cache.read_text())
        if saved.get("key") == key:
            return [Scored(**row) for row in saved["scored"]]
    scored = _read_back(run, rows, beam)
    if cache is not None:
        cache.write_text(json.dumps({"key": key, "scored": [vars(s) for s in scored]}))
    return scored


def _read_back(run: Path, rows: list[dict], beam: int) -> list[Scored]:
    from clearformer.quality.estimate import estimate_pieces

    model, tokenizer, _ = load_model(run, "cpu")
    tokens = search_tokens(model, tokenizer, DecodingOptions(beam=beam).check())
    scored = []
    for start in range(0, len(rows), 250):
        chunk = rows[start: start + 250]
        pieces = prepare_sources(tokenizer, [r["source"] for r in chunk], model.config.max_len, check=False)
        searched = [ids for r in chunk for ids in r["searched"]]
        estimates = estimate_pieces(model, tokenizer, tokens, pieces.sources, pieces.texts, pieces.masks, searched)
        for row, features in zip(chunk, input_rows(estimates, pieces.owners, pieces.count), strict=True):
            if features is not None:
                scored.append(Scored(row["source"], row["reference"], row["hypothesis"], features, row["chrf"]))
    return scored


def measures(scores: list[float], chrf: list[float]) -> tuple[float, float]:
    return spearman(scores, chrf), auc_bad(scores, chrf)


RUNS = {  # name: (run, the valid split to fit on, the held-out messages, the pairs of each used (None: all))
    "firefox-en-pt": (Path("/work/prep/runs/firefox-en-pt"), Path("/work/prep/data/en-pt-software/valid.tsv"),
                      "heldout-pt.tsv", None),
    # `small` decodes slower (no shortlist) on a machine shared by 8: the first 700 of each set.
    "small-fr": (Path("/work/prep/runs/small-fr"), Path("/work/prep/data/en-fr-software/valid.tsv"),
                 "heldout-fr.tsv", 700),
}
SECTION = "## Confidence: which translations to review (issue 53)"


def evaluate_run(name: str, cache: Path, beam: int, ship: bool) -> dict | None:
    run, valid, heldout_name, limit = RUNS[name]
    heldout = cache / heldout_name
    if not (run / "model.safetensors").exists() or not heldout.exists():
        print(f"{name}: {run} or {heldout} missing, skipped", file=sys.stderr)
        return None
    suffix = f"-beam{beam}" if beam > 1 else ""
    fitting = read_back(run, translated(run, valid, cache / f"{name}-valid{suffix}.json", beam, limit), beam,
                        cache / f"{name}-valid{suffix}.features.json")
    testing = read_back(run, translated(run, heldout, cache / f"{name}-heldout{suffix}.json", beam, limit), beam,
                        cache / f"{name}-heldout{suffix}.features.json")
    from clearformer.quality.estimator import imported_model_sha256

    rows, targets = feature_matrix(fitting)
    fitted_on = {"pairs": f"{valid.parent.name}/{valid.name}", "translations": len(fitting), "beam": beam,
                 "target": "sentence chrF / 100", "run": name}
    digest = imported_model_sha256(run)
    if digest:
        fitted_on["model_sha256"] = digest
    weights = fit(rows, targets, fitted_on=fitted_on)
    if ship and digest and beam == 1:
        weights.save(ROOT / "src/clearformer/quality/shipped" / f"{name}.json")
    chrf = [s.chrf for s in testing]
    column = list(FEATURES).index("mean_log_prob")
    result = {
        "run": name, "beam": beam, "fit": len(fitting), "test": len(testing), "bad": sum(c < BAD_CHRF for c in chrf),
        "bergamot": measures([unsupervised_score(s.row) for s in testing], chrf),
        "mean_log_prob": measures([s.row[column] for s in testing], chrf),
        "fitted": measures([weights.score(s.row) for s in testing], chrf),
        "weights": dict(zip(weights.features, (round(c, 3) for c in weights.coefficients), strict=True)),
    }
    for feature in ("source_words", "coverage_penalty", "source_gain", "attention_entropy", "copied_words"):
        k = list(FEATURES).index(feature)
        result.setdefault("single", {})[feature] = measures([s.row[k] for s in testing], chrf)
    print(json.dumps(result), file=sys.stderr)
    return result


def write_section(results: list[dict], command: str) -> None:
    load = os.getloadavg()
    lines = [SECTION, "",
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
             f"{os.cpu_count()} cores shared by 8 engineers (load average {load[0]:.1f}); torch {torch.__version__}; "
             f"commit {git_commit()}. Command: `{command}`.", "",
             "Fitted (`clearformer confidence fit`'s logistic regression on the features of "
             "`clearformer.quality.features`) on the translations of the recipe corpus' valid split; measured on "
             "held-out software messages of Debian packages outside every recipe (benchmarks/confidence_data.py: "
             "13 packages such as nautilus, gedit, thunar, pidgin, rhythmbox; no English string of the recipe "
             "corpus). Spearman: rank correlation with sentence chrF (sacrebleu); AUC: ROC AUC of low confidence "
             "for finding the translations under chrF 40.", "",
             "| model | search | fit on | held out (chrF < 40) | score | Spearman | AUC |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        head = f"| {r['run']} | {'greedy' if r['beam'] == 1 else 'beam ' + str(r['beam'])} | {r['fit']} | " \
               f"{r['test']} ({r['bad']}) |"
        for label, key in (("Bergamot unsupervised (mean of word means)", "bergamot"),
                           ("mean piece log-probability", "mean_log_prob"), ("**clearformer (fitted)**", "fitted")):
            rho, auc = r[key]
            lines.append(f"{head} {label} | {rho:.3f} | {auc:.3f} |")
            head = "| | | | |"
    lines += ["", "Single white-box features on the same held-out messages (Spearman, AUC; the sign is the "
                  "feature's own):", ""]
    for r in results:
        parts = [f"{name} {rho:+.3f} / {auc:.3f}" for name, (rho, auc) in r["single"].items()]
        lines.append(f"- {r['run']}: " + "; ".join(parts))
    lines += ["", "The fitted coefficients (standardised features):", ""]
    for r in results:
        lines.append(f"- {r['run']}: " + ", ".join(f"{k} {v:+.2f}" for k, v in r["weights"].items()))
    text = "\n".join(lines) + "\n"
    path = ROOT / "BENCHMARKS.md"
    old = path.read_text(encoding="utf-8")
    if SECTION in old:
        before, after = old.split(SECTION, 1)
        rest = after.split("\n## ", 1)
        old = before.rstrip("\n") + "\n\n" + text + ("\n## " + rest[1] if len(rest) > 1 else "")
    else:
        old = old.rstrip("\n") + "\n\n" + text
    path.write_text(old, encoding="utf-8")


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/confidence"))
    parser.add_argument("--runs", nargs="+", default=list(RUNS))
    parser.add_argument("--beam", type=int, nargs="+", default=[1])
    parser.add_argument("--ship", action="store_true", help="write an imported model's fit to quality/shipped/")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch BENCHMARKS.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = [r for name in args.runs for beam in args.beam
               if (r := evaluate_run(name, args.cache, beam, args.ship)) is not None]
    if results and not args.no_write:
        write_section(results, "python benchmarks/confidence.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
