"""Glossary terms used: a decoding rule that puts each glossary term of a source into its translation.

A glossary (clearformer/glossary.py) says "file" -> "ficheiro". For each sentence, the terms its source holds
are planned as pieces (`plan_terms`): the target term as the tokenizer writes it mid-sentence ("▁ficheiro")
and capitalised at a sentence start ("▁Ficheiro"), and the pieces the model writes for the source term on
its own ("▁arquivo": its translation of the term alone, `triggers`). `GlossaryConstraint` then keeps, per
hypothesis, which terms are still owed and how far the one being written has got:

* where the model would write its own word for an owed term, the glossary's comes instead: the trigger
  pieces are forbidden and the term's first piece takes the best of their scores (so the term lands where
  the model translates it, not at the end; the variant is the capitalised one at a sentence start);
* where the term opens the source, the opening of the model's own rendering is a trigger too, whatever it is
  (`TermPieces.anchors`): a word written in pieces too short to trigger alone ("▁A" "dição" for "Adding") or
  an article ("O download" for "Downloading") would else be written, and the term added after it ("Adição
  Adicionando", "O Baixando": BENCHMARKS.md, "Trust: msgctxt"); mid-sentence such a piece is too common to
  mean the term ("a", "o", "de");
* once a hypothesis writes the first piece of an owed term (by itself or so), the term's other pieces are
  forced, one per step, until it is whole (a multi-piece term cannot be left half-written); a one-word term
  the model writes inflected ("primeira" for "primeiro", `glossary.inflected`) is used as well;
* <eos> waits while a term is owed: a hypothesis that would end, or has only room left for what it owes,
  writes an owed term first (as the placeholder constraint does, generate/constraints.py).

Beam search and greedy decoding apply the same rule (generate/rules.py); each beam keeps its own state, so
hypotheses that placed the term early compete with those that have not yet. The cost in BLEU and chrF is
measured in BENCHMARKS.md, "Glossary". The other way, masking the term in the source as a placeholder and
restoring the target after, was not built: a stand-in cannot agree with its sentence (no inflection, no article
chosen for it), which the rule here lets the model do. A term that could not be placed at all (the length limit
came first, or its target cannot be written with the vocabulary) is named by `glossary_notes`: a
`NoteKind.GLOSSARY_TERM_MISSING` note, never dropped in silence.

Under a recorder the rule emits `glossary.forced`, (rows,): the piece the glossary put at this step, -1 where
the model chose freely (explain/translation.py shows it per step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from clearformer.generate.result import Note, NoteKind
from clearformer.glossary import Glossary, Term, inflection_pattern
from clearformer.record import trace

SENTENCE_END = (".", "!", "?", ":", "…")  # after a piece ending so, the next word starts a sentence
PROMOTE_MARGIN = 2.0  # nats: an owed term's first piece this close to the best is taken (a first setting, not tuned)
MIN_TRIGGER_CHARS = 3  # a trigger is a word of the model's own rendering, not "o", "de", "le"


@dataclass(frozen=True)
class TermPieces:
    """One glossary term a sentence owes, as pieces: `variants[0]` mid-sentence, `variants[1]` at a sentence
    start (capitalised); `triggers`: the word-initial pieces of the model's own translation of the source term;
    `inflections`: pieces that write a one-word term inflected (`glossary.inflected`: "primeira" for
    "primeiro"), which the model may choose instead of the term as written."""

    term: Term
    variants: tuple[tuple[int, ...], tuple[int, ...]]
    triggers: tuple[int, ...] = ()
    inflections: tuple[int, ...] = ()  # word pieces that are the (one-word) term inflected: they satisfy it too
    # The first piece of the model's own rendering, whatever its length ("▁A" of "Adição", "▁O" of "O download"):
    # a trigger at the translation's first step only, kept in a sentence's plan only where the term opens the
    # source (`plan_terms`).
    anchors: tuple[int, ...] = ()


@dataclass(frozen=True)
class TermBatch:
    """The terms each sentence of a batch owes (`plans[i]`, one tuple per sentence; empty: none), and the
    pieces after which the next word starts a sentence (`sentence_ends`)."""

    plans: tuple[tuple[TermPieces, ...], ...]
    sentence_ends: tuple[int, ...] = ()

    def rows(self, indices: Sequence[int]) -> TermBatch:
        """The plans of sentences `indices` (one batch of the search)."""
        return TermBatch(tuple(self.plans[index] for index in indices), self.sentence_ends)


def capitalised(text: str) -> str:
    """The term as it starts a sentence: its first letter upper case ("marque-page" -> "Marque-page")."""
    return text[:1].upper() + text[1:]


def sentence_end_ids(tokenizer) -> tuple[int, ...]:
    """The pieces after which a new sentence starts (they end in . ! ? : or …)."""
    ends = []
    for index in range(len(tokenizer)):
        text = tokenizer.id_to_token(index)
        if text and text.rstrip().endswith(SENTENCE_END):
            ends.append(index)
    return tuple(ends)


def word_pieces(text: str, exclude: set[int], starts: dict[str, list[tuple[str, int]]]) -> tuple[int, ...]:
    """The word pieces that write a word of `text` of MIN_TRIGGER_CHARS letters or more, inflected or not, in any
    case ("Salvar": "▁salvar", "▁Salve", "▁salva", ...; `inflection_pieces`), but those in `exclude`."""
    found = []
    for word in text.split():
        word = word.strip(".,;:!?()[]{}\"'«»")
        if len(word) >= MIN_TRIGGER_CHARS and word.isalpha():
            found += [index for index in inflection_pieces(word, starts) if index not in exclude]
    return tuple(dict.fromkeys(found))


def word_starts(tokenizer) -> dict[str, list[tuple[str, int]]]:
    """The vocabulary's word-initial pieces of letters, lower-cased, by their first two letters."""
    starts: dict[str, list[tuple[str, int]]] = {}
    for index in range(len(tokenizer)):
        token = tokenizer.id_to_token(index)
        word = token.lstrip("▁")
        if (token.startswith("▁") or tokenizer.kind == "words") and word.isalpha():
            starts.setdefault(word[:2].lower(), []).append((word.lower(), index))
    return starts


