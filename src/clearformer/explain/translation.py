"""Explain a trained model translating one sentence: every intermediate of every generation step.

The encoder runs once; then, like the seeds' "Step 1: generate Je ... Step 4: generate <END>", each
step feeds the decoder everything generated so far (<bos> Je t' ...), so its masked self-attention
shows the whole lower triangle and its cross-attention the whole alignment, and records the output
distribution and the greedy choice. The recorder sees the very modules that train.
"""

from __future__ import annotations

import torch

from clearformer import trace
from clearformer.errors import UserError
from clearformer.explain.walkthrough import Walkthrough, build_walkthrough


def source_ids(tokenizer, sentence: str, max_len: int) -> list[int]:
    """Token ids of a source sentence plus <eos>, or a UserError for input no model can use."""
    if not sentence.strip():
        raise UserError("empty sentence: nothing to translate")
    ids = tokenizer.encode(sentence)
    unknown = getattr(tokenizer, "unknown_words", lambda _: [])(sentence)
    if ids and all(i == tokenizer.unk_id for i in ids):
        raise UserError(f"every word of {sentence!r} is unknown to this model's vocabulary: {unknown}")
    if len(ids) + 1 > max_len:
        raise UserError(f"sentence has {len(ids) + 1} tokens (with <eos>); this model takes at most {max_len}")
    return ids + [tokenizer.eos_id]


def explain_translation(model, tokenizer, sentence: str, max_new_tokens: int | None = None,
                        top: int = 10) -> Walkthrough:
    """Greedy translation of `sentence` under a recorder -> the walkthrough of every step."""
    ids = source_ids(tokenizer, sentence, model.config.max_len)
    source_labels = [tokenizer.id_to_token(i) for i in ids]
    limit = max_new_tokens or min(model.config.max_len - 1, len(ids) + 50)
    device = next(model.parameters()).device
    src = torch.tensor([ids], device=device)
    generated = [tokenizer.bos_id]
    target_by_step: dict[int | None, list[str]] = {}
    model.eval()
    with trace.Recorder() as recorder, torch.no_grad():
        memory, src_mask = model.encode(src)
        for step in range(limit):
            recorder.step = step
            target_by_step[step] = [tokenizer.id_to_token(i) for i in generated]
            hidden = model.decode(torch.tensor([generated], device=device), memory, src_mask)
            logits = model.project(hidden)[:, -1]
            chosen = int(logits.argmax(-1))
            trace.emit("generate", "chosen", torch.tensor([chosen]))
            generated.append(chosen)
            if chosen == tokenizer.eos_id:
                break
    translation = tokenizer.decode(generated[1:])
    walk = build_walkthrough(recorder.records, f"Translating {sentence!r}", source_labels,
                             target_by_step[0], vocab=[tokenizer.id_to_token(i) for i in range(len(tokenizer))],
                             target_by_step=target_by_step, top=top)
    walk.target_tokens = [tokenizer.id_to_token(i) for i in generated]
    walk.result = translation
    return walk
