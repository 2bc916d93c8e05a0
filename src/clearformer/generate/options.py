"""Every decoding choice in one object, and the tokenizer facts a search needs in another.

`DecodingOptions` is built once (from the command line by `from_args`, or in code) and passed whole
through translate, evaluate, explain, serve, the benchmarks and down to `greedy_decode` and
`beam_search`. Each field carries its own command-line definition (flag, help, range) in its metadata
(clearformer/options.py), so `add_arguments` generates the flags and `check` refuses what the command
line refuses: a new decoding option touches this dataclass and the code that uses it, and no
signature in between.

`SearchTokens` holds what a search needs to know about the vocabulary and the data: <bos>, <eos>,
<pad>, the placeholder pieces, whether sources end in <eos>, and the training pairs' length ratio
(for the brevity penalty). `search_tokens(model, tokenizer)` is the one function that reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from clearformer.generate.constraints import digit_pieces, final_mark_pieces
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.glossary import TermBatch
from clearformer.limits import MAX_ALPHA, MAX_BATCH_SIZE, MAX_BEAM, MAX_NEW_TOKENS
from clearformer.options import Options, option
from clearformer.tokenize.placeholders import Masked
from clearformer.tokenize.shortlist import LexicalShortlist
from clearformer.tokenize.standins import own_numerals

STOP_RULES = ("current", "bound")
COMPILE_CHOICES = ("auto", "on", "off", "graph")
PLACEHOLDER_RULES = ("exact", "free")
# The paper's length penalty is alpha = 0.6; a larger alpha translated longer and better on the
# trained en-fr-software model (BENCHMARKS.md, "Translation length: the length penalty on one
# trained model"). `--alpha 0.6` gives the paper's.
DEFAULT_ALPHA = 2.0
# The brevity weight that brought every length bucket to >= 0.9 of the reference length on the
# validation split (BENCHMARKS.md, "Translation length: ... (valid)"); 0 = off.
DEFAULT_BREVITY = 2.0
PAPER_MAX_EXTRA = 50  # the paper's output limit: source length + 50 tokens (section 6.1)
DEFAULT_BOS_ID = 2  # the WordTokenizer's order: <pad> <unk> <bos> <eos>
DEFAULT_EOS_ID = 3


REPEAT_RULES = ("auto", "bounded", "free")
SHORTLIST_RULES = ("on", "off")


@dataclass
class DecodingOptions(Options):
    """How to decode: the search, its limits and rules, and how sentences are batched. Every range is
    checked by `check()` (clearformer/options.py), so code and the command line refuse the same values."""

    beam: int = option(1, "--beam", "beam size (default 1: greedy decoding; the paper uses 4)", metavar="N",
                       at_least=1, at_most=MAX_BEAM)
    alpha: float = option(DEFAULT_ALPHA, "--alpha", f"beam search length penalty ((5+len)/6)^alpha "
                          f"(default {DEFAULT_ALPHA})", at_least=0.0, at_most=MAX_ALPHA)
    stop: str = option("current", "--early-stop", "when beam search stops a sentence: 'current' (default) once "
                       "no beam scored at the current length beats its best finished translation; 'bound' once "
                       "none can at any allowed length (exact; slower, slightly better BLEU)", choices=STOP_RULES)
    brevity: float = option(DEFAULT_BREVITY, "--brevity", f"penalty on ending a translation shorter than the "
                            f"training data's length ratio expects: -W * (expected - length)^2 / expected on <eos> "
                            f"(default {DEFAULT_BREVITY}; 0 = off)", metavar="W", at_least=0.0)
    placeholders: str = option("exact", "--placeholders", "'exact' (default): every placeholder piece of a "
                               "source (%%s, {0}, ...) comes out exactly as often as it went in, and no number the "
                               "source lacks; 'free': no constraint", choices=PLACEHOLDER_RULES)
    repeats: str = option("auto", "--repeats", "'bounded': no piece comes more than max(3, its longest run in the "
                          "source) times in a row, and no span of 2-8 pieces three times in a row unless the "
                          "source does (no runaway repetition to the length limit); 'free': no bound; "
                          "'auto' (default): bounded for runs that mask placeholders (every corpus run unless "
                          "--no-mask-placeholders), free for the others (the toy phrase set, imported models: "
                          "they decode as their own engines do)", choices=REPEAT_RULES)
    max_extra: int | None = option(None, "--max-extra", "stop at source length + N tokens (default: the run's own "
                                   "rule: + 50 as in the paper, or the length factor of the engine an imported "
                                   "model came from, 2.5 x the source for Firefox's)", metavar="N", at_least=0,
                                   at_most=MAX_NEW_TOKENS)
    # A fixed token budget instead of max_extra, and <eos> forbidden before min_length tokens (benchmarks).
    max_new: int | None = option(None, at_least=1, at_most=MAX_NEW_TOKENS)
    min_length: int = option(0, at_least=0, at_most=MAX_NEW_TOKENS)
    split: bool = option(True, "--whole", "translate an input of more than 25 words in one pass (default: "
                         "sentence by sentence, as the training data were cut)", inverted=True, action="store_true")
    batch_size: int = option(32, "--batch-size", "sentences per batch (default 32)", metavar="N", at_least=1,
                             at_most=MAX_BATCH_SIZE)
    shortlist: str = option("on", "--shortlist", "'on' (default): a run that has a lexical shortlist (Firefox's "
                            "models) scores only each sentence's candidate tokens, as its engine does; 'off': the "
                            "whole vocabulary", choices=SHORTLIST_RULES)
    use_cache: bool = True  # False: the whole prefix again every step (tests prove the cache changes nothing)
    with_scores: bool = True  # greedy: also sum the log-probabilities (a pass over the vocabulary per step)
    compile: str = option("auto", "--compile", "compile the decoder's one-token step with torch.compile: 'on', "
                          "or 'off'; 'graph': a static cache, replayed as a CUDA graph on a GPU "
                          "(generate/graphs.py); 'auto' (default) runs it eagerly (compiling did not pay on a "
                          "CPU: BENCHMARKS.md; 'graph' becomes the GPU default once measured there)",
                          choices=COMPILE_CHOICES)

    def describe(self) -> str:
        """One line for a report: the search and the rules that shape its output."""
        search = "greedy" if self.beam == 1 else f"beam {self.beam}, alpha {self.alpha}, early stop {self.stop}"
        whole = ", long inputs whole" if not self.split else ""
        return f"{search}, brevity {self.brevity}, placeholders {self.placeholders}{whole}"


@dataclass(frozen=True)
class SearchTokens:
    """The vocabulary and data facts a search reads (built by `search_tokens`).

    placeholder_ids: the pieces each source's copies of must come out exactly (empty: no constraint);
    length_ratio: target tokens per source token in the training pairs (0: unknown, no brevity penalty);
    source_eos: whether every source ends in <eos> (it is then not counted as a source token);
    repeat_bound: no piece more than max(3, its longest source run) times in a row (generate/constraints.py);
    shortlist: the run's lexical shortlist when the search uses it (generate/shortlist.py), else None;
    max_length_factor: the run's engine's output limit, factor x source tokens (0: the paper's + 50; generate/facts.py);
    owing: per sentence of one batch, whether its placeholder pieces must be copied (`Masked.owes_copies`:
    not where numerals stand in and the sentence had no placeholder); None: every sentence's.
    terms: per sentence of one batch, the glossary terms it owes (generate/glossary.py); None: no glossary.
    numeral_pieces: (id, starts a word, text, ends a word) of every piece that writes a digit (generate/constraints.py
    `digit_pieces`), where placeholders are exact (); numerals: per sentence of one batch, the numbers that are
    its own (none other may come out: `NumeralRuns`); None: no rule.
    stand_in_ids: per stand-in slot (tokenize/standins.py), the ids of its pieces; () without stand-ins.
    free: per sentence of one batch, the stand-in pieces that are its own numerals, not placeholders ("6" of
    "IPv6": the placeholder rule neither owes nor forbids them; the numeral rule governs them); neutral: per
    sentence, the placeholder pieces the placeholder rule counts (never a number); None: no sentence has either.
    final_marks: the pieces of sentence-final punctuation, before which an owed placeholder comes (where placeholders
    are exact; generate/constraints.py `final_mark_pieces`).
    """

    bos_id: int = DEFAULT_BOS_ID
    eos_id: int = DEFAULT_EOS_ID
    pad_id: int = 0
    placeholder_ids: tuple[int, ...] = ()
    length_ratio: float = 0.0
    source_eos: bool = False
    repeat_bound: bool = False
    shortlist: LexicalShortlist | None = None
    max_length_factor: float = 0.0
    owing: tuple[bool, ...] | None = None
    terms: TermBatch | None = None
    numeral_pieces: tuple[tuple[int, bool, str, bool], ...] = ()
    numerals: tuple[tuple[str, ...] | None, ...] | None = None
    stand_in_ids: tuple[frozenset[int], ...] = ()
    free: tuple[frozenset[int], ...] | None = None
    neutral: tuple[frozenset[int], ...] | None = None
    final_marks: tuple[int, ...] = ()

    def for_sources(self, masks: Sequence[Masked]) -> SearchTokens:
        """These facts for one batch of sources as `tokenize.mask_placeholders` read them (`owing`, `numerals`):
        each sentence's own, so that a sentence decodes as it would alone."""
        owing = tuple(masked.owes_copies for masked in masks)
        numerals = tuple(own_numerals(masked.text) for masked in masks) if self.numeral_pieces else None
        free = tuple(self.own_stand_ins(masked) for masked in masks)
        neutral = tuple(frozenset(self.placeholder_ids) - own if owes else frozenset()
                        for own, owes in zip(free, owing, strict=True))
        if all(owing) and self.owing is None and numerals is None and self.numerals is None and not any(free):
            return self
        return replace(self, owing=owing, numerals=numerals, free=free if any(free) else None, neutral=neutral)

    def own_stand_ins(self, masked: Masked) -> frozenset[int]:
        """The stand-in pieces that are a sentence's numerals, not its placeholders: every slot but those its
        placeholders were given (tokenize/standins.py `assign`: a slot skipped keeps its numeral)."""
        if not self.stand_in_ids or not masked.spelled:
            return frozenset()
        used = {slot for slot, original in enumerate(masked.originals)
                if not (slot < len(masked.spelled) and original == masked.spelled[slot])}
        return frozenset().union(*(ids for slot, ids in enumerate(self.stand_in_ids) if slot not in used))


def search_tokens(model, tokenizer=None, options: DecodingOptions | None = None,
                  facts: DecodingFacts = NO_FACTS) -> SearchTokens:
    """The one place that reads the tokenizer's special ids and the run's decoding facts (`facts`: the record
    loaded with the run, generate/facts.py; default none).

    Without a tokenizer, <bos> and <eos> are the WordTokenizer's (tests with random models).
    """
    config = model.config
    exact = tokenizer is not None and (options is None or options.placeholders == "exact")
    pieces = tuple(tokenizer.placeholder_ids) if exact else ()
    return SearchTokens(
        bos_id=DEFAULT_BOS_ID if tokenizer is None else tokenizer.bos_id,
        eos_id=DEFAULT_EOS_ID if tokenizer is None else tokenizer.eos_id,
        pad_id=config.pad_id,
        placeholder_ids=pieces,
        length_ratio=facts.length_ratio,
        source_eos=False if tokenizer is None else bool(tokenizer.source_eos),
        repeat_bound=repeat_bound(tokenizer, options),
        shortlist=None if options is not None and options.shortlist == "off" else facts.shortlist,
        max_length_factor=facts.max_length_factor,
        numeral_pieces=digit_pieces(tokenizer) if exact else (),
        stand_in_ids=stand_in_ids(tokenizer) if pieces else (),
        final_marks=final_mark_pieces(tokenizer) if pieces else (),
    )


def stand_in_ids(tokenizer) -> tuple[frozenset[int], ...]:
    """Per stand-in slot, the ids of its pieces ("▁1" and "1"), where numerals stand in (else ())."""
    stand_ins = tokenizer.stand_ins if tokenizer.mask_placeholders else None
    if stand_ins is None:
        return ()
    return tuple(frozenset(tokenizer.token_to_id(piece) for piece in forms if piece is not None)
                 for forms in zip(stand_ins.spaced, stand_ins.attached, strict=True))


def repeat_bound(tokenizer, options: DecodingOptions | None) -> bool:
    """--repeats: 'bounded', 'free', or 'auto': bounded for a run trained here that masks placeholders as its
    reserved tokens; free without a tokenizer, for the toy phrase set, and for a vocabulary made elsewhere
    (imported models and runs fine-tuned from them, whose placeholders numerals stand in for): they decode as
    their own engines do."""
    rule = "auto" if options is None else options.repeats
    if rule == "auto":
        return tokenizer is not None and tokenizer.mask_placeholders and tokenizer.stand_ins is None
    return rule == "bounded"