def inflection_pieces(target: str, starts: dict[str, list[tuple[str, int]]]) -> tuple[int, ...]:
    """The word pieces that write a one-word `target` inflected (none for a term of several words)."""
    if len(target.split()) != 1 or not target.isalpha():
        return ()
    pattern = inflection_pattern(target)
    return tuple(index for word, index in starts.get(target[:2].lower(), ()) if pattern.fullmatch(word))


def term_pieces(tokenizer, term: Term, rendering: str | Sequence[str] = "",
                starts: dict[str, list[tuple[str, int]]] | None = None) -> TermPieces | None:
    """`term` as pieces (None when the vocabulary cannot write its target: it is then reported, not forced);
    `rendering`: the model's own translations of the source term (as written, capitalised), whose words become the
    triggers and whose first pieces the anchors; `starts`: `word_starts(tokenizer)`, for the term's inflections."""
    renderings = (rendering,) if isinstance(rendering, str) else tuple(rendering)
    rendering = " ".join(renderings)
    written, initial = (tuple(tokenizer.encode(text)) for text in (term.target, capitalised(term.target)))
    if not written or tokenizer.unk_id in written:
        return None
    if not initial or tokenizer.unk_id in initial:  # a vocabulary without the capital: as written everywhere
        initial = written
    inflections = inflection_pieces(term.target, starts or {})
    own = set(written) | set(initial) | set(inflections)
    triggers = word_pieces(rendering, own, starts or {}) + first_pieces(tokenizer, rendering, own)
    openings = [tokenizer.encode(text)[:1] for one in renderings for text in (one.strip(), capitalised(one.strip()))
                if text]
    anchors = [ids[0] for ids in openings if ids and ids[0] not in own and ids[0] != tokenizer.unk_id]
    return TermPieces(term, (written, initial), tuple(dict.fromkeys(triggers)), inflections,
                      tuple(dict.fromkeys(anchors)))


