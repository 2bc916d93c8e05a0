"""`clearformer lens TEXT`: the logit lens, what the decoder would choose after each of its layers at every step.

The helpers here (loading, --format, --output) serve `clearformer patch` and `clearformer attribute` too.
"""

from __future__ import annotations

import io
import json
import sys

from rich.console import Console
from rich.table import Table

from clearformer.commands import options
from clearformer.errors import UserError
from clearformer.explain.why import lens_report
from clearformer.limits import require_utf8
from clearformer.load import load_decoding_facts, load_model
from clearformer.store.output import check_output, write_output
from clearformer.store.runs import resolve_checkpoint


def add_common(parser) -> None:
    """--checkpoint, --format text|json, --output FILE."""
    options.add_checkpoint(parser)
    parser.add_argument("--format", choices=["text", "json"], default="text", help="text (a table) or json")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to this file instead of standard output")


def load(args, *texts: str):
    """(model, tokenizer, decoding facts) of --checkpoint, after --output and the texts were checked (UTF-8)."""
    if args.output:
        check_output(args.output, "--output")
    for text in texts:
        require_utf8("the sentence", text)
    directory = resolve_checkpoint(args.checkpoint)
    model, tokenizer, _ = load_model(directory)
    return model, tokenizer, load_decoding_facts(directory, tokenizer)


def console(width: int = 120) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=width, force_terminal=False, color_system=None, highlight=False), buffer


def write(args, report: dict, render) -> int:
    """The report as JSON or as `render(report)` text, to --output (atomically) or standard output."""
    text = json.dumps(report, ensure_ascii=False, indent=1) + "\n" if args.format == "json" else render(report)
    if args.output:
        write_output(check_output(args.output, "--output"), text)
    else:
        sys.stdout.write(text)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "lens", help="the logit lens: what the decoder would say after each layer, at every step",
        description="Translate TEXT (greedy, translate's rules) and show, at every generation step and every "
                    "decoder layer, the token the model would choose if the decoder stopped after that layer "
                    "(its output through the final norm, where there is one, and the output projection), "
                    "and the probability that layer gives the token finally chosen. On a language model, "
                    "TEXT is continued.")
    parser.add_argument("text", help="a source sentence (a prompt for a language model)")
    parser.add_argument("--max-new-tokens", type=int, default=20, help="language model: tokens to generate")
    add_common(parser)
    parser.set_defaults(func=run)


def render(report: dict) -> str:
    out, buffer = console()
    layers = len(report["steps"][0]["layers"]) if report["steps"] else 0
    table = Table(title="Logit lens: top token after each decoder layer (p of the chosen token)", title_justify="left")
    table.add_column("step", justify="right")
    table.add_column("chosen")
    for layer in range(layers):
        table.add_column(f"layer {layer}")
    for step in report["steps"]:
        cells = [f"{x['top']} ({x['p_chosen']:.2f})" + ("" if x["top"] == step["chosen"] else " ✗")
                 for x in step["layers"]]
        table.add_row(str(step["step"]), step["chosen"], *cells)
    out.print(table)
    out.print("✗: that layer's top token is not the one chosen; (p): the probability it gives the chosen token")
    out.print(f"result: {report['result']}")
    return buffer.getvalue()


def run(args) -> int:
    if args.max_new_tokens < 1:
        raise UserError(f"--max-new-tokens must be at least 1, not {args.max_new_tokens}")
    model, tokenizer, facts = load(args, args.text)
    return write(args, lens_report(model, tokenizer, args.text, args.max_new_tokens, facts), render)
