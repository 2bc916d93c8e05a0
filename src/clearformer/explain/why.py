"""Why did it say that: the logit lens, activation patching and attribution on a sentence, as JSON-ready dicts.

The one entry for the commands (`clearformer lens`, `patch`, `attribute`) and the server's routes: each
reads the source as `translate` does (`generate.source.check_source`), translates it with `translate`'s
own search, then runs the tool (`explain/lens.py`, `explain/patching.py`, `explain/attribution.py`).
"""

from __future__ import annotations

import torch

from clearformer.data.lm import prompt_ids
from clearformer.errors import UserError
from clearformer.explain.attribution import DEFAULT_STEPS, METHODS, alignments, attribute
from clearformer.explain.lens import lens_lm, lens_to_dict, lens_translation
from clearformer.explain.patching import activation_patching
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.options import DecodingOptions, SearchTokens, search_tokens
from clearformer.generate.source import check_source
from clearformer.generate.translator import decode_ids
from clearformer.model.layered import LayeredModel, model_kind
from clearformer.model.protocol import is_encoder_decoder
from clearformer.tokenize import mask_placeholders

MAX_STEPS = 1024  # integrated gradients' path points: more buys nothing the report can show


def is_language_model(model) -> bool:
    return not is_encoder_decoder(model)


def require_layers(model, tool: str) -> None:
    """The tools read a Transformer's layers: a model without them (the GRU baseline) is one line naming its kind,
    asked through the model's interface (model/layered.py)."""
    if not isinstance(model, LayeredModel):
        raise UserError(f"{tool} reads a Transformer's layers; this model is {model_kind(model)}")


def require_translation(model, tool: str) -> None:
    if is_language_model(model):
        raise UserError(f"{tool} needs a source sentence: this checkpoint is a decoder-only language model "
                        "(`clearformer lens` reads one)")
    require_layers(model, tool)


def source_and_output_ids(model, tokenizer, text: str, options: DecodingOptions,
                          facts: DecodingFacts = NO_FACTS) -> tuple[list[int], list[int]]:
    """(source ids as the model reads them, the translation's ids with <eos> last) by `translate`'s search (with
    the run's decoding `facts`, generate/facts.py)."""
    ids = check_source(tokenizer, text, model.config.max_len)
    model.eval()
    src = torch.tensor([ids], device=next(model.parameters()).device)
    output = decode_ids(model, src, options, sentence_tokens(model, tokenizer, options, text, facts))[0]
    return ids, [*output, tokenizer.eos_id]


def sentence_tokens(model, tokenizer, options: DecodingOptions, text: str,
                    facts: DecodingFacts = NO_FACTS) -> SearchTokens:
    """The search's facts for one sentence, as `translate` builds them for its batch."""
    masked = mask_placeholders(tokenizer, text, carry=True)
    return search_tokens(model, tokenizer, options, facts).for_sources([masked])


def labels(tokenizer, ids: list[int]) -> list[str]:
    return [tokenizer.id_to_token(i) for i in ids]


def lens_report(model, tokenizer, text: str, max_new_tokens: int = 20, facts: DecodingFacts = NO_FACTS) -> dict:
    """`clearformer lens TEXT`: {"result", "steps": [...]} (explain/lens.py); a language model continues TEXT. A
    translation is `translate`'s, by the run's decoding `facts` (here and in the two reports below)."""
    require_layers(model, "the lens")
    label = tokenizer.id_to_token
    if is_language_model(model):
        ids = prompt_ids(tokenizer, text)
        if len(ids) >= model.config.max_len:
            raise UserError(f"the text is {len(ids)} tokens; the model's context is {model.config.max_len}")
        steps = lens_lm(model, ids, max_new_tokens)
        return lens_to_dict(steps, label, tokenizer.decode(ids + [s.chosen for s in steps]))
    options = DecodingOptions()
    ids = check_source(tokenizer, text, model.config.max_len)
    steps = lens_translation(model, ids, options, sentence_tokens(model, tokenizer, options, text, facts))
    return lens_to_dict(steps, label, tokenizer.decode([s.chosen for s in steps if s.chosen != tokenizer.eos_id]))


def patch_report(model, tokenizer, clean: str, corrupted: str, facts: DecodingFacts = NO_FACTS) -> dict:
    """`clearformer patch CLEAN CORRUPTED`: {"clean", "corrupted", "metric", "points": [{"name", "restored"}]}."""
    require_translation(model, "patch")
    options = DecodingOptions()
    clean_ids, translation = source_and_output_ids(model, tokenizer, clean, options, facts)
    corrupted_ids = check_source(tokenizer, corrupted, model.config.max_len)
    m_clean, m_corrupted, points = activation_patching(model, clean_ids, corrupted_ids, translation,
                                                       tokenizer.bos_id)
    source = labels(tokenizer, clean_ids)
    return {"clean": clean, "corrupted": corrupted,
            "translation": tokenizer.decode(translation[:-1]),
            "source_tokens": source, "corrupted_tokens": labels(tokenizer, corrupted_ids),
            "target_tokens": labels(tokenizer, translation),
            "metric": "log p(clean translation | source), summed over its tokens, teacher-forced; "
                      "restored = (patched - corrupted) / (clean - corrupted)",
            "clean_score": m_clean, "corrupted_score": m_corrupted,
            "points": [{"name": p.name, "restored": r} for p, r in points]}


def check_method(method: str, steps: int) -> None:
    if method not in METHODS:
        raise UserError(f"--method {method!r}: choose one of {', '.join(METHODS)}")
    if not 1 <= steps <= MAX_STEPS:
        raise UserError(f"--steps must be between 1 and {MAX_STEPS}, not {steps}")


def attribute_report(model, tokenizer, text: str, method: str = METHODS[0], steps: int = DEFAULT_STEPS,
                     target: str | None = None, facts: DecodingFacts = NO_FACTS) -> dict:
    """`clearformer attribute TEXT`: per target token a score per source token, the Pharaoh alignments and,
    for integrated gradients, the completeness check. `target`: attribute this translation instead of the
    model's own (tokenized as the model's targets)."""
    require_translation(model, "attribute")
    check_method(method, steps)
    if target is None:
        ids, translation = source_and_output_ids(model, tokenizer, text, DecodingOptions(), facts)
    else:
        ids = check_source(tokenizer, text, model.config.max_len)
        translation = [*tokenizer.encode(target), tokenizer.eos_id]
        if len(translation) > model.config.max_len:
            raise UserError(f"--target is {len(translation)} tokens; the model's max_len is {model.config.max_len}")
    result = attribute(model, ids, translation, tokenizer.bos_id, method, steps)
    specials = {tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id}
    source_words = [i for i, token in enumerate(ids) if token not in specials]
    target_words = [j for j, token in enumerate(translation) if token not in specials]
    report = {"text": text, "translation": tokenizer.decode(translation[:-1]), "method": method,
              "source_tokens": labels(tokenizer, ids), "target_tokens": labels(tokenizer, translation),
              "scores": [[float(x) for x in row] for row in result.scores],
              "alignments": [f"{i}-{j}" for i, j in alignments(result.scores, source_words, target_words)]}
    if method == "integrated-gradients":
        report["baseline"] = "the source with every token embedding zero, positions kept"
        report["steps"] = result.steps
        report["completeness"] = {"sum": sum(result.sums), "difference": sum(result.differences),
                                  "per_target": [{"sum": s, "difference": d}
                                                 for s, d in zip(result.sums, result.differences, strict=True)]}
    return report
