"""Every decoding choice in one object, and the tokenizer facts a search needs in another.

`DecodingOptions` is built once (from the command line by `from_args`, or in code) and passed whole
through translate, evaluate, explain, serve, the benchmarks and down to `greedy_decode` and
`beam_search`. Each field carries its own command-line definition (flag, help) in its metadata, so
`add_arguments` generates the flags: a new decoding option touches this dataclass and the code that
uses it, and no signature in between.

`SearchTokens` holds what a search needs to know about the vocabulary and the data: <bos>, <eos>,
<pad>, the placeholder pieces, whether sources end in <eos>, and the training pairs' length ratio
(for the brevity penalty). `search_tokens(model, tokenizer)` is the one function that reads them.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field, fields, replace

from clearformer.errors import UserError

STOP_RULES = ("current", "bound")
COMPILE_CHOICES = ("auto", "on", "off")
# The paper's length penalty is alpha = 0.6; a larger alpha translated longer and better on the
# trained en-fr-software model (BENCHMARKS.md, "Translation length: the length penalty on one
# trained model"). `--alpha 0.6` gives the paper's.
DEFAULT_ALPHA = 2.0
# The brevity weight that brought every length bucket to >= 0.9 of the reference length on the
# validation split (BENCHMARKS.md, "Translation length: ... (valid)"); 0 = off.
DEFAULT_BREVITY = 2.0
DEFAULT_BOS_ID = 2  # the WordTokenizer's order: <pad> <unk> <bos> <eos>
DEFAULT_EOS_ID = 3


def cli(flag: str, help: str, inverted: bool = False, **argparse_kwargs) -> dict:
    """A field's command-line definition, kept in the dataclass field's metadata. The parsed value
    sits under the flag's own name (args.early_stop for --early-stop); `inverted`: a store_true flag
    that sets the field to False (--whole: split=False)."""
    return {"flag": flag, "help": help, "inverted": inverted, **argparse_kwargs}


REPEAT_RULES = ("auto", "bounded", "free")


def dest(flag: str) -> str:
    """Where argparse keeps a flag's value: --early-stop -> early_stop."""
    return flag.lstrip("-").replace("-", "_")


