"""`clearformer export --to marian / ctranslate2` on a trained toy translator: Transformers and CTranslate2
compute what clearformer computes (logits within float32 rounding, the same tokens), and the round trip keeps
the weights."""

from __future__ import annotations

import copy
import re

import pytest
import torch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

pytest.importorskip("transformers")
from interop_helpers import marian_depth, padded  # noqa: E402
from tolerance import assert_float32_close  # noqa: E402

from clearformer.data.toy import toy_pairs  # noqa: E402
from clearformer.errors import UserError  # noqa: E402
from clearformer.generate import DecodingOptions, beam_search, encode_source, greedy_decode, search_tokens  # noqa: E402
from clearformer.interop.marianmt import check_exportable, export_marian, hf_model, load_marian  # noqa: E402
from clearformer.load import load_model  # noqa: E402

SENTENCES = [source for source, _ in toy_pairs()[:12]]


@pytest.fixture(scope="module")
def exported(trained_run, tmp_path_factory):
    """(our model, its tokenizer, the Marian folder, MarianMTModel loaded from it)."""
    model, tokenizer, _ = load_model(trained_run)
    assert tokenizer.source_eos  # trained with --source-eos: Marian's tokenizer appends </s> too
    folder = export_marian(model, tokenizer, tmp_path_factory.mktemp("export") / "marian")
    return model, tokenizer, folder, hf_model(folder)


def sources(tokenizer) -> torch.Tensor:
    return padded([encode_source(tokenizer, s) for s in SENTENCES], tokenizer.pad_id)


def test_marian_tokenizer_reads_sources_as_training_did(exported):
    from transformers import MarianTokenizer

    _, tokenizer, folder, _ = exported
    theirs = MarianTokenizer.from_pretrained(str(folder))
    for sentence in SENTENCES:
        assert theirs(sentence).input_ids == encode_source(tokenizer, sentence)
    ids = tokenizer.encode("Je t'aime.")
    assert theirs.decode(ids, skip_special_tokens=True) == tokenizer.decode(ids)


def test_marian_logits_equal_ours(exported):
    model, tokenizer, _, theirs = exported
    src = sources(tokenizer)
    tgt = torch.tensor([[tokenizer.bos_id] + tokenizer.encode("je t'aime bien le chat")] * src.shape[0])
    with torch.no_grad():
        expected = theirs(input_ids=src, attention_mask=src != tokenizer.pad_id, decoder_input_ids=tgt).logits
        got = model(src, tgt)
    assert_float32_close(got, expected, marian_depth(theirs.config))  # tests/tolerance.py


@pytest.mark.parametrize("beams", [1, 4])
def test_marian_generates_our_tokens(exported, beams):
    """Greedy, and beam 4 at alpha 0 (length penalties differ in form: length**alpha in Transformers,
    ((5 + length) / 6)**alpha in clearformer; at 0 both are the plain sum of log-probabilities)."""
    from interop_helpers import hf_generate

    model, tokenizer, _, theirs = exported
    src = sources(tokenizer)
    if beams == 1:
        ours = greedy_decode(model, src, DecodingOptions(max_new=20, brevity=0.0), search_tokens(model, tokenizer))
    else:
        ours = beam_search(model, src, DecodingOptions(beam=4, alpha=0.0, max_new=20, brevity=0.0),
                               search_tokens(model, tokenizer))
    assert ours.sequences() == hf_generate(theirs, src, tokenizer.pad_id, beams, max_new=20)
    assert len({tuple(s) for s in ours.sequences()}) > 3  # a trained model: sentences get their own outputs


def test_ours_to_marian_to_ours_keeps_every_weight(exported):
    model, tokenizer, folder, _ = exported
    again, again_tokenizer, _ = load_marian(str(folder))
    assert again.config.tie_embeddings == model.config.tie_embeddings
    for field in ("d_model", "n_heads", "d_ff", "n_encoder_layers", "n_decoder_layers", "activation",
                  "scale_embedding", "max_len", "pad_id"):
        assert getattr(again.config, field) == getattr(model.config, field), field
    assert again_tokenizer.source_eos is tokenizer.source_eos is True
    before, after = model.state_dict(), again.state_dict()
    assert before.keys() == after.keys()
    for name, tensor in before.items():
        torch.testing.assert_close(after[name], tensor, atol=0, rtol=0, msg=name)
    assert (again_tokenizer.bos_id, again_tokenizer.eos_id, again_tokenizer.pad_id) == \
        (tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id)
    for sentence in SENTENCES:
        assert again_tokenizer.encode(sentence) == tokenizer.encode(sentence)


def test_ctranslate2_translates_as_we_do(exported, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")
    from clearformer.interop.ctranslate2 import convert_marian_folder

    model, tokenizer, folder, _ = exported
    translator = ctranslate2.Translator(str(convert_marian_folder(folder, tmp_path / "ct2")))
    pieces = [[tokenizer.id_to_token(i) for i in encode_source(tokenizer, s)] for s in SENTENCES]
    src = sources(tokenizer)
    for beams in (1, 4):
        results = translator.translate_batch(pieces, beam_size=beams, length_penalty=0.0, max_decoding_length=20,
                                             min_decoding_length=0)
        if beams == 1:
            ours = greedy_decode(model, src, DecodingOptions(max_new=20, brevity=0.0), search_tokens(model, tokenizer))
        else:
            ours = beam_search(model, src, DecodingOptions(beam=4, alpha=0.0, max_new=20, brevity=0.0),
                               search_tokens(model, tokenizer))
        expected = [[tokenizer.id_to_token(i) for i in ids] for ids in ours.sequences()]
        assert [r.hypotheses[0] for r in results] == expected, f"beam {beams}"


# ----------------------------------------------------------------------------- what Marian cannot hold


@pytest.mark.parametrize("change, says", [
    (dict(norm_first=True), "norm_first=True (pre-norm)"),
    (dict(bias=False), "bias=False"),
    (dict(positional="rope"), "positional='rope'"),
    (dict(positional="learned"), "positional='learned'"),
    (dict(n_kv_heads=1), "no GQA/MQA/MLA"),
    (dict(source_eos=False), "source_eos=False"),
    (dict(layer_norm_eps=1e-6), "layer_norm_eps=1e-06"),
])
def test_what_marian_cannot_express_is_named(exported, change, says):
    from clearformer.config import ModelConfig

    model, tokenizer, _, _ = exported
    if "source_eos" in change:  # a fact of the tokenizer, not of the config
        tokenizer = copy.copy(tokenizer)
        tokenizer.source_eos = change.pop("source_eos")
    config = ModelConfig.from_dict({**model.config.to_dict(), **change})
    with pytest.raises(UserError, match=re.escape(says)):
        check_exportable(config, tokenizer)


def test_a_word_vocabulary_is_refused(exported):
    from clearformer.tokenize import SPECIALS, WordTokenizer

    model, _, _, _ = exported
    with pytest.raises(UserError, match="tokenizer kind 'words'"):
        check_exportable(model.config, WordTokenizer(list(SPECIALS) + ["a"]))
