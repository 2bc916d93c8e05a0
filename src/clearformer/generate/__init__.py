"""Decoding: greedy and beam search over a key/value cache, and `translate` from text to text.

    greedy_decode(model, src_ids)            -> Decoded (tokens, lengths, scores)
    beam_search(model, src_ids, beam, alpha) -> Decoded
    translate(model, tokenizer, sentences)   -> list[str]
"""

from clearformer.generate.beam import beam_search, length_penalty
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.state import Decoded, DecoderState, max_new_tokens
from clearformer.generate.translate import decode_ids, encode_source, pad_batch, translate, translate_ids

__all__ = ["Decoded", "DecoderState", "beam_search", "decode_ids", "encode_source", "greedy_decode",
           "length_penalty", "max_new_tokens", "pad_batch", "translate", "translate_ids"]