@dataclass
class DecodingOptions:
    """How to decode: the search, its limits and rules, and how sentences are batched."""

    beam: int = field(default=1, metadata=cli("--beam", "beam size (default 1: greedy decoding; the paper uses 4)",
                                              metavar="N"))
    alpha: float = field(default=DEFAULT_ALPHA, metadata=cli(
        "--alpha", f"beam search length penalty ((5+len)/6)^alpha (default {DEFAULT_ALPHA})"))
    stop: str = field(default="current", metadata=cli(
        "--early-stop", "when beam search stops a sentence: 'current' (default) once no beam scored at the "
        "current length beats its best finished translation; 'bound' once none can at any allowed length "
        "(exact; slower, slightly better BLEU)", choices=STOP_RULES))
    brevity: float = field(default=DEFAULT_BREVITY, metadata=cli(
        "--brevity", f"penalty on ending a translation shorter than the training data's length ratio expects: "
        f"-W * (expected - length)^2 / expected on <eos> (default {DEFAULT_BREVITY}; 0 = off)", metavar="W"))
    placeholders: str = field(default="exact", metadata=cli(
        "--placeholders", "'exact' (default): every placeholder piece of a source (%%s, {0}, ...) comes out "
        "exactly as often as it went in; 'free': no constraint", choices=("exact", "free")))
    repeats: str = field(default="auto", metadata=cli(
        "--repeats", "'bounded': no piece comes more than max(3, its longest run in the source) times in a row "
        "(no runaway repetition to the length limit); 'free': no bound; 'auto' (default): bounded for runs that "
        "mask placeholders, free for older runs (they translate as before)", choices=REPEAT_RULES))
    max_extra: int = field(default=50, metadata=cli(
        "--max-extra", "stop at source length + N tokens (default 50, as in the paper)", metavar="N"))
    max_new: int | None = None  # a fixed token budget instead of max_extra (benchmarks; no flag)
    min_length: int = 0  # <eos> forbidden before this many tokens (benchmarks; no flag)
    split: bool = field(default=True, metadata=cli(
        "--whole", "translate an input of more than 25 words in one pass (default: sentence by sentence, "
        "as the training data were cut)", inverted=True, action="store_true"))
    batch_size: int = field(default=32, metadata=cli("--batch-size", "sentences per batch (default 32)",
                                                     metavar="N"))
    use_cache: bool = True  # False: the whole prefix again every step (tests prove the cache changes nothing)
    with_scores: bool = True  # greedy: also sum the log-probabilities (a pass over the vocabulary per step)
    compile: str = field(default="auto", metadata=cli(
        "--compile", "compile the decoder's one-token step with torch.compile: 'on', or 'off'; 'auto' "
        "(default) runs it eagerly (compiling did not pay on the CPU: BENCHMARKS.md)", choices=COMPILE_CHOICES))

    def check(self) -> DecodingOptions:
        """Raise a one-line UserError for a value out of range; return self."""
        if self.beam < 1:
            raise UserError(f"--beam must be at least 1, not {self.beam}")
        for name in ("alpha", "brevity"):
            if not math.isfinite(getattr(self, name)):
                raise UserError(f"--{name} must be a finite number, not {getattr(self, name)}")
        if self.brevity < 0:
            raise UserError(f"--brevity must be >= 0 (0 = off), not {self.brevity}")
        if self.stop not in STOP_RULES:
            raise UserError(f"unknown early-stopping rule {self.stop!r}: choose one of {', '.join(STOP_RULES)}")
        if self.placeholders not in ("exact", "free"):
            raise UserError(f"--placeholders must be 'exact' or 'free', not {self.placeholders!r}")
        if self.repeats not in REPEAT_RULES:
            raise UserError(f"--repeats must be one of {', '.join(REPEAT_RULES)}, not {self.repeats!r}")
        if self.max_extra < 0:
            raise UserError(f"--max-extra must be >= 0, not {self.max_extra}")
        if self.max_new is not None and self.max_new < 1:
            raise UserError(f"max_new must be at least 1, not {self.max_new}")
        if self.min_length < 0:
            raise UserError(f"min_length must be >= 0, not {self.min_length}")
        if self.batch_size < 1:
            raise UserError(f"--batch-size must be at least 1, not {self.batch_size}")
        if self.compile not in COMPILE_CHOICES:
            raise UserError(f"--compile must be one of {', '.join(COMPILE_CHOICES)}, not {self.compile!r}")
        return self

    def but(self, **changes) -> DecodingOptions:
        """A copy with `changes` applied (checked)."""
        return replace(self, **changes).check()

    def describe(self) -> str:
        """One line for a report: the search and the rules that shape its output."""
        search = "greedy" if self.beam == 1 else f"beam {self.beam}, alpha {self.alpha}, early stop {self.stop}"
        whole = ", long inputs whole" if not self.split else ""
        return f"{search}, brevity {self.brevity}, placeholders {self.placeholders}{whole}"

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, only: tuple[str, ...] | None = None) -> None:
        """Add the flag of every field that has one (or of the fields named in `only`)."""
        for item in fields(cls):
            spec = dict(item.metadata)
            if not spec or (only is not None and item.name not in only):
                continue
            flag, _ = spec.pop("flag"), spec.pop("inverted")
            if spec.get("action") is None:
                spec.setdefault("type", type(item.default))
                spec.setdefault("default", item.default)
            parser.add_argument(flag, **spec)

    @classmethod
    def from_args(cls, args: argparse.Namespace, **overrides) -> DecodingOptions:
        """The options the command line chose (fields without a flag keep their defaults), checked."""
        chosen = {}
        for item in fields(cls):
            if item.metadata and hasattr(args, dest(item.metadata["flag"])):
                value = getattr(args, dest(item.metadata["flag"]))
                chosen[item.name] = not value if item.metadata["inverted"] else value
        return cls(**{**chosen, **overrides}).check()


@dataclass(frozen=True)
class SearchTokens:
    """The vocabulary and data facts a search reads (built by `search_tokens`).

    placeholder_ids: the pieces each source's copies of must come out exactly (empty: no constraint);
    length_ratio: target tokens per source token in the training pairs (0: unknown, no brevity penalty);
    source_eos: whether every source ends in <eos> (it is then not counted as a source token);
    repeat_bound: no piece more than max(3, its longest source run) times in a row (generate/constraints.py).
    """

    bos_id: int = DEFAULT_BOS_ID
    eos_id: int = DEFAULT_EOS_ID
    pad_id: int = 0
    placeholder_ids: tuple[int, ...] = ()
    length_ratio: float = 0.0
    source_eos: bool = False
    repeat_bound: bool = False


def search_tokens(model, tokenizer=None, options: DecodingOptions | None = None) -> SearchTokens:
    """The one place that reads the tokenizer's special ids and the run's length ratio and source format.

    Without a tokenizer, <bos> and <eos> are the WordTokenizer's (tests with random models).
    """
    config = model.config
    pieces = () if tokenizer is None or (options is not None and options.placeholders == "free") \
        else tuple(getattr(tokenizer, "placeholder_ids", ()))
    return SearchTokens(
        bos_id=DEFAULT_BOS_ID if tokenizer is None else tokenizer.bos_id,
        eos_id=DEFAULT_EOS_ID if tokenizer is None else tokenizer.eos_id,
        pad_id=config.pad_id,
        placeholder_ids=pieces,
        length_ratio=0.0 if tokenizer is None else float(tokenizer.length_ratio),
        source_eos=False if tokenizer is None else bool(tokenizer.source_eos),
        repeat_bound=repeat_bound(tokenizer, options),
    )


def repeat_bound(tokenizer, options: DecodingOptions | None) -> bool:
    """--repeats: 'bounded', 'free', or 'auto' (bounded for a run that masks placeholders: runs trained
    before masking existed decode exactly as they did)."""
    rule = "auto" if options is None else options.repeats
    if rule == "auto":
        return bool(getattr(tokenizer, "mask_placeholders", False))
    return rule == "bounded"
