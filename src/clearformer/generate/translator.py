"""The one translator every front calls: a run's model and tokenizer, loaded once, behind one protocol.

    translator = PyTorchTranslator(model, tokenizer)          (or clearformer.translator.load_translator(RUN))
    translator.translate(["I love you"], DecodingOptions(beam=4))   -> [Translation("Je t'aime")]

`translate`, `translate --po`, `serve` (the walkthrough page and the LibreTranslate API), `evaluate`, the
lessons and the Python API (`clearformer.translate`) all hold a `Translator` and call its `translate`:
inputs are read by the one input path (`read`, `generate.source.prepare_sources`), decoded by the engine,
and each input comes back as one `generate.result.Translation` (its text, and `Note`s of what a check found).

Two engines fulfil the protocol: `PyTorchTranslator` (here: clearformer's own search over the model's own
decoder) and `CTranslate2Translator` (interop/ct2_engine.py: the run exported for CTranslate2). What differs
between them is said by the engine itself, never by a command comparing engine names: which decoding options
it takes (`decoding`) and which settings it refuses (`check_settings`: --quantize, --threads, --ablate), both
asked of the engine's class before any work.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Protocol

import torch

from clearformer.errors import UserError
from clearformer.generate import checks, graphs
from clearformer.generate.beam import beam_search
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.glossary import TermBatch, glossary_notes, term_batch
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.int8 import quantize_int8
from clearformer.generate.layout import for_decoding
from clearformer.generate.options import DecodingOptions, SearchTokens, search_tokens
from clearformer.generate.result import Note, NoteKind, Translation
from clearformer.generate.shortlist import use_shortlist_output
from clearformer.generate.source import Pieces, prepare_sources
from clearformer.glossary import Glossary
from clearformer.limits import MAX_THREADS
from clearformer.options import check_value

Progress = Callable[[int], None]


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int,
              device: torch.device | str = "cpu") -> torch.Tensor:
    """Lists of ids -> (batch, longest) int64, right-padded with pad_id."""
    width = max((len(s) for s in sequences), default=0)
    batch = torch.full((len(sequences), max(width, 1)), pad_id, dtype=torch.long)
    for row, ids in enumerate(sequences):
        batch[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return batch.to(device)


def decode_ids(model, src_ids: torch.Tensor, options: DecodingOptions, tokens: SearchTokens) -> list[list[int]]:
    """Greedy (options.beam == 1) or beam search over one padded batch -> one list of output ids per sentence
    (`explain` runs one sentence through it, as `translate` runs a batch)."""
    search = greedy_decode if options.beam == 1 else beam_search
    return search(model, src_ids, options, tokens).sequences()


def join_pieces(translations: Sequence[str], owners: Sequence[int], count: int) -> list[str]:
    """The pieces' translations joined back into one translation per input (a space between sentences)."""
    joined: list[list[str]] = [[] for _ in range(count)]
    for text, owner in zip(translations, owners, strict=True):
        if text:
            joined[owner].append(text)
    return [" ".join(parts) for parts in joined]


def per_input_progress(progress: Progress | None, inputs: int, pieces: int) -> Progress | None:
    """A progress callback counting pieces -> one counting inputs (in proportion)."""
    if progress is None or inputs == pieces:
        return progress
    done = {"pieces": 0, "reported": 0}

    def report(n: int) -> None:
        done["pieces"] += n
        now = done["pieces"] * inputs // pieces
        if now > done["reported"]:
            progress(now - done["reported"])
            done["reported"] = now

    return report


@dataclass(frozen=True)
class EngineSettings:
    """How an engine runs, from the command line: `quantize` ("none" or "int8": int8 linear layers, clearformer's
    own (generate/int8.py) or CTranslate2's),
    CPU `threads` (None: the library's own choice) and `ablate`, the what-if changes to the model while it
    runs (--ablate: explain/interventions.py; only clearformer's own decoder takes them)."""

    quantize: str = "none"
    threads: int | None = None
    ablate: tuple[str, ...] = ()


DEFAULT_SETTINGS = EngineSettings()


class Rater(Protocol):
    """What reads a translation's confidence back after the search (clearformer.quality.Confidence): given the
    model, the search's facts, the pieces read, each piece's output ids (without <eos>) and the records, it
    returns the records with their `confidence` and `words`."""

    def rate(self, model, tokenizer, tokens: SearchTokens, pieces: Pieces, searched: Sequence[list[int]],
             translations: list[Translation]) -> list[Translation]: ...


