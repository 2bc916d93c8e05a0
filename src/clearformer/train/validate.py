"""Validation during training: loss and perplexity on the validation split, BLEU of greedy translations."""

from __future__ import annotations

import torch

from clearformer.data.batching import Example, collate, make_batches
from clearformer.evaluate import score_corpus
from clearformer.generate import DecodingOptions, translate
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.train.step import TranslationLoss


@torch.no_grad()
def validation_loss(model, examples: list[Example], tokenizer, max_tokens: int, smoothing: float,
                    device: torch.device, autocast) -> tuple[float, float]:
    """(label-smoothed loss, nll) per target token over every validation example."""
    was_training = model.training
    model.eval()
    criterion = TranslationLoss(model, smoothing)
    total = nll_total = 0.0
    count = 0
    for indices in make_batches(examples, max_tokens):
        batch = collate([examples[i] for i in indices], tokenizer.pad_id, tokenizer.bos_id,
                        tokenizer.eos_id).to(device)
        with autocast():
            loss, nll, tokens = criterion(batch.src, batch.tgt_in, batch.tgt_out)
        total, nll_total, count = total + float(loss), nll_total + float(nll), count + tokens
    model.train(was_training)
    return total / max(count, 1), nll_total / max(count, 1)


def validation_bleu(model, tokenizer, pairs: list[tuple[str, str]], limit: int,
                    facts: DecodingFacts = NO_FACTS) -> float:
    """sacrebleu BLEU of greedy translations (the decoding module's cached search) of the first
    `limit` validation pairs."""
    chosen = pairs[:limit]
    hypotheses = translate(model, tokenizer, [source for source, _ in chosen], DecodingOptions(batch_size=64),
                           facts=facts)
    return score_corpus(hypotheses, [target for _, target in chosen]).bleu
