"""`clearformer info`: a preset's or checkpoint's sizes and parameter count, module by module."""

from __future__ import annotations

import json
import sys

from clearformer.config import PRESETS, VARIANTS, preset, variant_overrides
from clearformer.errors import UserError
from clearformer.load import load_decoding_facts, load_model
from clearformer.model.build import build_model
from clearformer.report.model import describe, info_lines


def register(subparsers) -> None:
    parser = subparsers.add_parser("info", help="sizes and parameter count of a preset or checkpoint")
    parser.add_argument("--preset", default="base", help=f"one of: {', '.join(PRESETS)} (default base)")
    parser.add_argument("--vocab", type=int, default=37000, help="vocabulary size (default 37000, as the paper)")
    parser.add_argument("--tie", choices=["none", "decoder", "all"], default="all",
                        help="shared embeddings (default all: source = target = output, as the paper)")
    parser.add_argument("--attention", choices=VARIANTS, default="mha",
                        help="decoder self-attention variant (default mha; sized as `lm train` sizes it)")
    parser.add_argument("--kv-heads", type=int, default=None, help="key/value heads for gqa (default n_heads/4)")
    parser.add_argument("--checkpoint", help="describe a trained checkpoint instead of a preset")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.set_defaults(func=run)


def run(args) -> int:
    import torch

    if args.checkpoint:
        model, tokenizer, _ = load_model(args.checkpoint)
        name, facts = args.checkpoint, load_decoding_facts(args.checkpoint, tokenizer)
    else:
        if args.vocab <= 0:
            raise UserError("--vocab must be positive")
        if args.kv_heads is not None and args.attention != "gqa":
            raise UserError("--kv-heads applies only to --attention gqa")
        base = preset(args.preset)
        try:
            overrides = variant_overrides(args.attention, base.d_model, base.n_heads, args.kv_heads)
            config = preset(args.preset, src_vocab_size=args.vocab, tgt_vocab_size=args.vocab,
                            tie_embeddings=args.tie, **overrides)
        except ValueError as error:
            raise UserError(f"--preset {args.preset} --attention {args.attention}: {error}") from None
        with torch.device("meta"):  # sizes only: no memory, no initialisation time
            model = build_model(config)
        name, tokenizer, facts = f"preset {args.preset}", None, None
    info = describe(model, name, tokenizer, facts)
    if args.format == "json":
        sys.stdout.write(json.dumps(info, indent=2) + "\n")
        return 0
    print("\n".join(info_lines(info, model.config)))
    return 0
