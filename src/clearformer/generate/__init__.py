"""Decoding and sampling: greedy and beam search, `translate` from text to text, LM sampling, and the
fast inference engine they run on (`engine.py`: one-token steps over the model's own parameters).

    greedy_decode(model, src_ids)            -> Decoded (tokens, lengths, scores)
    beam_search(model, src_ids, beam, alpha) -> Decoded
    translate(model, tokenizer, sentences)   -> list[str]
    generate(lm, prompt_ids, n, settings)    -> list[int]   (sampling.py)

While a `trace.Recorder` is active every search runs the model's own modules instead of the engine
(the explain view records the real path); the tokens are the same.
"""

from clearformer.generate.beam import beam_search, length_penalty
from clearformer.generate.engine import SETTINGS, Engine, EngineSettings
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.sampling import SamplingSettings, generate
from clearformer.generate.state import Decoded, DecoderState, max_new_tokens
from clearformer.generate.translate import decode_ids, encode_source, pad_batch, translate, translate_ids

__all__ = ["SETTINGS", "Decoded", "DecoderState", "Engine", "EngineSettings", "SamplingSettings", "beam_search",
           "decode_ids", "encode_source", "generate", "greedy_decode", "length_penalty", "max_new_tokens",
           "pad_batch", "translate", "translate_ids"]
