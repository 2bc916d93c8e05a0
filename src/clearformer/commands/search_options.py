"""`explain`'s search options: the beam and the rules `translate --beam K` searches with, so that
`explain --beam K` records the very search `translate` runs (same names, same defaults)."""

from __future__ import annotations

from clearformer.errors import UserError
from clearformer.explain.search import MAX_BEAM, SearchSettings
from clearformer.generate.beam import DEFAULT_ALPHA
from clearformer.generate.brevity import DEFAULT_BREVITY
from clearformer.validation import require_finite


def add_search_arguments(parser) -> None:
    parser.add_argument("--beam", type=int, default=1, metavar="K",
                        help=f"explain beam search of width K as `translate --beam K` runs it: every step's "
                             f"hypotheses, candidates and scores (default 1: greedy; at most {MAX_BEAM})")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help=f"length penalty (default {DEFAULT_ALPHA})")
    parser.add_argument("--brevity", type=float, default=DEFAULT_BREVITY, metavar="W",
                        help=f"brevity penalty weight on <eos> (default {DEFAULT_BREVITY}; 0 = off)")
    parser.add_argument("--early-stop", choices=("current", "bound"), default="current",
                        help="beam search's early-stopping rule, as in translate (default current)")
    parser.add_argument("--max-extra", type=int, default=50, metavar="N", help="stop at source length + N tokens")
    parser.add_argument("--placeholders", choices=("exact", "free"), default="exact",
                        help="copy placeholder pieces exactly (default) or freely, as in translate")


def settings_from_args(args) -> SearchSettings:
    require_finite("--alpha", args.alpha)
    require_finite("--brevity", args.brevity)
    if args.brevity < 0:
        raise UserError(f"--brevity must be >= 0 (0 = off), not {args.brevity}")
    if args.max_extra < 0:
        raise UserError(f"--max-extra must be >= 0, not {args.max_extra}")
    settings = SearchSettings(args.beam, args.alpha, args.max_extra, args.early_stop, args.brevity,
                              args.placeholders == "exact")
    settings.check()
    return settings
