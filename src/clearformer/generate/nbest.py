"""The beam's n-best list: each input's distinct translations, best first, as LibreTranslate's `alternatives`.

    translate_nbest(model, tokenizer, pieces, options, count) -> [["best", "second", ...], ...]

Beam search (generate/beam.py) keeps `beam` hypotheses; every one that ends in <eos> is a finished
hypothesis with its length-normalised score, and `FinishedHypotheses` lists them all where the search
itself keeps only the best. Ranked by that score, decoded, placeholders restored: translations that read
the same (two token sequences can spell one text) count once. The beam is at least `count` + 1 wide, so
the search can finish that many; it may finish fewer (early stopping, a short sentence), and then fewer
come back: never a padding copy. An input cut into sentences (`prepare_sources`' split) gets the k-th
alternative of one sentence at a time, the others at their best, so each alternative differs from the best
in one place.
"""

from __future__ import annotations

from clearformer.generate.beam import FinishedHypotheses, beam_search
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.options import DecodingOptions, search_tokens
from clearformer.generate.source import Pieces
from clearformer.generate.translator import pad_batch
from clearformer.tokenize import restore_placeholders


def piece_nbest(model, tokenizer, pieces: Pieces, options: DecodingOptions, count: int,
                facts: DecodingFacts = NO_FACTS) -> list[list[str]]:
    """Each piece's distinct translations, best first, at most `count` + 1 (placeholders restored; "" for an
    empty piece)."""
    options = options.but(beam=max(options.beam, count + 1), with_scores=False)
    tokens = search_tokens(model, tokenizer, options, facts)
    device = next(model.parameters()).device
    ranked: list[list[str]] = [[""] for _ in pieces.sources]
    todo = [index for index, ids in enumerate(pieces.sources) if ids]
    for start in range(0, len(todo), options.batch_size):
        chunk = todo[start: start + options.batch_size]
        src_ids = pad_batch([pieces.sources[index] for index in chunk], tokens.pad_id, device)
        hypotheses = FinishedHypotheses(len(chunk), tokens.eos_id)
        best = beam_search(model, src_ids, options, tokens.for_sources([pieces.masks[i] for i in chunk]),
                           hypotheses).sequences()
        for row, index in enumerate(chunk):
            texts = [restore_placeholders(pieces.masks[index], tokenizer.decode(ids))
                     for ids in [best[row], *hypotheses.best_first(row)]]
            ranked[index] = list(dict.fromkeys(texts))[: count + 1]
    return ranked


def translate_nbest(model, tokenizer, pieces: Pieces, options: DecodingOptions, count: int,
                    facts: DecodingFacts = NO_FACTS) -> list[list[str]]:
    """Each input's distinct translations, best first: its translation, then at most `count` alternatives
    (see the module docstring), by the run's decoding `facts`."""
    per_piece = piece_nbest(model, tokenizer, pieces, options, count, facts)
    out = []
    for index in range(pieces.count):
        positions = pieces.of(index)
        best = [per_piece[p][0] for p in positions]
        texts = [" ".join(part for part in best if part)]
        for position_index, position in enumerate(positions):
            for other in per_piece[position][1:]:
                parts = best[:position_index] + [other] + best[position_index + 1:]
                texts.append(" ".join(part for part in parts if part))
        out.append(list(dict.fromkeys(texts))[: count + 1])
    return out
