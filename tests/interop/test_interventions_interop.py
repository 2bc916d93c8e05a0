"""What-if interventions on imported models, against the peer: a Marian translator and GPT-2 with a head switched
off give the logits of the Transformers model whose output projection lost that head's columns (rows, in GPT-2's
Conv1D layout); without positions, the logits of the Transformers model whose position table is zero."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
from interop_helpers import TEST_SOURCES, gpt2_depth, gpt2_folder, marian_depth, marian_folder, padded  # noqa: E402
from tolerance import assert_float32_close, float32_close  # noqa: E402

from clearformer.cli import main  # noqa: E402
from clearformer.explain.interventions import parse_interventions  # noqa: E402
from clearformer.generate import DecodingOptions, beam_search, encode_source, search_tokens  # noqa: E402
from clearformer.generate.sampling import SamplingOptions, generate  # noqa: E402
from clearformer.interop.gpt2 import import_gpt2, load_gpt2  # noqa: E402
from clearformer.interop.marianmt import load_marian  # noqa: E402
from clearformer.record import trace  # noqa: E402


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    folder, theirs = marian_folder(tmp_path_factory.mktemp("marian"), seed=3, encoder_attention_heads=4,
                                   decoder_attention_heads=4)
    ours, tokenizer, _ = load_marian(str(folder))
    return theirs, ours, tokenizer


def zero_head(linear: torch.nn.Linear, head: int, heads: int) -> None:
    size = linear.weight.shape[1] // heads
    with torch.no_grad():
        linear.weight[:, head * size:(head + 1) * size] = 0


def marian_logits(model, src, tgt, pad_id):
    with torch.no_grad():
        return model(input_ids=src, attention_mask=src != pad_id, decoder_input_ids=tgt).logits


@pytest.mark.parametrize("name, part", [("encoder.layers.1.self_attention.head.2", ("encoder", 1, "self_attn")),
                                        ("decoder.layers.0.self_attention.head.1", ("decoder", 0, "self_attn")),
                                        ("decoder.layers.1.cross_attention.head.3", ("decoder", 1, "encoder_attn"))])
def test_marian_head_off_equals_marian_without_its_columns(marian, name, part, tmp_path):
    theirs, ours, tokenizer = marian
    src = padded([encode_source(tokenizer, text) for text in TEST_SOURCES], tokenizer.pad_id)
    tgt = torch.tensor([[tokenizer.bos_id, 5, 9, 12, 7, 3]] * src.shape[0])
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    with torch.no_grad(), trace.Interventions(parse_interventions(ours, [name])):
        got = ours(src, tgt)
    edited = type(theirs)(theirs.config).eval()
    edited.load_state_dict(theirs.state_dict())
    stack, layer, attention = part
    zero_head(getattr(getattr(edited.model, stack).layers[layer], attention).out_proj, int(name[-1]), 4)
    expected = marian_logits(edited, src, tgt, tokenizer.pad_id)
    depth = marian_depth(theirs.config)  # tests/tolerance.py
    assert_float32_close(got, expected, depth)
    assert not float32_close(expected, marian_logits(theirs, src, tgt, tokenizer.pad_id), depth)  # the head mattered
    assert all(torch.equal(ours.state_dict()[k], v) for k, v in before.items())
    # Beam search with the head off: the tokens of the edited Marian, searched by clearformer itself.
    edited_ours, _, _ = load_marian_from(edited, tmp_path)
    options = DecodingOptions(beam=3, alpha=0.0, max_new=8, brevity=0.0)
    with trace.Interventions(parse_interventions(ours, [name])):
        ablated = beam_search(ours, src, options, search_tokens(ours, tokenizer, options))
    plain = beam_search(edited_ours, src, options, search_tokens(edited_ours, tokenizer, options))
    assert ablated.sequences() == plain.sequences()


def load_marian_from(model, directory):
    """clearformer's import of an in-memory MarianMTModel: the fixture's folder (its tokenizer files) in
    `directory`, with this model's weights saved over the fixture's."""
    folder, _ = marian_folder(directory, seed=3, encoder_attention_heads=4, decoder_attention_heads=4)
    model.save_pretrained(folder)
    return load_marian(str(folder))


def test_marian_without_positions_equals_a_zero_table(marian):
    theirs, ours, tokenizer = marian
    src = padded([encode_source(tokenizer, text) for text in TEST_SOURCES], tokenizer.pad_id)
    tgt = torch.tensor([[tokenizer.bos_id, 5, 9, 12, 7, 3]] * src.shape[0])
    with torch.no_grad(), trace.Interventions(parse_interventions(ours, ["encoder.positions"])):
        got = ours(src, tgt)
    edited = type(theirs)(theirs.config).eval()
    edited.load_state_dict(theirs.state_dict())
    with torch.no_grad():
        edited.model.encoder.embed_positions.weight.zero_()
    assert_float32_close(got, marian_logits(edited, src, tgt, tokenizer.pad_id), marian_depth(theirs.config))


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    folder, theirs = gpt2_folder(tmp_path_factory.mktemp("gpt2"), seed=5, n_head=4, n_layer=2)
    ours, tokenizer = load_gpt2(str(folder))
    return theirs, ours, tokenizer, folder


def test_gpt2_head_off_and_no_positions_equal_edited_gpt2(gpt2):
    theirs, ours, tokenizer, _ = gpt2
    ids = torch.tensor([[tokenizer.eos_id] + tokenizer.encode("We read a book today, in the park!")])
    edited = type(theirs)(theirs.config).eval()
    edited.load_state_dict(theirs.state_dict())
    projection = edited.transformer.h[1].attn.c_proj.weight  # Conv1D: (heads * d_head, d_model), rows = inputs
    size = projection.shape[0] // 4
    with torch.no_grad():
        projection[2 * size:3 * size] = 0
        edited.transformer.wpe.weight.zero_()
    names = ["decoder.layers.1.self_attention.head.2", "decoder.positions"]
    with torch.no_grad(), trace.Interventions(parse_interventions(ours, names)):
        got = ours(ids)
    with torch.no_grad():
        expected = edited(ids).logits
    assert_float32_close(got, expected, gpt2_depth(theirs.config))


def test_lm_generate_ablate(gpt2, tmp_path, capsys):
    _, ours, tokenizer, folder = gpt2
    run = import_gpt2(str(folder), tmp_path / "run")
    name = "decoder.layers.0.self_attention.head.0.uniform"
    assert main(["lm", "generate", "the cat", "--checkpoint", str(run), "--greedy", "--max-new-tokens", "8",
                 "--ablate", name]) == 0
    out = capsys.readouterr().out
    prompt = [tokenizer.eos_id] + tokenizer.encode("the cat")
    with trace.Interventions(parse_interventions(ours, [name])):
        new = generate(ours, prompt, 8, SamplingOptions(greedy=True))
    assert out == tokenizer.decode(prompt[1:] + new) + "\n"
    assert main(["lm", "generate", "the cat", "--checkpoint", str(run), "--ablate", "encoder.positions"]) == 2
    err = capsys.readouterr().err
    assert "is not a part of this model" in err and "decoder.positions" in err and len(err.strip().splitlines()) == 1
