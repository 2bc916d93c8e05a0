"""`explain` with beam search and with what-if interventions: the walkthrough of the translation `translate`
gives, under the same options, plus the search's tree (`explain/beam.py`) and, when the model was changed,
the original translation beside the new one.

Beam search runs through `generate.translator.decode_ids`, which calls `beam_search` as `translate --beam K`
does for every batch, under a recorder; the walkthrough's steps are those of the hypothesis that won (its row
of every recorded tensor, `follow_chosen`), so the page shows the numbers that chose each of its words.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from rich.console import Console
from rich.table import Table
from rich.text import Text

from clearformer.errors import UserError
from clearformer.explain.beam import follow_chosen, read_beam_tree
from clearformer.explain.translation import explain_translation, model_formulas
from clearformer.explain.walkthrough import Walkthrough, build_walkthrough
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.options import DecodingOptions, search_tokens
from clearformer.generate.source import Pieces, prepare_sources
from clearformer.generate.translator import PyTorchTranslator, decode_ids, join_pieces
from clearformer.glossary import Glossary
from clearformer.limits import MAX_BEAM_SHOWN
from clearformer.record import trace
from clearformer.tokenize import Masked, mask_placeholders, restore_placeholders


def check_explainable(options: DecodingOptions) -> DecodingOptions:
    """The search options `explain` can show: checked, and a beam no wider than MAX_BEAM_SHOWN (a wider
    tree is no longer readable, on the page or in the terminal)."""
    options.check()
    if options.beam > MAX_BEAM_SHOWN:
        raise UserError(f"--beam must be at most {MAX_BEAM_SHOWN} to explain, not {options.beam}")
    return options


@dataclass
class SearchWalkthrough(Walkthrough):
    """A translation's walkthrough with its search tree (`beam`, beam search only), the interventions it ran
    under (`ablated`, their names) and, with interventions, the translation without them (`original`)."""

    beam: dict | None = None
    ablated: list[str] = field(default_factory=list)
    original: dict | None = None
    sentence: str = ""  # what was translated (the page reruns it with other interventions)
    # An input cut into sentences (more than 25 words, as `translate` cuts it): each piece and its translation,
    # the number (from 1) of the one shown, and `result` the whole input's translation, `translate`'s.
    pieces: list[dict] = field(default_factory=list)
    piece: int = 1
    unknown: list[str] = field(default_factory=list)  # the words the model did not know (translated as <unk>)


def run_search(model, tokenizer, src: torch.Tensor, options: DecodingOptions, masked: Masked,
               facts: DecodingFacts = NO_FACTS) -> list[int]:
    """`translate`'s own call for one sentence src (1, src_len), read as `masked` (greedy or beam search), with
    the run's decoding `facts` (generate/facts.py) -> its output ids."""
    return decode_ids(model, src, options, search_tokens(model, tokenizer, options, facts).for_sources([masked]))[0]


def each_piece(model, tokenizer, pieces: Pieces, options: DecodingOptions,
               facts: DecodingFacts = NO_FACTS) -> list[str]:
    """`translate` of each piece of one input on its own (placeholders restored), not joined."""
    whole = Pieces.whole(pieces.sources, pieces.masks)
    return [result.text for result in PyTorchTranslator(model, tokenizer, facts=facts).translate(whole, options)]


