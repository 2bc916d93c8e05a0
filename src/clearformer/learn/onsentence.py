"""What lessons 12 and 13 run on the learner's sentence besides the recorded walkthrough, from the run that recorded
it (`LearnerRun.checkpoint`): the question and the table the lesson prints (learn/extras.py) read the same result.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

BEAM = 2  # lesson 12's beam: `clearformer explain SENTENCE --beam 2`


@functools.lru_cache(maxsize=4)
def beam_walk(sentence: str, run: Path):
    """`clearformer explain SENTENCE --beam 2` (translate's own alpha and brevity penalty) on the toy model:
    the question of lesson 12 and its table read the same search."""
    from clearformer.explain.search import explain_beam
    from clearformer.generate.options import DecodingOptions
    from clearformer.load import load_model

    model, tokenizer, _ = load_model(run)
    return explain_beam(model, tokenizer, sentence, DecodingOptions(beam=BEAM))


@functools.lru_cache(maxsize=4)
def lm_scores(sentence: str, run: Path) -> tuple[list[str], list[list[float]]]:
    """(tokens, scaled scores) of head 0 in layer 0 of a decoder-only model (model/lm.py: one layer of the toy
    translator's width, random weights of seed 0: the lessons train no language model) reading <bos> + the
    sentence: Q·Kᵀ/√d_k for every pair, before the causal mask."""
    from clearformer.config import preset
    from clearformer.load import load_model
    from clearformer.model.lm import LanguageModel
    from clearformer.record import trace
    from clearformer.tokenize import encode_source

    toy, tokenizer, _ = load_model(run)
    ids = [tokenizer.bos_id] + encode_source(tokenizer, sentence)
    config = preset("lm-tiny", tgt_vocab_size=len(tokenizer), d_model=toy.config.d_model, n_heads=toy.config.n_heads,
                    n_decoder_layers=1)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = LanguageModel(config).eval()
    with torch.no_grad(), trace.Recorder() as recorder:
        model(torch.tensor([ids]))
    scaled = recorder.get("decoder.layers.0.self_attention.scaled")[0, 0].double().tolist()
    return [tokenizer.id_to_token(i) for i in ids], scaled