class Translator(Protocol):
    """What every front calls. `model` and `tokenizer` are the run's (the tokenizer: text <-> ids); `label`
    names the engine in a report ("pytorch", "ctranslate2 int8")."""

    model: object
    tokenizer: object
    label: str
    described: str  # what a report adds after the decoding options (", engine ctranslate2 (int8)")
    enforces_glossary: ClassVar[bool]  # `translate`'s glossary written by the decoding, or only noted

    @classmethod
    def check_settings(cls, settings: EngineSettings) -> None: ...

    @classmethod
    def decoding(cls, options: DecodingOptions, given: set[str] | None = None) -> DecodingOptions: ...

    @classmethod
    def open(cls, model, tokenizer, directory, settings: EngineSettings = DEFAULT_SETTINGS,
             said: Callable[[str], None] | None = None, facts: DecodingFacts = NO_FACTS) -> Translator:
        """The engine for a run loaded (clearformer/translator.py `load_run`): its model, tokenizer, folder and
        decoding facts (decoding.json, generate/facts.py)."""

    def read(self, texts: Sequence[str], split: bool = True, check: bool = True,
             where: Callable[[int], str | None] | None = None, warn: Callable[[str], None] | None = None,
             unreadable: str = "raise") -> Pieces: ...

    def translate(self, inputs: Sequence[str] | Pieces, options: DecodingOptions | None = None,
                  progress: Progress | None = None, confidence: Rater | None = None,
                  glossary: Glossary | TermBatch | None = None) -> list[Translation]: ...


class Reading:
    """What both engines share: reading inputs (the one input path) and the translations as records."""

    model: object
    tokenizer: object

    def read(self, texts: Sequence[str], split: bool = True, check: bool = True,
             where: Callable[[int], str | None] | None = None, warn: Callable[[str], None] | None = None,
             unreadable: str = "raise") -> Pieces:
        """`texts` -> their `Pieces` (generate/source.py `prepare_sources`): each checked unless `check` is off;
        with `unreadable="note"` an input the model cannot read (only unknown words, too long) is not refused
        but left out, its reason kept in `Pieces.unreadable` (it translates to "" with an UNREADABLE note)."""
        max_len = self.model.config.max_len
        if unreadable != "note":
            return prepare_sources(self.tokenizer, texts, max_len, split, check, where, warn)
        parts, reasons = [], {}
        for index, text in enumerate(texts):
            named = (lambda _, index=index: where(index)) if where is not None else None
            try:
                parts.append(prepare_sources(self.tokenizer, [text], max_len, split, check, named, warn))
            except UserError as error:
                reasons[index] = str(error)
                parts.append(Pieces(count=1))
        merged = Pieces.merged(parts)
        merged.unreadable = reasons
        return merged

    def pieces_of(self, inputs: Sequence[str] | Pieces, options: DecodingOptions) -> Pieces:
        return inputs if isinstance(inputs, Pieces) else self.read(inputs, options.split)


def records(pieces: Pieces, texts: Sequence[str], glossary: Glossary | TermBatch | None = None,
            forced: Sequence[bool] | None = None, retried: dict[int, Translation] | None = None) -> list[Translation]:
    """One `Translation` per input of `pieces` from its pieces' translated texts (placeholders restored), with
    what the post-check found (generate/checks.py; `forced[i]`: the search put a placeholder of piece i where
    the model would have ended), an UNREADABLE note for an input the model could not read, and with a
    `glossary` a GLOSSARY_TERM_MISSING note for each term of a piece's source its translation lacks; `retried`:
    piece -> its translation made again sentence by sentence (its text and its sentences' notes stand)."""
    retried = retried or {}
    restored = pieces.restore(texts)
    for index, result in retried.items():
        restored[index] = result.text
    results = checks.translations(pieces.texts, pieces.owners, pieces.count, restored, pieces.masks, forced,
                                  {index: result.notes for index, result in retried.items()})
    notes: list[tuple[Note, ...]] = [(Note(NoteKind.UNREADABLE, pieces.unreadable[index]),)
                                     if index in pieces.unreadable else () for index in range(pieces.count)]
    if isinstance(glossary, Glossary):
        for source, text, owner in zip(pieces.texts, restored, pieces.owners, strict=True):
            notes[owner] += glossary_notes(glossary, source, text)
    return [result.noted(*notes[index]) for index, result in enumerate(results)]