def explain_beam(model, tokenizer, sentence: str, options: DecodingOptions, top: int = 10,
                 facts: DecodingFacts = NO_FACTS) -> SearchWalkthrough:
    """Beam search of `sentence` under a recorder -> the winner's walkthrough with the whole tree."""
    pieces = prepare_sources(tokenizer, [sentence], model.config.max_len, split=False, allow_empty=False)
    ids = pieces.sources[0]
    src = torch.tensor([ids], device=next(model.parameters()).device)
    was_training = model.training
    model.eval()
    try:
        with trace.Recorder() as recorder:
            output = run_search(model, tokenizer, src, options, pieces.masks[0], facts)
    finally:
        model.train(was_training)
    vocab = [tokenizer.id_to_token(i) for i in range(len(tokenizer))]
    source_tokens = [tokenizer.id_to_token(i) for i in ids]
    tree = read_beam_tree(recorder.records, vocab, source_tokens, tokenizer.eos_id, options.beam, options.alpha,
                          options.stop)
    masked = mask_placeholders(tokenizer, sentence, carry=True)  # as `translate` reads it (prepare_sources)
    tree.result = restore_placeholders(masked, tokenizer.decode(output))
    if masked.originals:  # the beam view shows what the model read and wrote, and what comes back
        tree.masked_source, tree.masked_result = masked.text, tokenizer.decode(output)
    generated = [tokenizer.bos_id] + (tree.ranking[0].tokens if tree.ranking else [])
    labels = [tokenizer.id_to_token(i) for i in generated]
    walk = build_walkthrough(follow_chosen(recorder.records, tree), f"Translating {sentence!r} (beam {options.beam})",
                             source_tokens, labels[:1], vocab=vocab,
                             target_by_step={t: labels[: t + 1] for t in range(len(generated) - 1)}, top=top)
    model_formulas(walk, model.config)
    for step in walk.find("chosen"):  # chosen by the search, not by argmax
        step.formula = (f"next = the word of the best of the {options.beam} hypotheses kept "
                        f"(beam search: score = log p / lp(n))")
        step.explanation = ("Beam search keeps the best hypotheses by score at every step; this is the word the "
                            "finally chosen hypothesis took here, which need not be this step's most probable one.")
    return SearchWalkthrough(**{**walk.__dict__, "target_tokens": labels, "result": tree.result,
                                "masked_source": tree.masked_source, "masked_result": tree.masked_result},
                             beam=tree.to_dict())


def explain_search(model, tokenizer, sentence: str, options: DecodingOptions, top: int = 10,
                   interventions: trace.Interventions | None = None, piece: int = 1,
                   max_new: Callable[[int], int] | None = None,
                   glossary: Glossary | None = None, facts: DecodingFacts = NO_FACTS) -> SearchWalkthrough:
    """The walkthrough of `translate`'s search (greedy or beam) on `sentence`, under `interventions` if given;
    with interventions, `original` holds the translation without them.

    `sentence` is read as `translate` reads it (`prepare_sources`): an input of more than 25 words is cut into
    its sentences; the walkthrough shows sentence `piece` (from 1), its title says which, `pieces` lists every
    sentence with its translation and `result` is the whole input's translation, `translate`'s own.
    `max_new(source length)` caps the tokens the shown sentence generates (the server's bound on a
    walkthrough's size; the whole translation keeps `translate`'s limits). A `glossary` (greedy decoding) is
    applied as `translate --glossary` applies it, the steps it decided in `walk.glossary_forced`. `facts`: the
    run's decoding facts (generate/facts.py), loaded with it, as `translate` decodes by them."""
    check_explainable(options)
    if glossary is not None and options.beam > 1:
        raise UserError("explain --glossary shows greedy decoding, step by step; give no --beam with it")
    pieces = prepare_sources(tokenizer, [sentence], model.config.max_len, options.split, allow_empty=False)
    total = len(pieces.texts)
    if not 1 <= piece <= total:
        raise UserError(f"--piece {piece}: this input has {total} sentence{'s' if total > 1 else ''} "
                        f"(choose 1 to {total})")
    text = pieces.texts[piece - 1]
    shown = options if max_new is None else options.but(max_new=max_new(len(pieces.sources[piece - 1])))
    changes = interventions or trace.Interventions([])
    with changes:
        if options.beam > 1:
            walk = explain_beam(model, tokenizer, text, shown, top, facts)
        else:
            walk = SearchWalkthrough(**explain_translation(model, tokenizer, text, shown, top=top,
                                                           glossary=glossary, facts=facts).__dict__)
        translations = each_piece(model, tokenizer, pieces, options, facts) if total > 1 else [walk.result]
    walk.ablated = changes.names()
    walk.sentence = text
    walk.unknown = pieces.unknown.get(0, [])
    if total > 1:
        walk.pieces = [{"text": t, "translation": out} for t, out in zip(pieces.texts, translations, strict=True)]
        walk.piece = piece
        walk.title += f" (sentence {piece} of {total} of your text)"
        walk.result = join_pieces(translations, pieces.owners, 1)[0]
    if walk.ablated:
        model.eval()
        with torch.inference_mode():
            output = run_search(model, tokenizer, torch.tensor([pieces.sources[piece - 1]],
                                                               device=next(model.parameters()).device), shown,
                                pieces.masks[piece - 1], facts)
            plain = (pieces.restore([tokenizer.decode(output)]) if total == 1 else
                     each_piece(model, tokenizer, pieces, options, facts))
        walk.original = {"result": join_pieces(plain, pieces.owners, 1)[0],
                         "target_tokens": [tokenizer.id_to_token(i) for i in [tokenizer.bos_id, *output]]}
        walk.title += " with --ablate " + " ".join(walk.ablated)
    return walk


