"""`clearformer explain`: every intermediate of a forward pass, step by step, as the seeds show it."""

from __future__ import annotations

import sys
from pathlib import Path

from clearformer.atomic import atomic_write_text
from clearformer.checkpoint import load_model
from clearformer.commands import options, views
from clearformer.commands.search_options import add_search_arguments, settings_from_args
from clearformer.errors import UserError
from clearformer.explain.examples import run_example
from clearformer.explain.render import render, to_json
from clearformer.explain.search import explain_search, render_beam
from clearformer.interventions import add_ablate_argument, interventions_from_args
from clearformer.runs import resolve_checkpoint


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "explain", help="show every step of the Transformer on a sentence or a seed example",
        description="Print every named intermediate (embeddings, PE, Q, K, V, scores, weights, Add & Norm, "
                    "FFN, cross-attention, probabilities...) from the same modules that train.")
    parser.add_argument("sentence", nargs="?", help="a source sentence to translate with a trained checkpoint")
    parser.add_argument("--example", help="a built-in seed walkthrough: i-love-you or india-is-great")
    options.add_checkpoint(parser)
    parser.add_argument("--decimals", type=int, default=4, help="decimals shown (default 4)")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--output", "-o", help="write to this file instead of standard output")
    parser.add_argument("--layer", type=int, help="show only this layer")
    parser.add_argument("--head", type=int, help="show only this attention head")
    parser.add_argument("--top", type=int, default=10, help="vocabulary entries kept per distribution (0 = all)")
    parser.add_argument("--max-cols", type=int, default=10, help="columns shown per matrix (0 = all)")
    parser.add_argument("--max-rows", type=int, default=12, help="rows shown per matrix (0 = all)")
    parser.add_argument("--only", metavar="NAMES",
                        help="comma-separated step names to print (e.g. weights,probabilities,chosen); a "
                             "translation prints the attention weights, distributions and choices by default")
    parser.add_argument("--all", action="store_true", help="print every recorded step of a translation")
    add_search_arguments(parser)  # --beam K and translate's rules: the search that translate runs
    add_ablate_argument(parser)  # what-if: --ablate NAME
    views.add_view_options(parser)
    parser.set_defaults(func=run)


def build(args):
    """The walkthrough the arguments ask for."""
    if args.example and args.sentence:
        raise UserError("give either a sentence or --example, not both")
    if args.example:
        if args.ablate or args.beam != 1:
            raise UserError("--beam and --ablate explain a sentence with a trained model, not --example")
        return run_example(args.example)[0]
    if args.sentence is None:
        raise UserError("nothing to explain: give a sentence (with a trained --checkpoint) or --example NAME")
    settings = settings_from_args(args)
    model, tokenizer, _ = load_model(resolve_checkpoint(args.checkpoint))
    return explain_search(model, tokenizer, args.sentence, settings, args.top, interventions_from_args(model, args))


TRANSLATION_FOCUS = ("token_ids", "weights", "probabilities", "chosen")


def shown_steps(walk, args):
    """The walkthrough limited to the steps the terminal should print (JSON, plots and HTML get all)."""
    if args.only:
        wanted = tuple(name.strip() for name in args.only.split(",") if name.strip())
    elif args.sentence and not args.all:
        wanted = TRANSLATION_FOCUS
    else:
        return walk
    shown = walk.only(wanted)
    if not shown.steps:
        raise UserError(f"--only {args.only!r} matches no step; names look like: "
                        f"{', '.join(sorted({s.name.split('.')[-1] for s in walk.steps}))}")
    return shown


def run(args) -> int:
    if args.decimals < 0 or args.decimals > 12:
        raise UserError("--decimals must be between 0 and 12")
    views.check_views(args)
    walk = build(args)
    color = None if args.output else sys.stdout.isatty()
    if args.format == "json":
        text = to_json(walk)
    elif getattr(walk, "beam", None) and not (args.only or args.all):  # the search, a table per step
        text = render_beam(walk.beam, min(args.decimals, 4), color=color)
    else:
        text = render(shown_steps(walk, args), args.decimals, args.layer, args.head, args.max_cols, args.max_rows,
                      color=color)
    if getattr(walk, "original", None):
        text += (f"without --ablate: {walk.original['result']}\n"
                 f"with --ablate {' '.join(walk.ablated)}: {walk.result}\n")
    if args.output:
        atomic_write_text(Path(args.output), text)
    else:
        sys.stdout.write(text)
    views.write_views(walk, args)
    return 0
