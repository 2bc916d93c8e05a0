"""The contracts parts meet through (issue 37): the tokenizer and model protocols every class fulfils (and no
code probes with getattr/hasattr instead), and hook names checked against the model's points, as
TransformerLens refuses a name its model has no HookPoint for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from clearformer.config import ModelConfig, preset
from clearformer.explain.interventions import hook_points, model_hooks
from clearformer.model.build import build_model
from clearformer.model.lm import LanguageModel
from clearformer.model.protocol import DecoderOnly, EncoderDecoder, is_encoder_decoder
from clearformer.record import trace
from clearformer.tokenize.bytebpe import ByteLevelBPETokenizer
from clearformer.tokenize.marianmt import MarianMTTokenizer
from clearformer.tokenize.protocol import Tokenizer
from clearformer.tokenize.subword import SentencePieceTokenizer
from clearformer.tokenize.words import WordTokenizer

SOURCE = Path(__file__).resolve().parents[2] / "src" / "clearformer"
SENTENCES = ["the cat sleeps", "the dog runs", "a cat and a dog", "the cat runs to the dog"] * 20


def translation_model(**fields):
    return build_model(preset("toy-translate", src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2, d_ff=32,
                              n_encoder_layers=1, n_decoder_layers=1, **fields))


def language_model():
    return build_model(preset("lm-tiny", tgt_vocab_size=20, d_model=16, n_heads=2, d_ff=32, max_len=16))


def test_every_tokenizer_fulfils_the_protocol():
    words = WordTokenizer.build(SENTENCES)
    pieces = SentencePieceTokenizer.train(SENTENCES, vocab_size=300)
    for tokenizer in (words, pieces):
        assert isinstance(tokenizer, Tokenizer), type(tokenizer).__name__
        assert tokenizer.placeholder_ids == () and tokenizer.unknown_words("the cat") == []
    members = [name for name in vars(Tokenizer) if not name.startswith("_") or name == "__len__"]
    members += list(Tokenizer.__annotations__)
    for cls in (WordTokenizer, SentencePieceTokenizer, MarianMTTokenizer, ByteLevelBPETokenizer):
        instance_fields = {"pad_id", "unk_id", "bos_id", "eos_id"}  # set from the vocabulary by __init__
        missing = [name for name in members if name not in instance_fields and not hasattr(cls, name)]
        assert missing == [], f"{cls.__name__} lacks {missing}"


def test_models_say_what_they_are_by_protocol():
    recurrent = build_model(ModelConfig(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_encoder_layers=1,
                                        n_decoder_layers=1, architecture="rnn"))
    transformer, lm = translation_model(), language_model()
    for model in (transformer, recurrent):
        assert isinstance(model, EncoderDecoder) and is_encoder_decoder(model) and not isinstance(model, DecoderOnly)
    assert isinstance(lm, LanguageModel) and isinstance(lm, DecoderOnly) and not is_encoder_decoder(lm)


def test_no_code_probes_a_tokenizer_or_a_model_for_what_it_is():
    probe = re.compile(r"\b(?:get|has)attr\((?:tokenizer|model)\s*,")
    found = [f"{path.relative_to(SOURCE)}:{number}: {line.strip()}"
             for path in sorted(SOURCE.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
             if probe.search(line)]
    assert found == []


def test_a_misspelled_hook_name_is_an_error_listing_the_nearest_names():
    model = translation_model()
    src = torch.tensor([[4, 5, 6]])
    seen = []
    with trace.Hooks({"decoder.layers.0.cross_attention.weights": lambda value, point: seen.append(point.name)}):
        model(src, src)
    assert seen == ["decoder.layers.0.cross_attention.weights"]
    with pytest.raises(trace.UnknownHookPoint) as caught:  # checked when the block ends: it ran the model
        with trace.Hooks({"decoder.layers.0.cross_atention.weights": lambda value, point: None}):
            model(src, src)
    assert "'decoder.layers.0.cross_atention.weights' is not a hook point of this model (did you mean " \
           "decoder.layers.0.cross_attention.weights" in str(caught.value)
    with pytest.raises(trace.UnknownHookPoint, match="did you mean decoder.layers.0.self_attention.weights"):
        model_hooks(model, {"decoder.layers.0.self_attention.weight": lambda value, point: None})  # at once
    with trace.Hooks({"no.such.point": lambda value, point: None}):
        pass  # a block that runs no model checks nothing


def test_hook_points_are_the_names_a_forward_pass_reaches():
    for model in (translation_model(), translation_model(positional="learned"), language_model()):
        points = hook_points(model)
        assert model.training  # restored
        with trace.Recorder() as recorder, trace.Hooks({next(iter(points)): lambda value, point: None}):
            ids = torch.tensor([[3, 4, 5]])
            model(ids, ids) if is_encoder_decoder(model) else model(ids)
        assert set(recorder.names()) - {"output.probabilities"} == set(points)
    assert "encoder.layers.0.self_attention.weights" in hook_points(translation_model())