def first_pieces(tokenizer, text: str, exclude: set[int]) -> tuple[int, ...]:
    """The first piece of each word of `text` of MIN_TRIGGER_CHARS letters or more, as written, lower-cased and
    capitalised, where it starts a word and holds MIN_TRIGGER_CHARS letters itself: a word the vocabulary writes
    in several pieces ("▁Verifica" "ção", the capitalised "Verificação" of "Seeding": issue 48) triggers the term
    too, not only the words that are one piece (`word_pieces`)."""
    found = []
    for word in text.split():
        word = word.strip(".,;:!?()[]{}\"'«»")
        if len(word) < MIN_TRIGGER_CHARS or not word.isalpha():
            continue
        for variant in dict.fromkeys((word, word.lower(), capitalised(word))):
            ids = tokenizer.encode(variant)
            piece = tokenizer.id_to_token(ids[0]) if ids else ""
            letters = piece.lstrip("▁")
            if (piece.startswith("▁") or tokenizer.kind == "words") and len(letters) >= MIN_TRIGGER_CHARS \
                    and letters.isalpha() and ids[0] not in exclude and ids[0] != tokenizer.unk_id:
                found.append(ids[0])
    return tuple(found)


def plan_terms(tokenizer, glossary: Glossary, texts: Sequence[str],
               renderings: dict[str, str | tuple[str, ...]]) -> list[tuple[TermPieces, ...]]:
    """The terms each text owes, as pieces; `renderings[source term]`: the model's own translations of it. A term
    keeps its anchors only in a text it opens (nothing but spaces and symbols before it)."""
    planned: dict[Term, TermPieces | None] = {}
    starts = word_starts(tokenizer)
    plans = []
    for text in texts:
        plan = []
        matches = glossary.find(text)
        opening = matches[0].term if matches and not any(c.isalnum() for c in text[:matches[0].start]) else None
        for term in dict.fromkeys(match.term for match in matches):
            if term not in planned:
                planned[term] = term_pieces(tokenizer, term, renderings.get(term.source, ""), starts)
            if planned[term] is not None:
                plan.append(planned[term] if term == opening else replace(planned[term], anchors=()))
        plans.append(tuple(plan))
    return plans


def term_batch(tokenizer, glossary: Glossary | None, texts: Sequence[str],
               render: Callable[[list[str]], list[str]]) -> TermBatch | None:
    """The glossary terms each of `texts` owes (`TermBatch.plans[i]` for text i), or None without a glossary or
    a term. `render(sources)`: the translator's own translations (greedy) of the source terms alone, as
    written and capitalised, which tell where the model would write its own word for a term (the triggers)."""
    if glossary is None or not len(glossary):
        return None
    found = list(dict.fromkeys(term for text in texts for term in glossary.terms_in(text)))
    if not found:
        return None
    rendered = render([variant for term in found for variant in (term.source, capitalised(term.source))])
    renderings = {term.source: (rendered[2 * i], rendered[2 * i + 1]) for i, term in enumerate(found)}
    plans = plan_terms(tokenizer, glossary, texts, renderings)
    return TermBatch(tuple(plans), sentence_end_ids(tokenizer)) if any(plans) else None


def glossary_notes(glossary: Glossary | None, source: str, translation: str) -> tuple[Note, ...]:
    """A GLOSSARY_TERM_MISSING note for each term of `source` whose target `translation` lacks."""
    if glossary is None:
        return ()
    return tuple(Note(NoteKind.GLOSSARY_TERM_MISSING,
                      f"glossary term not used: {term.source!r} -> {term.target!r}")
                 for term in glossary.missing(source, translation))


