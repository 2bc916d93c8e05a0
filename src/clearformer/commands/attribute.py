"""`clearformer attribute TEXT`: a score per source token for each target token (integrated gradients,
gradient x input or cross-attention), and word alignments in the Pharaoh format."""

from __future__ import annotations

from rich.table import Table

from clearformer.commands.lens import add_common, console, load, write
from clearformer.explain.attribution import DEFAULT_STEPS, METHODS
from clearformer.explain.why import attribute_report, check_method


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "attribute", help="which source words drive each target word (integrated gradients, gradient x input, "
                          "attention); --alignments prints Pharaoh links",
        description="Translate TEXT and score each source token for each target token, teacher-forced on the "
                    "translation: integrated gradients over the source embeddings (baseline: every token "
                    "embedding zero, positions kept; the midpoint rule on --steps points; the completeness check "
                    "is printed), gradient x input (the same baseline), or the cross-attention weights averaged "
                    "over layers and heads.")
    parser.add_argument("text", help="the source sentence")
    parser.add_argument("--method", default=METHODS[0], help=f"{', '.join(METHODS)} (default {METHODS[0]})")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                        help=f"integrated gradients: points on the path (default {DEFAULT_STEPS})")
    parser.add_argument("--target", help="attribute this translation instead of the model's own")
    parser.add_argument("--alignments", action="store_true",
                        help="print only the word alignments, as Pharaoh links i-j (source position - target "
                             "position, 0-based, tokens as the model reads them; the format fast_align writes)")
    add_common(parser)
    parser.set_defaults(func=run)


def render(report: dict) -> str:
    out, buffer = console(160)
    out.print(f"{report['text']}  ->  {report['translation']}   ({report['method']})")
    table = Table(title_justify="left", title="score of each source token (columns) for each target token (rows)")
    table.add_column("target")
    for token in report["source_tokens"]:
        table.add_column(token, justify="right")
    for token, row in zip(report["target_tokens"], report["scores"], strict=True):
        best = max(range(len(row)), key=row.__getitem__)
        table.add_row(token, *[f"[bold]{x:.3f}[/bold]" if i == best else f"{x:.3f}" for i, x in enumerate(row)])
    out.print(table)
    if "completeness" in report:
        c = report["completeness"]
        out.print(f"baseline: {report['baseline']}; {report['steps']} steps; completeness: the scores sum to "
                  f"{c['sum']:.4f}, the output moved {c['difference']:.4f} from the baseline")
    out.print("alignments: " + " ".join(report["alignments"]))
    return buffer.getvalue()


def run(args) -> int:
    check_method(args.method, args.steps)
    model, tokenizer, facts = load(args, args.text, *([args.target] if args.target else []))
    report = attribute_report(model, tokenizer, args.text, args.method, args.steps, args.target, facts)
    if args.alignments and args.format == "text":
        return write(args, report, lambda r: " ".join(r["alignments"]) + "\n")
    return write(args, report, render)
