"""`clearformer explain`: every intermediate of a forward pass, step by step, as the seeds show it."""

from __future__ import annotations

import sys

from clearformer.commands import options, views
from clearformer.commands.assistant import add_glossary_argument
from clearformer.errors import UserError
from clearformer.explain.examples import run_example
from clearformer.explain.interventions import add_ablate_argument, interventions_from_args
from clearformer.explain.render import render, to_json
from clearformer.explain.search import explain_search, render_beam
from clearformer.generate import DecodingOptions
from clearformer.generate.layout import for_decoding
from clearformer.generate.source import unknown_words_line
from clearformer.glossary import read_glossary
from clearformer.limits import require_utf8
from clearformer.load import load_decoding_facts, load_model
from clearformer.model.protocol import is_encoder_decoder
from clearformer.store.runs import resolve_checkpoint


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
    parser.add_argument("--piece", type=int, default=1, metavar="N",
                        help="a text of more than 25 words is translated sentence by sentence, as `translate` "
                             "does: show sentence N (default 1)")
    # --beam K and translate's rules: explain records the very search translate runs
    DecodingOptions.add_arguments(parser, only=("beam", "alpha", "stop", "brevity", "placeholders", "max_extra"))
    add_ablate_argument(parser)  # what-if: --ablate NAME
    add_glossary_argument(parser)
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
    require_utf8("the sentence", args.sentence)  # as translate refuses it
    glossary = read_glossary(args.glossary) if args.glossary else None
    directory = resolve_checkpoint(args.checkpoint)
    model, tokenizer, _ = load_model(directory)
    if not is_encoder_decoder(model):
        raise UserError(f"{directory}: holds a decoder-only language model; explain it with "
                        f"`clearformer lm explain TEXT --checkpoint {directory}`")
    check_layer_and_head(model.config, args.layer, args.head)
    model = for_decoding(model)  # decoded as `translate` decodes it (generate/layout.py), once, here
    return explain_search(model, tokenizer, args.sentence, DecodingOptions.from_args(args), args.top,
                          interventions_from_args(model, args), piece=args.piece, glossary=glossary,
                          facts=load_decoding_facts(directory, tokenizer))  # as `translate` decodes the run


def check_layer_and_head(config, layer: int | None, head: int | None) -> None:
    """--layer and --head must name a layer and a head the model has (else nothing would be shown)."""
    layers = max(config.n_encoder_layers, config.n_decoder_layers)
    if layer is not None and not 0 <= layer < layers:
        raise UserError(f"--layer {layer}: choose a layer from 0 to {layers - 1}")
    if head is not None and not 0 <= head < config.n_heads:
        raise UserError(f"--head {head}: choose a head from 0 to {config.n_heads - 1}")


def check_shown(walk, layer: int | None, head: int | None) -> None:
    """--layer and --head must name a layer and a head the walkthrough holds (a seed example's too)."""
    layers = sorted({step.layer for step in walk.steps if step.layer is not None})
    heads = sorted({m.head for step in walk.steps for m in step.matrices if m.head is not None})
    if layer is not None and layer not in layers:
        raise UserError(f"--layer {layer}: choose a layer from 0 to {max(layers, default=0)}")
    if head is not None and head not in heads:
        raise UserError(f"--head {head}: choose a head from 0 to {max(heads, default=0)}")


# forget_gate and cell: the SSRU's steps (`decoder.layers.N.recurrence`) where a decoder reads its earlier outputs
# by a recurrence instead of self-attention (autoregressive_layer="ssru", model/ssru.py)
TRANSLATION_FOCUS = ("token_ids", "weights", "forget_gate", "cell", "probabilities", "chosen")


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


def pieces_header(walk) -> str:
    """Which sentence of a paragraph the walkthrough shows, and every sentence's translation."""
    lines = [f"Your text has {len(walk.pieces)} sentences; like `translate`, explain translates them one by one "
             f"and shows sentence {walk.piece} (--piece N shows another):"]
    for number, piece in enumerate(walk.pieces, start=1):
        mark = "▶" if number == walk.piece else " "
        lines.append(f" {mark} {number}. {piece['text']}  →  {piece['translation']}")
    return "\n".join(lines) + "\n\n"


def run(args) -> int:
    if args.decimals < 0 or args.decimals > 12:
        raise UserError("--decimals must be between 0 and 12")
    views.check_views(args)
    walk = build(args)
    check_shown(walk, args.layer, args.head)
    color = None if args.output else sys.stdout.isatty()
    if args.format == "json":
        text = to_json(walk)
    elif getattr(walk, "beam", None) and not (args.only or args.all):  # the search, a table per step
        text = render_beam(walk.beam, min(args.decimals, 4), color=color)
    else:
        text = render(shown_steps(walk, args), args.decimals, args.layer, args.head, args.max_cols, args.max_rows,
                      color=color)
    if getattr(walk, "unknown", None):
        print(f"clearformer explain: warning: {unknown_words_line(walk.unknown)}", file=sys.stderr)
    if getattr(walk, "pieces", None) and args.format != "json":
        text = pieces_header(walk) + text + f"translation of the whole text: {walk.result}\n"
    for forced in walk.glossary_forced if args.format != "json" else ():
        text += f"glossary: step {forced['step']} wrote {forced['token']!r} for a glossary term\n"
    if getattr(walk, "original", None):
        text += (f"without --ablate: {walk.original['result']}\n"
                 f"with --ablate {' '.join(walk.ablated)}: {walk.result}\n")
    views.write_text_output(args, text)
    views.write_views(walk, args)
    return 0
