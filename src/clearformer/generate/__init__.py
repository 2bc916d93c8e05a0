"""Decoding and sampling: greedy and beam search, `translate` from text to text, LM sampling.

    options = DecodingOptions(beam=4)                      (options.py: every decoding choice)
    greedy_decode(model, src_ids, options, tokens)   -> Decoded (tokens, lengths, scores)
    beam_search(model, src_ids, options, tokens)     -> Decoded
    translate(model, tokenizer, sentences, options)  -> list[str]
    PyTorchTranslator(model, tokenizer).translate(sentences, options) -> list[Translation]   (translator.py)
    generate(lm, prompt_ids, n, settings)            -> list[int]   (sampling.py)

Every search runs the model's own decoder (`model.decode`, `DecoderLayer.forward`, the attention
modules) one token at a time with the model's cache (`model/cache.py`), called by the search itself
(`compiled.py` may compile that decoder, decided once per search); both searches apply the same decoding
rules by one call (`rules.py`, in the shape of Transformers' logits processors), and `layout.py` gives the
model's linear layers their decoding layout. Under a `trace.Recorder` the same code runs and every
intermediate is recorded.
"""

from clearformer.generate.beam import beam_search, length_penalty
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.options import DecodingOptions, SearchTokens, search_tokens
from clearformer.generate.sampling import SamplingOptions, generate
from clearformer.generate.state import Decoded, DecoderState, max_new_tokens
from clearformer.generate.translate import translate
from clearformer.generate.translator import PyTorchTranslator, Translator, decode_ids, pad_batch
from clearformer.tokenize import encode_source

__all__ = ["Decoded", "DecoderState", "DecodingOptions", "SamplingOptions", "SearchTokens", "beam_search",
           "decode_ids", "encode_source", "generate", "greedy_decode", "length_penalty", "max_new_tokens",
           "pad_batch", "PyTorchTranslator", "search_tokens", "translate", "Translator"]
