"""Explain a trained model translating one sentence: every intermediate of every generation step.

The source is checked and encoded exactly as `translate` does (`generate.source.prepare_sources`; a
paragraph is cut into its sentences by `explain.search.explain_search`, which calls this per sentence), and
the translation is `translate`'s own search (`greedy_decode`, or `beam_search` with options.beam > 1)
run under a recorder: the encoder once, then one step of the model's own decoder per generated token
with the model's cache, each step feeding only the newest token. So the walkthrough shows the
numbers, and the words, that `clearformer translate` produces; the recorder sees the very modules
that train.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from clearformer.explain.walkthrough import Walkthrough, build_walkthrough, position_formula
from clearformer.generate.beam import beam_search
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.glossary import term_batch
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.options import DecodingOptions, search_tokens
from clearformer.generate.source import prepare_sources
from clearformer.generate.translator import PyTorchTranslator
from clearformer.glossary import Glossary
from clearformer.record import trace
from clearformer.tokenize import mask_placeholders, restore_placeholders


def explain_translation(model, tokenizer, sentence: str, options: DecodingOptions | None = None,
                        top: int = 10, glossary: Glossary | None = None,
                        facts: DecodingFacts = NO_FACTS) -> Walkthrough:
    """Translation of `sentence` with `options` (default: greedy) under a recorder -> the walkthrough
    of every step.

    `options.max_new` caps the generated tokens (<eos> included); by default the limit is
    `translate`'s (source length + max_extra, within the model's max_len). With a `glossary`, its terms are
    written as `translate --glossary` writes them, and `walk.glossary_forced` lists the steps where a term
    decided the token (`glossary_steps`). `facts`: the run's decoding facts (generate/facts.py: `translate`'s
    brevity rule and length limit), default none."""
    options = (options or DecodingOptions()).but(with_scores=False)
    pieces = prepare_sources(tokenizer, [sentence], model.config.max_len, split=False, allow_empty=False)
    ids = pieces.sources[0]  # one sentence
    tokens = with_terms(model, tokenizer, search_tokens(model, tokenizer, options, facts).for_sources(pieces.masks),
                        glossary, pieces.texts, options, facts)
    src = torch.tensor([ids], device=next(model.parameters()).device)
    was_training = model.training
    model.eval()
    try:
        with trace.Recorder() as recorder:
            search = greedy_decode if options.beam == 1 else beam_search
            decoded = search(model, src, options, tokens)
    finally:
        model.train(was_training)
    generated = [tokenizer.bos_id] + decoded.tokens[0, : int(decoded.lengths[0])].tolist()
    labels = [tokenizer.id_to_token(i) for i in generated]
    # Step t feeds <bos> and the t tokens chosen before it.
    target_by_step: dict[int | None, list[str]] = {t: labels[: t + 1] for t in range(len(generated) - 1)}
    walk = build_walkthrough(recorder.records, f"Translating {sentence!r}", [tokenizer.id_to_token(i) for i in ids],
                             labels[:1], vocab=[tokenizer.id_to_token(i) for i in range(len(tokenizer))],
                             target_by_step=target_by_step, top=top)
    model_formulas(walk, model.config)
    walk.target_tokens = labels
    walk.glossary_forced = glossary_steps(recorder.records, tokenizer)
    set_result(walk, tokenizer, sentence, tokenizer.decode(decoded.sequences()[0]))
    return walk


def with_terms(model, tokenizer, tokens, glossary: Glossary | None, texts, options: DecodingOptions,
               facts: DecodingFacts = NO_FACTS):
    """The search facts with the glossary terms each text owes (generate/glossary.py), as `translate` plans them."""
    if glossary is None:
        return tokens
    translator = PyTorchTranslator(model, tokenizer, facts=facts)
    terms = term_batch(tokenizer, glossary, texts, lambda sources: [
        t.text for t in translator.translate(translator.read(sources, False, False), options.but(beam=1))])
    return tokens if terms is None else replace(tokens, terms=terms)


def glossary_steps(records, tokenizer) -> list[dict]:
    """Where the glossary rule decided the token of the shown hypothesis: [{"step", "token"}], from the
    `glossary.forced` records (generate/glossary.py; greedy: one row)."""
    steps = []
    for record in records:
        if record.name == "glossary.forced" and record.value.numel() and int(record.value[0]) >= 0:
            steps.append({"step": record.step, "token": tokenizer.id_to_token(int(record.value[0]))})
    return steps


def model_formulas(walk, config) -> None:
    """Formulas that depend on the model's config, where it is not the paper's: the positions of Marian's sinusoid
    (Firefox's students), and scores left unscaled (`clearformer claims 2` trains without the 1/sqrt(d_k))."""
    positions = position_formula(config)
    for step in walk.find(".PE") if positions else ():
        step.formula = positions
    if not config.scale_attention:
        for step in walk.find(".scaled"):
            step.formula = "scaled = Q · Kᵀ  (this model has scale_attention=False: no division by √d_k)"


def set_result(walk, tokenizer, sentence: str, decoded: str) -> None:
    """walk.result: the translation as `translate` returns it (placeholders restored); where the run
    masks placeholders, also the sentence the model read and the translation it wrote."""
    masked = mask_placeholders(tokenizer, sentence)
    walk.result = restore_placeholders(masked, decoded)
    if masked.originals:
        walk.masked_source, walk.masked_result = masked.text, decoded
