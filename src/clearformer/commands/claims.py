"""`clearformer claims`: list the tutorials' claims; `clearformer claims N [--quick]` measures one.

A run prints its numbers and writes claimN-<name>[-quick].json (the numbers, the machine, the
date) and a PNG figure into --out (default ./claims/). An existing result file is never replaced
unless --overwrite is given.
"""

from __future__ import annotations

from pathlib import Path

from clearformer.claims import common
from clearformer.claims.registry import CLAIMS, claim
from clearformer.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "claims", help="the tutorials' claims about the Transformer, measured (list, or run one)",
        description="Each claim the tutorials repeat, run as an experiment on the modules that train: "
                    "prints the numbers, writes a JSON of results and a PNG figure. Without N: the list.")
    p.add_argument("number", nargs="?", type=int, help="the claim to run (1-5); omit to list them")
    p.add_argument("--quick", action="store_true", help="the quick version: built-in data, well under a minute")
    p.add_argument("--out", metavar="DIR", default=None, help="where the JSON and PNG go (default ./claims)")
    p.add_argument("--overwrite", action="store_true", help="replace result files already in --out")
    p.add_argument("--device", default="cpu", help="device for claim 1's timings (cpu, cuda)")
    p.set_defaults(func=run)


def list_claims() -> int:
    for entry in CLAIMS:
        print(f"{entry.number}. \"{entry.statement}\" ({entry.sources})")
        print(f"   measures: {entry.measures}")
    print("run one: clearformer claims N --quick   (full version: python -m benchmarks.claims)")
    return 0


def run(args) -> int:
    if args.number is None:
        return list_claims()
    try:
        entry = claim(args.number)
    except KeyError:
        raise UserError(f"no claim {args.number}; choose 1-{len(CLAIMS)} (`clearformer claims` lists them)") from None
    out_dir = Path(args.out or common.DEFAULT_OUT)
    paths = common.result_paths(out_dir, entry.number, entry.slug, args.quick)
    common.check_writable(paths, args.overwrite)
    module = entry.load()
    print(f"claim {entry.number}: \"{entry.statement}\"" + (" (quick)" if args.quick else ""))
    options = {"device": args.device} if entry.number == 1 else {}
    if args.device != "cpu" and entry.number != 1:
        raise UserError("--device applies to claim 1 only (the others run on the CPU)")
    with common.thread_count(1 if args.quick else None):
        results = module.run(quick=args.quick, **options)
    results["command"] = f"clearformer claims {entry.number}" + (" --quick" if args.quick else "")
    for line in module.summary(results):
        print(line)
    common.write_result(*paths, results, module.figure(results))
    print(f"wrote {paths[0]} and {paths[1]}")
    return 0