def decoding_model(model, shortlist, quantize: str = "none", said: Callable[[str], None] | None = None):
    """The model as this engine decodes it, its layers swapped once, here, where it is opened (gpt-fast's
    `convert_for_runtime`), never the caller's model changed: with a lexical shortlist the output projection
    computes only the candidates' rows (generate/shortlist.py `ShortlistOutput`, greedy text: the same tokens),
    and with quantize "int8" the layers `quantize_int8` chooses are int8 (generate/int8.py: the output projection
    when it is not a slice, and every layer whose file shipped int8 integers), on a copy of the model. Where that
    leaves no layer to turn (a shortlist's float slice over float-trained layers, e.g. a fine-tuned student), `said`
    is told so: the run then decodes in float32, and the user asked for int8."""
    if quantize == "int8":
        if next(model.parameters()).device.type != "cpu":
            raise UserError("--quantize int8 decodes on the CPU (torch's int8 product); leave out --device")
        model = copy.deepcopy(model)
    if shortlist is not None:
        if quantize != "int8":  # share every parameter, own the module tree: the caller's keeps its projection
            model = copy.copy(model)
            model._modules = dict(model._modules)
        use_shortlist_output(model)
    if quantize == "int8" and quantize_int8(model).layers == 0 and said is not None:
        said("--quantize int8: no layer of this run turns int8 (its output projection is the shortlist's float "
             "slice, its other layers were trained in float: generate/int8.py); it decodes in float32")
    return model


def check_threads(threads: int | None) -> None:
    check_value("--threads", threads, at_least=1, at_most=MAX_THREADS)


