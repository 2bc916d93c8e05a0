"""`clearformer patch CLEAN CORRUPTED`: activation patching, which points of the clean run restore its translation."""

from __future__ import annotations

from rich.table import Table

from clearformer.commands.lens import add_common, console, load, write
from clearformer.errors import UserError
from clearformer.explain.why import patch_report


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "patch", help="activation patching: which layers, positions and heads carry what CLEAN has and CORRUPTED lacks",
        description="Teacher-forced on CLEAN's translation: for each point (each encoder layer's output at each "
                    "source position, each decoder layer's output, each attention head's output, the encoder "
                    "output as a whole), the share of log p(clean translation) lost between CLEAN and CORRUPTED "
                    "that copying that point alone from the clean run into the corrupted run restores (1 = all, "
                    "0 = none). The two sentences must have the same number of tokens.")
    parser.add_argument("clean", help="the source whose translation is explained")
    parser.add_argument("corrupted", help="the same sentence with a word changed (same number of tokens)")
    parser.add_argument("--top", type=int, default=0, help="text: show only the N points that restore most (0 = all)")
    add_common(parser)
    parser.set_defaults(func=run)


def render(report: dict, top: int = 0) -> str:
    out, buffer = console()
    out.print(f"clean: {report['clean']}  ->  {report['translation']}")
    out.print(f"corrupted: {report['corrupted']}")
    out.print(f"metric: {report['metric']}")
    out.print(f"clean {report['clean_score']:.4f}, corrupted {report['corrupted_score']:.4f}")
    source = report["source_tokens"]
    points = report["points"]
    if top:
        points = sorted(points, key=lambda p: -p["restored"])[:top]
    table = Table(title="restored by patching one point", title_justify="left")
    table.add_column("point")
    table.add_column("token")
    table.add_column("restored", justify="right")
    table.add_column("")
    for point in points:
        token = source[int(point["name"].rsplit("[", 1)[1][:-1])] if point["name"].endswith("]") else ""
        bar = "█" * max(0, min(20, round(20 * point["restored"])))
        table.add_row(point["name"], token, f"{point['restored']:.3f}", bar)
    out.print(table)
    return buffer.getvalue()


def run(args) -> int:
    if args.top < 0:
        raise UserError(f"--top must be >= 0, not {args.top}")
    model, tokenizer, facts = load(args, args.clean, args.corrupted)
    return write(args, patch_report(model, tokenizer, args.clean, args.corrupted, facts), lambda r: render(r, args.top))
