"""`clearformer import marian`: random MarianMTModels of several configurations, saved with save_pretrained,
compute the same logits in clearformer (within float32 rounding: tests/tolerance.py) and decode to the same
tokens (greedy and beam 4)."""

from __future__ import annotations

import json

import pytest
import torch

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

pytest.importorskip("transformers")
from interop_helpers import TEST_SOURCES, hf_generate, marian_depth, marian_folder, padded  # noqa: E402
from tolerance import assert_float32_close  # noqa: E402

from clearformer.errors import UserError  # noqa: E402
from clearformer.generate import DecodingOptions, beam_search, encode_source, greedy_decode, search_tokens  # noqa: E402
from clearformer.interop.marianmt import export_marian, hf_model, import_marian, load_marian  # noqa: E402

# (name, MarianConfig overrides, the tying clearformer should find)
CONFIGS = [
    ("swish-shared-tied", dict(activation_function="swish"), "all"),
    ("relu-unscaled", dict(activation_function="relu", scale_embedding=False), "all"),
    ("gelu-3-1-layers", dict(activation_function="gelu", encoder_layers=3, decoder_layers=1), "all"),
    ("decoder-tied", dict(share_encoder_decoder_embeddings=False, tie_word_embeddings=True), "decoder"),
    ("untied", dict(share_encoder_decoder_embeddings=False, tie_word_embeddings=False), "none"),
    ("gelu-new-4-heads", dict(activation_function="gelu_new", encoder_attention_heads=4,
                              decoder_attention_heads=4), "all"),
]


@pytest.fixture(scope="module", params=CONFIGS, ids=[c[0] for c in CONFIGS])
def pair(request, tmp_path_factory):
    """(Marian's model, clearformer's import of it, its tokenizer, the folder)."""
    name, overrides, tie = request.param
    seed = [c[0] for c in CONFIGS].index(name)
    folder, theirs = marian_folder(tmp_path_factory.mktemp(name), seed=seed, **overrides)
    ours, tokenizer, _ = load_marian(str(folder))
    assert ours.config.tie_embeddings == tie
    return theirs, ours, tokenizer, folder


def sources(tokenizer) -> torch.Tensor:
    return padded([encode_source(tokenizer, text) for text in TEST_SOURCES], tokenizer.pad_id)


def test_tokenizer_reads_sources_as_marian_tokenizer_does(pair):
    from transformers import MarianTokenizer

    _, ours, tokenizer, folder = pair
    theirs = MarianTokenizer.from_pretrained(str(folder))
    for text in TEST_SOURCES:
        assert encode_source(tokenizer, text) == theirs(text).input_ids
    ids = theirs("le chat est sur le tapis").input_ids
    assert tokenizer.decode(ids) == theirs.decode(ids, skip_special_tokens=True)
    assert tokenizer.bos_id == tokenizer.pad_id == len(tokenizer) - 1  # Marian starts decoding from <pad>


def test_logits_equal_marians(pair):
    theirs, ours, tokenizer, _ = pair
    src = sources(tokenizer)
    tgt = torch.tensor([[tokenizer.bos_id, 5, 9, 12, 7, 3]] * src.shape[0])
    with torch.no_grad():
        expected = theirs(input_ids=src, attention_mask=src != tokenizer.pad_id, decoder_input_ids=tgt).logits
        got = ours(src, tgt)
    assert expected.abs().max() > 1.0  # the comparison is not between near-zero numbers
    assert_float32_close(got, expected, marian_depth(theirs.config))


@pytest.mark.parametrize("beams", [1, 4])
def test_decoding_gives_marians_tokens(pair, beams):
    """Greedy, and beam 4 with the plain sum of log-probabilities: Transformers divides by length**alpha,
    clearformer by GNMT's ((5 + length) / 6)**alpha, so the two agree at alpha = 0 (and only there)."""
    theirs, ours, tokenizer, _ = pair
    src = sources(tokenizer)
    expected = hf_generate(theirs, src, tokenizer.pad_id, beams, max_new=12)
    if beams == 1:
        got = greedy_decode(ours, src, DecodingOptions(max_new=12, brevity=0.0), search_tokens(ours, tokenizer))
    else:
        got = beam_search(ours, src, DecodingOptions(beam=beams, alpha=0.0, max_new=12, brevity=0.0),
                          search_tokens(ours, tokenizer))
    assert got.sequences() == expected


def test_marian_to_ours_to_marian_keeps_the_logits(pair, tmp_path):
    theirs, ours, tokenizer, _ = pair
    export_marian(ours, tokenizer, tmp_path / "again")
    again = hf_model(tmp_path / "again")
    src = sources(tokenizer)
    tgt = torch.tensor([[tokenizer.bos_id, 4, 8, 2]] * src.shape[0])
    with torch.no_grad():
        before = theirs(input_ids=src, attention_mask=src != tokenizer.pad_id, decoder_input_ids=tgt).logits
        after = again(input_ids=src, attention_mask=src != tokenizer.pad_id, decoder_input_ids=tgt).logits
    assert_float32_close(after, before, marian_depth(theirs.config))
    assert json.loads((tmp_path / "again" / "vocab.json").read_text()) == tokenizer.vocab


