"""`clearformer confidence fit | measure`: fit a run's confidence on held-out pairs, and measure it.

    clearformer confidence fit --checkpoint RUN --pairs data/en-pt-software/valid.tsv
    clearformer confidence measure --checkpoint RUN --pairs other-messages.tsv

`fit` translates each source of PAIRS (source TAB reference) as `translate` does, reads each translation back
(clearformer.quality), scores it by sentence chrF against its reference, fits the logistic regression and
writes it to RUN/confidence.json (a few dozen numbers in JSON), which `translate --confidence`, `--po` and
`serve` then read. An existing confidence.json is replaced only with --overwrite. `measure` prints, for the
unsupervised baseline and for the run's confidence, the Spearman correlation with chrF and the ROC AUC for
finding the translations under chrF 40 (docs/confidence.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

from clearformer.commands import options
from clearformer.errors import UserError
from clearformer.generate import DecodingOptions


def _scored(args):
    from tqdm import tqdm

    from clearformer.quality.fitting import read_pairs, score_pairs
    from clearformer.translator import load_run

    options.apply_threads(args.threads)
    pairs = read_pairs(Path(args.pairs), args.limit)
    run_folder = load_run(args.checkpoint, args.device)
    decoding = DecodingOptions.from_args(args).check()
    with tqdm(total=len(pairs), unit="pair", desc="translating", file=sys.stderr, disable=None, leave=False) as bar:
        scored = score_pairs(run_folder.open(), pairs, decoding, bar.update)
    return scored, run_folder.directory, decoding


def run_fit(args) -> int:
    from clearformer.quality.estimator import WEIGHTS_FILE, fit
    from clearformer.quality.fitting import BAD_CHRF, auc_bad, feature_matrix, spearman

    if args.checkpoint:
        target = Path(args.checkpoint) / WEIGHTS_FILE
        if target.exists() and not args.overwrite:
            raise UserError(f"{target} exists: pass --overwrite to replace it")
    scored, directory, decoding = _scored(args)
    target = Path(directory) / WEIGHTS_FILE
    if target.exists() and not args.overwrite:
        raise UserError(f"{target} exists: pass --overwrite to replace it")
    rows, targets = feature_matrix(scored)
    weights = fit(rows, targets, fitted_on={"pairs": str(args.pairs), "translations": len(scored),
                                            "beam": decoding.beam, "target": "sentence chrF / 100"})
    fitted = [weights.score(row) for row in rows.tolist()]
    chrf = [s.chrf for s in scored]
    weights.fitted_on.update(spearman_on_fit=round(spearman(fitted, chrf), 4),
                             auc_on_fit=round(auc_bad(fitted, chrf), 4), bad_below=BAD_CHRF)
    weights.save(target)
    print(f"clearformer confidence: fitted on {len(scored)} translations of {args.pairs} -> {target} "
          f"(on them: Spearman {weights.fitted_on['spearman_on_fit']:.3f}, AUC {weights.fitted_on['auc_on_fit']:.3f})",
          file=sys.stderr)
    return 0


def run_measure(args) -> int:
    from clearformer.quality.estimate import unsupervised_score
    from clearformer.quality.estimator import load_weights
    from clearformer.quality.fitting import auc_bad, spearman

    scored, directory, _ = _scored(args)
    chrf = [s.chrf for s in scored]
    bad = sum(f < 40 for f in chrf)
    print(f"{len(scored)} translations, {bad} under chrF 40")
    print("score\tSpearman\tAUC")
    baseline = [unsupervised_score(s.row) for s in scored]
    print(f"unsupervised (Bergamot)\t{spearman(baseline, chrf):.3f}\t{auc_bad(baseline, chrf):.3f}")
    weights = load_weights(directory)
    if weights is not None:
        fitted = [weights.score(s.row) for s in scored]
        print(f"fitted ({directory}/confidence.json)\t{spearman(fitted, chrf):.3f}\t{auc_bad(fitted, chrf):.3f}")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("confidence", help="fit and measure a run's confidence (which translations "
                                                      "to review)", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="confidence_command", metavar="ACTION", required=True)
    for name, run, text in (("fit", run_fit, "fit RUN/confidence.json on held-out pairs"),
                            ("measure", run_measure, "Spearman and AUC against sentence chrF on pairs")):
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--pairs", metavar="TSV", required=True,
                         help="source TAB reference per line (e.g. a corpus' valid.tsv)")
        sub.add_argument("--limit", type=int, metavar="N", help="the first N pairs only")
        options.add_checkpoint(sub)
        DecodingOptions.add_arguments(sub)
        options.add_threads(sub)
        options.add_device(sub)
        if name == "fit":
            sub.add_argument("--overwrite", action="store_true", help="replace an existing confidence.json")
        sub.set_defaults(func=run)