class GlossaryConstraint:
    """Per hypothesis: which of its sentence's terms are still owed, and the term being written.

    For B sentences owing at most K terms of at most L pieces with at most T triggers, A anchors and F inflections:
    pieces (rows, K, 2, L) and lengths (rows, K, 2) of both variants, triggers (rows, K, T), anchors (rows, K, A)
    and inflections (rows, K, F), padded with -1; owed (rows, K);
    active, variant, pos (rows,): the term being written (-1: none), which variant, how many of its pieces
    are out; starts (rows,): the next word starts a sentence; opening (rows,): nothing written yet (the anchors
    trigger). `select` follows the hypotheses as
    `PlaceholderConstraint.select` does.
    """

    def __init__(self, batch: TermBatch, eos_id: int, limits: torch.Tensor | None = None,
                 device: torch.device | str = "cpu") -> None:
        plans = batch.plans
        k = max(len(plan) for plan in plans)
        width = max(len(variant) for plan in plans for term in plan for variant in term.variants)
        t = max([len(term.triggers) for plan in plans for term in plan] + [1])
        f = max([len(term.inflections) for plan in plans for term in plan] + [1])
        a = max([len(term.anchors) for plan in plans for term in plan] + [1])
        anchors = torch.full((len(plans), k, a), -1, dtype=torch.long)
        inflections = torch.full((len(plans), k, f), -1, dtype=torch.long)
        pieces = torch.full((len(plans), k, 2, width), -1, dtype=torch.long)
        lengths = torch.zeros((len(plans), k, 2), dtype=torch.long)
        triggers = torch.full((len(plans), k, t), -1, dtype=torch.long)
        owed = torch.zeros((len(plans), k), dtype=torch.bool)
        for row, plan in enumerate(plans):
            for j, term in enumerate(plan):
                owed[row, j] = True
                triggers[row, j, : len(term.triggers)] = torch.tensor(term.triggers, dtype=torch.long)
                inflections[row, j, : len(term.inflections)] = torch.tensor(term.inflections, dtype=torch.long)
                anchors[row, j, : len(term.anchors)] = torch.tensor(term.anchors, dtype=torch.long)
                for v, variant in enumerate(term.variants):
                    pieces[row, j, v, : len(variant)] = torch.tensor(variant, dtype=torch.long)
                    lengths[row, j, v] = len(variant)
        self.pieces, self.lengths = pieces.to(device), lengths.to(device)
        self.triggers, self.owed = triggers.to(device), owed.to(device)
        self.inflections, self.anchors = inflections.to(device), anchors.to(device)
        self.opening = torch.ones((len(plans),), dtype=torch.bool, device=device)
        self.active = torch.full((len(plans),), -1, dtype=torch.long, device=device)
        self.variant = torch.zeros_like(self.active)
        self.pos = torch.zeros_like(self.active)
        self.starts = torch.ones_like(self.active, dtype=torch.bool)
        self.ends = torch.tensor(batch.sentence_ends, dtype=torch.long, device=device)
        self.eos_id = eos_id
        self.limits = limits

    @classmethod
    def for_batch(cls, batch: TermBatch | None, eos_id: int, limits: torch.Tensor | None = None,
                  device: torch.device | str = "cpu") -> GlossaryConstraint | None:
        """The rule for a batch, or None when no sentence owes a term (decoding then pays nothing)."""
        if batch is None or not any(batch.plans):
            return None
        return cls(batch, eos_id, limits, device)

    def firsts(self) -> torch.Tensor:
        """(rows, K): the first piece of each term in the variant the next word takes (-1: none)."""
        rows = torch.arange(self.pieces.shape[0], device=self.pieces.device)
        return self.pieces[rows, :, self.starts.long(), 0]

    def __call__(self, logits: torch.Tensor, t: int) -> torch.Tensor:
        """Apply the rule to logits (rows, vocab) of step t, in place (see the module docstring)."""
        forced = torch.full((logits.shape[0],), -1, dtype=torch.long, device=logits.device)
        writing = self.active >= 0
        owing = self.owed.any(dim=1) & ~writing
        if bool(owing.any()):
            triggers = self.triggers
            if bool(self.opening.any()):
                triggers = torch.cat([triggers, self.anchors.masked_fill(~self.opening[:, None, None], -1)], dim=2)
            self.give_way(logits, owing, forced, triggers)
            ending = logits.argmax(dim=-1) == self.eos_id
            if self.limits is not None:
                owed_pieces = (self.lengths[:, :, 0] * self.owed).sum(dim=1)
                ending |= owed_pieces >= self.limits - t
            logits[owing, self.eos_id] = float("-inf")
            first = self.firsts().masked_fill(~self.owed, -1)
            for row in (owing & ending).nonzero()[:, 0].tolist():  # must start an owed term now
                choices = first[row][first[row] >= 0]
                best = choices[logits[row, choices].argmax()]
                forced[row] = best
        if bool(writing.any()):
            at = writing.nonzero()[:, 0]
            forced[at] = self.pieces[at, self.active[at], self.variant[at], self.pos[at]]
        chosen = (forced >= 0).nonzero()[:, 0]
        if chosen.numel():
            kept = logits[chosen, forced[chosen]]
            kept = torch.where(torch.isfinite(kept), kept, torch.zeros_like(kept))
            logits[chosen] = float("-inf")
            logits[chosen, forced[chosen]] = kept
        if trace.active() is not None:
            trace.emit("glossary", "forced", forced)
        return logits

    def give_way(self, logits: torch.Tensor, owing: torch.Tensor, forced: torch.Tensor,
                 triggers: torch.Tensor) -> None:
        """Where a row owing a term would write the model's own word for it (one of `triggers` (rows, K, T')),
        the term's first piece takes the trigger's score and the trigger is forbidden; `forced` notes the rows
        where that substitution is the best choice."""
        rows_n, k, t = triggers.shape
        live = (triggers >= 0) & self.owed[:, :, None] & owing[:, None, None]
        best_before = logits.argmax(dim=-1)
        index = triggers.clamp(min=0).reshape(rows_n, k * t)
        scores = logits.gather(1, index).reshape(rows_n, k, t).masked_fill(~live, float("-inf"))
        best_trigger = scores.amax(dim=2)  # (rows, K)
        r, j, s = live.nonzero(as_tuple=True)
        logits[r, triggers[r, j, s]] = float("-inf")
        first = self.firsts()
        # Near the best (within PROMOTE_MARGIN nats): the model holds the term itself plausible here.
        owed_first = (first >= 0) & self.owed & owing[:, None]
        near = logits.gather(1, first.clamp(min=0)) >= logits.amax(dim=1, keepdim=True) - PROMOTE_MARGIN
        best_trigger = torch.where(owed_first & near, torch.maximum(best_trigger, logits.amax(dim=1, keepdim=True)),
                                   best_trigger)
        raise_at = (best_trigger > float("-inf")) & owed_first
        r, j = raise_at.nonzero(as_tuple=True)
        if r.numel():
            pieces = first[r, j]
            logits[r, pieces] = torch.maximum(logits[r, pieces], best_trigger[r, j])
            took = logits[r].argmax(dim=1) == pieces  # the substitution decides this step
            forced[r[took & (pieces != best_before[r])]] = pieces[took & (pieces != best_before[r])]

    def chose(self, tokens: torch.Tensor) -> None:
        """Follow the chosen tokens (rows,): a term's piece moves it on; an owed term's first piece starts it."""
        writing = self.active >= 0
        if bool(writing.any()):
            at = writing.nonzero()[:, 0]
            expected = self.pieces[at, self.active[at], self.variant[at], self.pos[at]]
            on = expected == tokens[at]
            self.pos[at] = torch.where(on, self.pos[at] + 1, torch.zeros_like(self.pos[at]))
            whole = on & (self.pos[at] >= self.lengths[at, self.active[at], self.variant[at]])
            done = at[whole]
            self.owed[done, self.active[done]] = False
            self.active[at[whole | ~on]] = -1
        idle = (self.active < 0) & ~writing & self.owed.any(dim=1)
        if bool(idle.any()):  # the model wrote the term inflected: it is used
            self.owed &= ~((self.inflections == tokens[:, None, None]).any(dim=2) & idle[:, None])
        if bool(idle.any()):
            hits = (self.pieces[:, :, :, 0] == tokens[:, None, None]) & self.owed[:, :, None] & idle[:, None, None]
            for row in hits.flatten(1).any(dim=1).nonzero()[:, 0].tolist():
                j, v = (int(x) for x in hits[row].nonzero()[0])
                if int(self.lengths[row, j, v]) == 1:
                    self.owed[row, j] = False
                else:
                    self.active[row], self.variant[row], self.pos[row] = j, v, 1
        self.starts = torch.isin(tokens, self.ends)
        self.opening = torch.zeros_like(self.opening)

    def select(self, rows: torch.Tensor) -> None:
        """Keep hypotheses `rows` (as `DecoderState.select`)."""
        for name in ("pieces", "lengths", "triggers", "anchors", "inflections", "owed", "active", "variant", "pos",
                     "starts", "opening"):
            setattr(self, name, getattr(self, name).index_select(0, rows))
        if self.limits is not None:
            self.limits = self.limits.index_select(0, rows)