# ----------------------------------------------------------------------------- the terminal


def render_beam(tree: dict, decimals: int = 3, width: int | None = None, color: bool | None = None) -> str:
    """`explain --beam K` in the terminal: one compact table per step (the hypotheses, their best candidates
    and what became of each), then the finished hypotheses ranked by score."""
    buffer = io.StringIO()
    width = width or min(Console().width, 120)  # the terminal's
    console = Console(file=buffer, width=width, force_terminal=color, color_system="auto" if color else None,
                      highlight=False)
    number = lambda x: "-∞" if x is None else f"{x:.{decimals}f}"  # noqa: E731
    console.print(Text(f"Beam search, beam {tree['beam']}, length penalty alpha {tree['alpha']}: "
                       f"score = log p / lp(n), lp(n) = ((5 + n) / 6)^alpha", style="bold underline"))
    fates = {"continues": "→ goes on", "finishes": "✓ finishes", "stopped": "· search stopped", "pruned": ""}
    for step in tree["steps"]:
        # counted from 1, as every view counts generation steps (docs/learn.md)
        table = Table(title=f"step {step['step'] + 1}  (lp({step['step'] + 1}) = {step['penalty']:.4f})",
                      title_justify="left", title_style="bold magenta", pad_edge=False, show_edge=False)
        for name, justify in (("hypothesis", "left"), ("sum", "right"), ("candidate", "left"), ("log p", "right"),
                              ("new sum", "right"), ("", "left")):
            table.add_column(name, justify=justify, no_wrap=name != "")
        for hypothesis in step["hypotheses"]:
            shown = [c for c in hypothesis["candidates"] if c["fate"] != "pruned" or c["rule"]][:2 * tree["beam"]]
            shown = shown or hypothesis["candidates"][:1]
            words = " ".join(hypothesis["words"]) or "<bos>"
            mark = "★ " if hypothesis["chosen"] else ""
            for index, candidate in enumerate(shown):
                note = " ".join(x for x in (fates[candidate["fate"]], candidate["rule"]) if x)
                table.add_row(mark + words if index == 0 else "", number(hypothesis["total"]) if index == 0 else "",
                              candidate["word"], number(candidate["logprob"]), number(candidate["total"]), note)
        console.print(table)
        for done in step["finished"]:
            console.print(f"  finished: {' '.join(done['words'])}  {number(done['logprob'])} / "
                          f"{done['penalty']:.4f} = {number(done['score'])}  ({done['why']})")
        if step["stopped"]:
            console.print(Text(f"  stop: {step['stopped']}", style="yellow"))
    console.rule(Text("finished hypotheses, best first", style="bold"))
    for rank, done in enumerate(tree["ranking"], start=1):
        console.print(f"{rank}. {number(done['score'])}  {' '.join(done['words'])}" + ("   ← the translation"
                                                                                       if done["best"] else ""))
    if tree.get("masked_source"):
        console.print(Text(f"the model read: {tree['masked_source']}\nit wrote:       {tree['masked_result']}"))
    console.print(Text(f"result: {tree['result']}", style="bold green"), soft_wrap=True)  # one line, for scripts
    return buffer.getvalue()
