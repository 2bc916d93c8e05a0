"""Explain a trained model translating one sentence: every intermediate of every generation step.

The source is encoded exactly as `translate` encodes it (`tokenize.encode_source`), and the
translation is `translate`'s own greedy decoder (`generate.greedy_decode`) run under a recorder:
the encoder once, then one decoder step per generated token with the key/value cache, each step
feeding only the newest token. So the walkthrough shows the numbers, and the words, that
`clearformer translate` produces; the recorder sees the very modules that train.
"""

from __future__ import annotations

import torch

from clearformer import trace
from clearformer.errors import UserError
from clearformer.explain.walkthrough import Walkthrough, build_walkthrough
from clearformer.generate.brevity import BrevityRule
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.translate import placeholder_ids
from clearformer.tokenize import encode_source
from clearformer.validation import shorten


def source_ids(tokenizer, sentence: str, max_len: int) -> list[int]:
    """The encoder input of `sentence`, as `translate` builds it, or a UserError for input no model can use."""
    if not sentence.strip():
        raise UserError("empty sentence: nothing to translate")
    ids = encode_source(tokenizer, sentence)
    words = [i for i in ids if i != tokenizer.eos_id]
    if not words:
        raise UserError("empty sentence: nothing to translate (no token left after tokenizing)")
    if all(i == tokenizer.unk_id for i in words):
        unknown = getattr(tokenizer, "unknown_words", lambda _: [])(sentence)
        raise UserError(f"every word of {shorten(repr(sentence))} is unknown to this model's vocabulary: "
                        f"{shorten(', '.join(unknown))}")
    if len(ids) > max_len:
        raise UserError(f"sentence has {len(ids)} tokens; this model takes at most {max_len}")
    return ids


def explain_translation(model, tokenizer, sentence: str, max_new_tokens: int | None = None,
                        top: int = 10) -> Walkthrough:
    """Greedy translation of `sentence` under a recorder -> the walkthrough of every step.

    `max_new_tokens` caps the generated tokens (<eos> included); by default the limit is
    `translate`'s (source length + 50, within the model's max_len)."""
    ids = source_ids(tokenizer, sentence, model.config.max_len)
    src = torch.tensor([ids], device=next(model.parameters()).device)
    was_training = model.training
    model.eval()
    try:
        with trace.Recorder() as recorder:
            decoded = greedy_decode(model, src, bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id,
                                    max_new=max_new_tokens, with_scores=False,
                                    placeholder_ids=placeholder_ids(tokenizer),
                                    brevity=BrevityRule.for_tokenizer(tokenizer))
    finally:
        model.train(was_training)
    generated = [tokenizer.bos_id] + decoded.tokens[0, : int(decoded.lengths[0])].tolist()
    labels = [tokenizer.id_to_token(i) for i in generated]
    # Step t feeds <bos> and the t tokens chosen before it.
    target_by_step: dict[int | None, list[str]] = {t: labels[: t + 1] for t in range(len(generated) - 1)}
    walk = build_walkthrough(recorder.records, f"Translating {sentence!r}", [tokenizer.id_to_token(i) for i in ids],
                             labels[:1], vocab=[tokenizer.id_to_token(i) for i in range(len(tokenizer))],
                             target_by_step=target_by_step, top=top)
    if not model.config.scale_attention:  # trained without the 1/sqrt(d_k) (`clearformer claims 2`)
        for step in walk.find(".scaled"):
            step.formula = "scaled = Q · Kᵀ  (this model has scale_attention=False: no division by √d_k)"
    walk.target_tokens = labels
    walk.result = tokenizer.decode(decoded.sequences()[0])
    return walk