def test_ctranslate2_decodes_the_reexported_model_as_marian_does(pair, tmp_path):
    """Every activation and tying above, through export -> CTranslate2's converter -> Translator."""
    ctranslate2 = pytest.importorskip("ctranslate2")
    from clearformer.interop.ctranslate2 import convert_marian_folder

    theirs, ours, tokenizer, _ = pair
    converted = convert_marian_folder(export_marian(ours, tokenizer, tmp_path / "marian"), tmp_path / "ct2")
    src = sources(tokenizer)
    pieces = [[tokenizer.id_to_token(i) for i in row if i != tokenizer.pad_id] for row in src.tolist()]
    for beams in (1, 4):
        results = ctranslate2.Translator(str(converted)).translate_batch(
            pieces, beam_size=beams, length_penalty=0.0, max_decoding_length=12, min_decoding_length=0)
        expected = [[tokenizer.id_to_token(i) for i in ids] for ids in hf_generate(theirs, src, tokenizer.pad_id,
                                                                                    beams, max_new=12)]
        assert [r.hypotheses[0] for r in results] == expected, f"beam {beams}"


def test_import_writes_a_run_that_loads(pair, tmp_path):
    from clearformer.load import load_model

    theirs, ours, tokenizer, folder = pair
    import_marian(str(folder), tmp_path / "run")
    model, loaded, meta = load_model(tmp_path / "run")
    assert loaded.kind == "marian" and meta["format"] == "marian"
    src = sources(loaded)
    with torch.no_grad():
        torch.testing.assert_close(model(src, src), ours(src, src), atol=0, rtol=0)


# ----------------------------------------------------------------------------- safety and bad input


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return marian_folder(tmp_path_factory.mktemp("plain"))[0]


def copy_of(folder, tmp_path):
    import shutil

    return shutil.copytree(folder, tmp_path / "copy")


def test_a_pytorch_bin_is_read_tensors_only(folder, tmp_path):
    from safetensors.torch import load_file

    copy = copy_of(folder, tmp_path)
    torch.save(load_file(str(copy / "model.safetensors")), copy / "pytorch_model.bin")
    (copy / "model.safetensors").unlink()
    model, _, _ = load_marian(str(copy))
    reference, _, _ = load_marian(str(folder))
    for name, tensor in reference.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], tensor, atol=0, rtol=0)


class NotATensor:  # a pickled object: weights_only loading must refuse it rather than run any code
    pass


def test_a_pytorch_bin_with_an_object_is_refused(folder, tmp_path):
    copy = copy_of(folder, tmp_path)
    torch.save({"model.shared.weight": NotATensor()}, copy / "pytorch_model.bin")
    (copy / "model.safetensors").unlink()
    with pytest.raises(UserError, match="pytorch_model.bin: refused or damaged"):
        load_marian(str(copy))


@pytest.mark.parametrize("field, value, says", [
    ("d_model", "sixteen", "'d_model' = 'sixteen' has the wrong type"),
    ("d_model", None, "field 'd_model' is missing"),
    ("activation_function", "tanh", "'activation_function' = 'tanh' is not supported"),
    ("decoder_ffn_dim", 48, "encoder_ffn_dim != decoder_ffn_dim"),
    ("decoder_vocab_size", 7, "separate target vocabularies"),
    ("model_type", "bart", "not 'marian'"),
    ("encoder_layers", 3, "model.encoder.layers.2.self_attn.q_proj.weight' is missing"),
    ("d_model", 32, "has shape (16, 16), the config implies (32, 32)"),
])
def test_bad_config_fields_are_named(folder, tmp_path, field, value, says):
    copy = copy_of(folder, tmp_path)
    config = json.loads((copy / "config.json").read_text())
    config[field] = value
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match=__import__("re").escape(says)):
        load_marian(str(copy))


def test_integer_weights_and_missing_files_are_named(folder, tmp_path):
    from safetensors.torch import load_file, save_file

    copy = copy_of(folder, tmp_path)
    tensors = load_file(str(copy / "model.safetensors"))
    tensors["final_logits_bias"] = tensors["final_logits_bias"].long()
    save_file(tensors, str(copy / "model.safetensors"))
    with pytest.raises(UserError, match="'final_logits_bias' has dtype torch.int64"):
        load_marian(str(copy))
    (copy / "target.spm").unlink()
    with pytest.raises(UserError, match="target.spm: missing"):
        load_marian(str(copy))
    with pytest.raises(UserError, match="nowhere: no such folder"):
        load_marian(str(tmp_path / "nowhere"))
    with pytest.raises(UserError, match="not a folder saved by save_pretrained"):
        load_marian(str(copy / "config.json"))


def test_a_stored_sinusoidal_table_is_checked(folder, tmp_path):
    """Older saves hold Marian's position tables: accepted when they are its halves layout, refused otherwise."""
    from safetensors.torch import load_file, save_file
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    copy = copy_of(folder, tmp_path)
    config = json.loads((copy / "config.json").read_text())
    table = MarianSinusoidalPositionalEmbedding(config["max_position_embeddings"], config["d_model"]).create_weight()
    tensors = load_file(str(copy / "model.safetensors"))
    tensors["model.encoder.embed_positions.weight"] = table
    save_file(tensors, str(copy / "model.safetensors"))
    load_marian(str(copy))
    tensors["model.decoder.embed_positions.weight"] = table[:, torch.randperm(table.shape[1])]
    save_file(tensors, str(copy / "model.safetensors"))
    with pytest.raises(UserError, match="'model.decoder.embed_positions.weight' is not Marian's sinusoidal table"):
        load_marian(str(copy))
