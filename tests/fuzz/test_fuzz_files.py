"""Fuzzed files: worked examples for `check`, corpora (TSV and aligned pairs), model configs and checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fuzz_helpers import ANY_CHARACTER, FUZZ, JSON_VALUES, one_line
from hypothesis import given
from hypothesis import strategies as st

from clearformer.errors import UserError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEED = json.loads((EXAMPLES / "seed-002-i-love-you.json").read_text(encoding="utf-8"))




def check_file(tmp_path: Path, data: bytes) -> None:
    from clearformer.explain.checker import check_example

    path = tmp_path / "example.json"
    path.write_bytes(data)
    try:
        result = check_example(path)
    except UserError as error:
        assert one_line(str(error)) and len(str(error)) < 400
    else:
        assert isinstance(result.ok, bool)


@FUZZ
@given(data=st.binary(max_size=200))
def test_check_random_bytes(tmp_path, data):
    check_file(tmp_path, data)


@FUZZ
@given(value=JSON_VALUES)
def test_check_random_json(tmp_path, value):
    check_file(tmp_path, json.dumps(value).encode())


@FUZZ
@given(path=st.lists(st.integers(0, 50), min_size=1, max_size=6), replacement=JSON_VALUES)
def test_check_seed_with_one_part_replaced(tmp_path, path, replacement):
    def replace(value, steps):
        if not steps or not isinstance(value, (dict, list)) or not value:
            return replacement
        if isinstance(value, dict):
            name = sorted(value)[steps[0] % len(value)]
            return {**value, name: replace(value[name], steps[1:])}
        index = steps[0] % len(value)
        return value[:index] + [replace(value[index], steps[1:])] + value[index + 1:]

    check_file(tmp_path, json.dumps(replace(SEED, path)).encode())


LINE_PARTS = st.one_of(st.text(ANY_CHARACTER.filter(lambda c: c not in "\n\r"), max_size=30),
                       st.sampled_from(["I love you\tJe t'aime", "a\tb\tc", "\t", "x" * 3000 + "\ty", "\xff"]))


def read_corpus(paths: list[Path]) -> None:
    from clearformer.data.parallel import read_parallel
    from clearformer.train.corpus import read_pairs

    for skip_bad in (False, True):
        try:
            pairs = read_parallel(paths if len(paths) > 1 else paths[0], skip_bad=skip_bad)
        except UserError as error:
            assert one_line(str(error))
        else:
            assert pairs and all(isinstance(s, str) and isinstance(t, str) and s and t for s, t in pairs)
            assert read_pairs(tuple(str(p) for p in paths), skip_bad=skip_bad) == [(s, t) for s, t in pairs]


def encode(lines: list[str], raw: bytes) -> bytes:
    return "\n".join(lines).encode("utf-8", "surrogatepass") + raw


@FUZZ
@given(lines=st.lists(LINE_PARTS, max_size=8), raw=st.binary(max_size=8))
def test_tsv_corpus(tmp_path, lines, raw):
    path = tmp_path / "pairs.tsv"
    path.write_bytes(encode(lines, raw))
    read_corpus([path])


@FUZZ
@given(source=st.lists(LINE_PARTS, max_size=6), target=st.lists(LINE_PARTS, max_size=6), raw=st.binary(max_size=4))
def test_aligned_corpus(tmp_path, source, target, raw):
    paths = [tmp_path / "src.txt", tmp_path / "tgt.txt"]
    paths[0].write_bytes(encode(source, raw))
    paths[1].write_bytes(encode(target, b""))
    read_corpus(paths)


@FUZZ
@given(lines=st.lists(LINE_PARTS, max_size=8))
def test_data_build_custom(tmp_path, lines):
    from clearformer.data.custom import build

    path = tmp_path / "pairs.tsv"
    path.write_bytes(encode(lines, b""))
    out = tmp_path / "corpus"
    shutil.rmtree(out, ignore_errors=True)
    try:
        counts = build(out, path, skip_bad=True, log=lambda line: None)
    except UserError as error:
        assert one_line(str(error))
    else:
        assert sum(counts.values()) >= 1 and (out / "train.tsv").exists()


CONFIG_FIELDS = st.dictionaries(
    st.sampled_from(["src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_kv_heads", "d_ff", "max_len",
                     "n_encoder_layers", "n_decoder_layers", "dropout", "positional", "attention", "colour",
                     "tie_embeddings", "activation", "pad_id", "rope_base", "kv_lora_rank"]),
    JSON_VALUES, max_size=5)


@FUZZ
@given(changes=CONFIG_FIELDS)
def test_model_config_load(tmp_path, tiny_checkpoint, changes):
    from clearformer.config import ModelConfig

    config = {**json.loads((tiny_checkpoint / "config.json").read_text(encoding="utf-8")), **changes}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    try:
        loaded = ModelConfig.load(path)
    except UserError as error:
        assert one_line(str(error))
    else:
        assert isinstance(loaded, ModelConfig)


@FUZZ
@given(changes=CONFIG_FIELDS, weights=st.sampled_from(["keep", "truncate", "garbage", "missing"]))
def test_checkpoint_loading(tmp_path, tiny_checkpoint, changes, weights):
    from clearformer.checkpoint import load_model

    directory = tmp_path / "checkpoint"
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(tiny_checkpoint, directory)
    config = {**json.loads((directory / "config.json").read_text(encoding="utf-8")), **changes}
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    blob = directory / "model.safetensors"
    if weights == "truncate":
        blob.write_bytes(blob.read_bytes()[:200])
    elif weights == "garbage":
        blob.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":1}")
    elif weights == "missing":
        blob.unlink()
    try:
        model, tokenizer, _ = load_model(directory)
    except UserError as error:
        assert one_line(str(error))
    else:
        assert len(tokenizer) == model.config.src_vocab_size
