"""`translate` decodes in eval mode (no dropout) whatever mode its model is in, and leaves the model's mode as it
found it; a model in eval mode already is not walked to set it again (generate/translator.py)."""

from __future__ import annotations

import torch
from gen_helpers import random_model

from clearformer.generate import DecodingOptions
from clearformer.generate.translator import PyTorchTranslator
from clearformer.train.corpus import build_tokenizer
from clearformer.train.options import Vocabulary

PAIRS = [("I love you", "je t'aime"), ("the cat sleeps", "le chat dort"), ("open the file", "ouvrir le fichier")] * 5
SOURCES = ["I love you", "the cat sleeps", "open the file"]


def test_dropout_is_off_while_translating_and_the_mode_is_given_back():
    tokenizer = build_tokenizer(Vocabulary(tokenizer="words", vocab_size=100), PAIRS)
    model = random_model(len(tokenizer), seed=3, dtype=torch.float32, max_len=32, dropout=0.5).eval()
    translator = PyTorchTranslator(model, tokenizer)
    options = DecodingOptions(max_extra=6)
    expected = [t.text for t in translator.translate(SOURCES, options)]
    assert not any(module.training for module in translator.model.modules())

    translator.model.train()  # a run being trained: validation BLEU translates with it
    assert [t.text for t in translator.translate(SOURCES, options)] == expected
    assert all(module.training for module in translator.model.modules())

    translator.model.eval()
    translator.model.decoder.train()  # a part left training under an eval root: decoded in eval all the same
    assert [t.text for t in translator.translate(SOURCES, options)] == expected
    assert not any(module.training for module in translator.model.modules())
