"""The files an explanation can be written to (`explain` and `lm explain`): a page, figures, a text file.

Each one is checked before the model runs (a typo costs nothing; GPT-2 takes a while), and none that
exists is replaced unless `--overwrite` is given: an explanation never silently takes the place of a
user's file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from clearformer.explain.html import check_page_path, write_html
from clearformer.learn.page import page_sections
from clearformer.store.output import check_output, write_output


def add_view_options(parser, what: str = "every recorded step") -> None:
    """--html FILE, --plots DIR and --overwrite."""
    parser.add_argument("--html", metavar="FILE", help=f"also write {what} as a self-contained interactive HTML page")
    parser.add_argument("--plots", metavar="DIR", help="also write PNG figures into DIR")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --html FILE / --output FILE and the figures already in --plots DIR")


def check_views(args) -> None:
    """--html FILE, --plots DIR and (explain) --output FILE, checked before any work."""
    if args.html:
        check_page_path(Path(args.html), args.overwrite)
    if args.plots:
        from clearformer.explain.plots import check_plots_dir  # matplotlib: only when figures are asked for

        check_plots_dir(Path(args.plots), args.overwrite)
    output = getattr(args, "output", None)
    if output:
        check_output(output, "--output", args.overwrite, OUTPUT_EXISTS)


OUTPUT_EXISTS = "pass --overwrite to replace it, or choose another --output FILE"


def write_text_output(args, text: str) -> None:
    """explain's --output FILE (checked by `check_views` before any work), or standard output."""
    if args.output:
        write_output(check_output(args.output, "--output", args.overwrite, OUTPUT_EXISTS), text)
    else:
        sys.stdout.write(text)


def write_views(walk, args) -> None:
    """The page and the figures of the walkthrough, every step of it (the terminal may print fewer)."""
    if args.plots:
        from clearformer.explain.plots import write_plots

        for path in write_plots(walk, Path(args.plots)):
            print(f"wrote {path}", file=sys.stderr)
    if args.html:
        print(f"wrote {write_html(walk, Path(args.html), args.overwrite, page_sections())}", file=sys.stderr)