class PyTorchTranslator(Reading):
    """clearformer's own decoder: the model's search (greedy or beam) over the model's own layers and cache."""

    name: ClassVar[str] = "pytorch"
    enforces_glossary: ClassVar[bool] = True  # its decoding writes the glossary's terms (generate/glossary.py)

    def __init__(self, model, tokenizer, settings: EngineSettings = DEFAULT_SETTINGS,
                 facts: DecodingFacts = NO_FACTS) -> None:
        # The model as decoding runs it, made once (generate/layout.py: a copy sharing the weights; the caller's
        # `model` is not changed); the run's decoding facts, the immutable record loaded with the run
        # (generate/facts.py; default none: no brevity rule, the paper's length limit, no shortlist).
        self.model, self.tokenizer, self.settings, self.facts = for_decoding(model), tokenizer, settings, facts
        # The static step of `--compile graph` (generate/graphs.py), built once here over this one model; each
        # search begins it afresh. None where the model's attention keeps the eager step (`graphs.supported`).
        self.graph = graphs.GraphStep(self.model) if graphs.supported(self.model) else None
        self.label = self.name if settings.quantize == "none" else f"{self.name} {settings.quantize}"
        # what a report adds after the decoding options: nothing for the default engine
        self.described = "" if settings.quantize == "none" else f", int8 linear layers ({settings.quantize})"

    @classmethod
    def check_settings(cls, settings: EngineSettings) -> None:
        if settings.quantize not in ("none", "int8"):
            raise UserError(f"--quantize must be none or int8, not {settings.quantize!r}")
        if settings.quantize == "int8" and settings.ablate:
            raise UserError("--ablate switches parts of the float model off; it does not apply to --quantize int8")
        check_threads(settings.threads)

    @classmethod
    def decoding(cls, options: DecodingOptions, given: set[str] | None = None) -> DecodingOptions:
        """The options this engine decodes by: the user's, checked (every one is honoured)."""
        return options.check()

    @classmethod
    def open(cls, model, tokenizer, directory, settings: EngineSettings = DEFAULT_SETTINGS,
             said: Callable[[str], None] | None = None, facts: DecodingFacts = NO_FACTS) -> PyTorchTranslator:
        """The engine for a loaded run (`directory`: the protocol's, unused here; `said`: told what --quantize int8
        could not do); `settings.threads` given to torch here, for every command alike (`translate --po --threads N`
        too)."""
        cls.check_settings(settings)
        if settings.threads is not None:
            import torch

            torch.set_num_threads(settings.threads)
        # The layout first (a copy sharing the weights), then the shortlist's slice and int8 on it.
        return cls(decoding_model(for_decoding(model), facts.shortlist, settings.quantize, said), tokenizer, settings,
                   facts)

    def translate(self, inputs: Sequence[str] | Pieces, options: DecodingOptions | None = None,
                  progress: Progress | None = None, confidence: Rater | None = None,
                  glossary: Glossary | TermBatch | None = None) -> list[Translation]:
        """One `Translation` per input (texts, read here, or `Pieces` already read by `read`).

        The pieces are sorted longest first (each batch holds pieces of similar length: little padding), each
        batch goes to the search itself (greedy_decode or beam_search: nothing between a command and the model's
        decoder but these frames: tests/generate/test_short_path.py), and the translations come back in the
        inputs' order, placeholders restored and an input's sentences joined; an empty piece translates to "".
        `progress(n)` is told of the inputs done after each batch. With `confidence` (clearformer.quality), each
        record comes back with its confidence and its words', read back from the ids the search chose. With a
        `glossary` each piece writes the target of every glossary term its source holds (generate/glossary.py), and
        a term that could not be placed is a GLOSSARY_TERM_MISSING note; a `TermBatch` gives the terms already
        planned per piece (the API).
        """
        # Text needs no scores: greedy skips its pass over the vocabulary per step.
        options = (options or DecodingOptions()).check().but(with_scores=False)
        pieces = self.pieces_of(inputs, options)
        model = self.model
        tokens = search_tokens(model, self.tokenizer, options, self.facts)
        terms = glossary if isinstance(glossary, TermBatch) else term_batch(
            self.tokenizer, glossary, pieces.texts,
            lambda sources: [t.text for t in self.translate(self.read(sources, False, False), options.but(beam=1))])
        search = greedy_decode if options.beam == 1 else beam_search
        device = next(model.parameters()).device
        progress = per_input_progress(progress, pieces.count, len(pieces.sources))
        texts = [""] * len(pieces.sources)
        searched: list[list[int]] = [[] for _ in pieces.sources]
        forced = [False] * len(pieces.sources)  # a placeholder the search put where the model ended
        todo = sorted((item for item in enumerate(pieces.sources) if item[1]), key=lambda item: -len(item[1]))
        if progress is not None and len(todo) < len(pieces.sources):
            progress(len(pieces.sources) - len(todo))
        # Decoding runs in eval mode (no dropout); a model that is in it already (every loaded run) is not walked
        # twice more to set what is set: on Firefox's student the two walks were a measurable share of one
        # sentence's translation (BENCHMARKS.md, "Firefox's en-pt student ...", the fourth pass's notes).
        was_training = model.training
        switched = any(module.training for module in model.modules())
        if switched:
            model.eval()
        try:
            for start in range(0, len(todo), options.batch_size):
                chunk = todo[start: start + options.batch_size]
                src_ids = pad_batch([ids for _, ids in chunk], tokens.pad_id, device)
                # each sentence's own facts: its translation does not depend on its batch (issue 48)
                batch_tokens = tokens.for_sources([pieces.masks[index] for index, _ in chunk])
                if terms is not None:
                    batch_tokens = replace(batch_tokens, terms=terms.rows([index for index, _ in chunk]))
                decoded = search(model, src_ids, options, batch_tokens, graph=self.graph)
                for (index, _), ids, placed in zip(chunk, decoded.sequences(), decoded.forced_list(), strict=True):
                    texts[index], forced[index], searched[index] = self.tokenizer.decode(ids), placed, ids
                if progress is not None:
                    progress(len(chunk))
        finally:
            if switched:
                model.train(was_training)
        found = records(pieces, texts, glossary, forced, self.sentence_by_sentence(pieces, texts, options, glossary,
                                                                                 searched))
        if confidence is not None:
            return confidence.rate(model, self.tokenizer, tokens, pieces, searched, found)
        return found

    def sentence_by_sentence(self, pieces: Pieces, texts: list[str], options: DecodingOptions,
                             glossary: Glossary | TermBatch | None, searched: list[list[int]],
                             ) -> dict[int, Translation]:
        """The pieces whose translation dropped a sentence of their source (generate/checks.py `dropped_sentences`),
        translated again sentence by sentence: cut as a long input is (`prepare_sources`, every sentence its
        piece) and translated as every input is (`translate`). Kept, as piece index -> its `Translation` (the
        sentences' translations joined, their notes), where that no longer drops a sentence; elsewhere the first
        translation and its note stay. A kept piece's ids in `searched` become its sentences' (what a confidence
        rating reads back)."""
        restored = pieces.restore(texts)
        dropped = [index for index, (source, text) in enumerate(zip(pieces.texts, restored, strict=True))
                   if text and checks.dropped_sentences(source, text)]
        if not dropped:
            return {}
        again = prepare_sources(self.tokenizer, [pieces.texts[index] for index in dropped], self.model.config.max_len,
                                check=False, words=0)
        ids = KeptIds()
        planned = glossary if isinstance(glossary, Glossary) else None  # a TermBatch was planned per first piece
        retried = self.translate(again, options, confidence=ids, glossary=planned)
        kept = {}
        for number, (index, result) in enumerate(zip(dropped, retried, strict=True)):
            parts = again.of(number)
            if len(parts) > 1 and not checks.dropped_sentences(pieces.texts[index], result.text):
                kept[index] = result
                searched[index] = [token for part in parts for token in ids.searched[part]]
        return kept


class KeptIds:
    """A `Rater` that rates nothing: it keeps the ids the search chose for each piece (`searched`)."""

    searched: Sequence[list[int]] = ()

    def rate(self, model, tokenizer, tokens: SearchTokens, pieces: Pieces, searched: Sequence[list[int]],
             translations: list[Translation]) -> list[Translation]:
        self.searched = searched
        return translations
