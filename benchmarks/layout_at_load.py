"""The few-rows layout applied once where a run is loaded (generate/layout.py `for_decoding`) against the layout
swapped into the model's classes at every search start (the code before issue 47), and against no layout.

    python benchmarks/layout_at_load.py                        # writes its section of BENCHMARKS.md
    python benchmarks/layout_at_load.py --no-write --batches 4

One process, one `small` model (random weights, --vocab tokens), the same batches of random sources, every
sentence made to generate exactly --new-tokens tokens: batch by batch, the three ways run in rotating order
(a busy machine slows each alike), greedy and beam 4. "at load" decodes `for_decoding(model)`, made once;
"per search" runs the old opening of every search (each plain `nn.Linear` of the model turned into a
`FewRowsLinear` in place: nothing to do after the first search, but the walk over the modules runs every
time); "plain" decodes the model as built (nn.Linear). The numbers are the medians of the per-batch ratios, so
a speed claim is a ratio measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer.config import preset  # noqa: E402
from clearformer.generate import DecodingOptions, beam_search, greedy_decode  # noqa: E402
from clearformer.generate.layout import FewRowsLinear, for_decoding  # noqa: E402
from clearformer.generate.translator import pad_batch  # noqa: E402
from clearformer.model.transformer import Transformer  # noqa: E402


def swap_per_search(model: nn.Module) -> nn.Module:
    """The opening every search had before issue 47 (generate/state.py `use_few_rows_layout`: a walk over every
    module, turning each plain nn.Linear into a FewRowsLinear in place), kept here only as the peer this
    benchmark times."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                swapped = FewRowsLinear.__new__(FewRowsLinear)
                swapped.__dict__ = child.__dict__
                setattr(parent, name, swapped)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=20)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    config = preset("small", src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, dropout=0.0, max_len=256)
    plain = Transformer(config).eval()
    at_load = for_decoding(plain)
    per_search = swap_per_search(Transformer(config).eval())
    per_search.load_state_dict(plain.state_dict())
    generator = torch.Generator().manual_seed(args.seed)
    batches = [pad_batch([torch.randint(4, args.vocab - 1, (int(n),), generator=generator).tolist()
                          for n in torch.randint(8, 30, (args.batch,), generator=generator)], config.pad_id)
               for _ in range(args.batches)]
    ways = {"at load": lambda src, o: greedy_or_beam(at_load, src, o),
            "per search": lambda src, o: greedy_or_beam(swap_per_search(per_search), src, o),
            "plain": lambda src, o: greedy_or_beam(plain, src, o)}
    load_before = os.getloadavg()[0]
    rows = []
    for beam in (1, 4):
        options = DecodingOptions(beam=beam, alpha=0.6, max_new=args.new_tokens, min_length=args.new_tokens,
                                  with_scores=False)
        for way in ways.values():  # warm up
            way(batches[0][:2], options)
        times: dict[str, list[float]] = {name: [] for name in ways}
        names = list(ways)
        for index, src in enumerate(batches):
            order = names[index % 3:] + names[:index % 3]  # rotating: each way first in turn
            for name in order:
                start = time.perf_counter()
                ways[name](src, options)
                times[name].append(time.perf_counter() - start)
        ratio = {name: statistics.median(t / a for t, a in zip(times[name], times["at load"], strict=True))
                 for name in names}
        rows.append(["greedy" if beam == 1 else "beam 4", f"{sum(times['at load']):.2f}",
                     f"{ratio['per search']:.3f}", f"{ratio['plain']:.3f}"])
    load = f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    body = (f"{args.batches} batches of {args.batch} random sources, {args.new_tokens} tokens each, `small` model, "
            f"vocabulary {args.vocab}, {args.threads} threads; load average {load} (a shared machine: only the "
            f"ratios, measured batch by batch in rotating order in one process, are claims).\n\n"
            + markdown_table(["search", "at load: seconds", "per search / at load", "plain / at load"], rows)
            + "\n\nA ratio above 1: that way is slower than the layout applied once at load.")
    print(body)
    if not args.no_write:
        write_section("layout_at_load", "Decoding: the layout applied once at load (A/B)", body)


def greedy_or_beam(model, src, options: DecodingOptions):
    search = greedy_decode if options.beam == 1 else beam_search
    return search(model, src, options)


if __name__ == "__main__":
    main()
