"""`--engine ctranslate2`: the run exported once into RUN/ctranslate2 decodes what clearformer decodes
(greedy and beam 4, the same source ids and length rule), is reused until the weights change, runs int8,
and the command line refuses what it cannot do in one line."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # seconds on its own: -m 'not slow' skips it (pyproject)

pytest.importorskip("transformers")
pytest.importorskip("ctranslate2")

from clearformer.cli import main  # noqa: E402
from clearformer.data.toy import toy_pairs  # noqa: E402
from clearformer.errors import UserError  # noqa: E402
from clearformer.generate import DecodingOptions  # noqa: E402
from clearformer.generate.source import Pieces, prepare_sources  # noqa: E402
from clearformer.generate.translator import PyTorchTranslator  # noqa: E402
from clearformer.interop.ct2_engine import (  # noqa: E402
    STAMP,
    CTranslate2Engine,
    EngineSettings,
    check_options,
    ensure_exported,
    load_engine,
    with_engine_defaults,
)
from clearformer.load import load_model  # noqa: E402
from clearformer.store.checkpoint import WEIGHTS_FILE, atomic_save_tensors, model_tensors, save_model  # noqa: E402

SENTENCES = [source for source, _ in toy_pairs()[:24]]


@pytest.fixture()
def run(trained_run, tmp_path, monkeypatch):
    """A copy of the trained toy run (the engine writes RUN/ctranslate2 into it)."""
    monkeypatch.setenv("CLEARFORMER_RUNS", str(tmp_path / "runs"))
    copy = tmp_path / "run"
    shutil.copytree(trained_run, copy)
    return copy


def ours_and_engine(run, quantize="none"):
    model, tokenizer, _ = load_model(run)
    engine, _ = load_engine(run, model, tokenizer, EngineSettings(quantize=quantize, threads=1))
    sources = prepare_sources(tokenizer, SENTENCES, model.config.max_len, check=False).sources
    return model, tokenizer, engine, sources


@pytest.mark.parametrize("beam, max_extra", [(1, 50), (4, 50), (1, 2), (4, 3)])
def test_the_engine_decodes_what_clearformer_decodes(run, beam, max_extra):
    """Same source ids (<eos> included), same per-sentence limit (source length + max_extra): the same
    translations as clearformer's greedy / beam search without its brevity penalty, alpha 0 (the engine
    runs CTranslate2's beta 0 at every alpha)."""
    model, tokenizer, engine, sources = ours_and_engine(run)
    options = DecodingOptions(beam=beam, alpha=0.0, max_extra=max_extra, brevity=0.0, placeholders="free")
    ours = [t.text for t in PyTorchTranslator(model, tokenizer).translate(Pieces.whole(sources), options)]
    theirs = engine.translate_ids(sources, options)
    assert theirs == ours
    assert len(set(ours)) > 10  # the model translates: the sentences differ


def test_exported_once_reused_and_redone_when_the_weights_change(run):
    model, tokenizer, _ = load_model(run)
    folder, exported = ensure_exported(run, model, tokenizer)
    assert exported and folder == run / "ctranslate2"
    stamp = json.loads((folder / STAMP).read_text())
    written = (folder / "model.bin").stat().st_mtime_ns
    again, exported = ensure_exported(run, model, tokenizer)
    assert again == folder and not exported
    assert (folder / "model.bin").stat().st_mtime_ns == written
    with torch.no_grad():
        model.output.linear.bias.add_(0.5)
    atomic_save_tensors(run / WEIGHTS_FILE, model_tensors(model))
    again, exported = ensure_exported(run, model, tokenizer)
    assert exported and again == folder
    assert json.loads((folder / STAMP).read_text())["weights_sha256"] != stamp["weights_sha256"]
    assert [p.name for p in run.iterdir() if p.name.startswith(".ctranslate2")] == []  # no staging left


def test_int8_translates_close_to_float32(run):
    model, tokenizer, engine, sources = ours_and_engine(run, "int8")
    assert (run / "ctranslate2-int8" / STAMP).exists()
    beam4 = with_engine_defaults(DecodingOptions(beam=4))
    float32 = ours_and_engine(run)[2].translate_ids(sources, beam4)
    int8 = engine.translate_ids(sources, beam4)
    assert all(int8)
    assert sum(a == b for a, b in zip(int8, float32, strict=True)) >= 0.75 * len(SENTENCES)


def test_placeholders_choose_the_best_hypothesis_that_keeps_them():
    engine = CTranslate2Engine.__new__(CTranslate2Engine)
    engine.placeholder_ids = frozenset({7, 8})
    source = [5, 7, 6, 8, 3]
    hypotheses = [[9, 7, 7], [9, 8, 10], [9, 8, 7], [7, 8, 9]]
    assert engine.pick(source, hypotheses, True) == [9, 8, 7]  # the best one with exactly 7 and 8 once
    assert engine.pick(source, hypotheses, False) == [9, 7, 7]
    assert engine.pick(source, [[1], [2]], True) == [1]  # none keeps them: the best


@pytest.mark.parametrize("changes, says", [
    (dict(beam=4, alpha=0.6), "--alpha 0.6: the CTranslate2 engine has no GNMT length penalty"),
    (dict(brevity=1.0), "--brevity 1: the CTranslate2 engine has no brevity penalty"),
    (dict(min_length=3), "min_length 3: the CTranslate2 engine does not take it"),
    (dict(compile="on"), "--compile on: compiles clearformer's own decoder"),
    (dict(beam=500), "--beam must be at most 64, not 500"),
])
def test_the_engine_refuses_by_name_what_it_cannot_honour(changes, says):
    options = DecodingOptions(**{"alpha": 0.0, "brevity": 0.0, **changes})
    with pytest.raises(UserError) as error:
        CTranslate2Engine.__new__(CTranslate2Engine).translate_ids([[5, 3]], options)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_what_the_engine_honours_passes_and_its_defaults_fill_what_was_not_chosen():
    for options in (DecodingOptions(beam=1, alpha=2.0, brevity=0.0),  # greedy: no length penalty to apply
                    DecodingOptions(beam=4, alpha=0.0, brevity=0.0, stop="bound", placeholders="free"),
                    DecodingOptions(alpha=0.0, brevity=0.0, max_new=5, compile="off")):
        assert check_options(options) is options
    chosen = with_engine_defaults(DecodingOptions(beam=4, alpha=0.6), given={"beam", "alpha"})
    assert (chosen.alpha, chosen.brevity) == (0.6, 0.0)
    assert (with_engine_defaults(DecodingOptions(beam=4)).alpha, with_engine_defaults(DecodingOptions()).brevity) == \
        (0.0, 0.0)


def one_line_error(capsys, argv, says: str) -> None:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_translate_and_evaluate_with_the_engine(run, capsys):
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(run), "--engine", "ctranslate2", "--threads", "1",
                 "--brevity", "0", *SENTENCES[0].split()]) == 0
    via_engine = capsys.readouterr().out
    assert main(["translate", "--checkpoint", str(run), "--threads", "1", "--brevity", "0",
                 *SENTENCES[0].split()]) == 0
    assert capsys.readouterr().out == via_engine
    assert main(["evaluate", "--checkpoint", str(run), "--engine", "all", "--limit", "8", "--threads", "1"]) == 0
    table = capsys.readouterr().out
    for name in ("pytorch", "pytorch int8", "ctranslate2", "ctranslate2 int8"):
        assert f"\n{name} " in table
    assert (run / "hypotheses.test.pytorch-int8.txt").exists()
    assert (run / "hypotheses.test.ctranslate2-int8.txt").exists()


def test_command_line_errors(run, tmp_path, capsys):
    one_line_error(capsys, ["translate", "--checkpoint", str(run), "--quantize", "int8", "--ablate",
                            "decoder.layers.0.cross_attention.head.0", "hi"],
                   "--ablate switches parts of the float model off; it does not apply to --quantize int8")
    for flags, says in ((["--beam", "4", "--alpha", "0.6"], "--alpha 0.6: the CTranslate2 engine has no GNMT"),
                        (["--brevity", "2"], "--brevity 2: the CTranslate2 engine has no brevity penalty")):
        one_line_error(capsys, ["translate", "--checkpoint", str(run), "--engine", "ctranslate2", *flags, "hi"], says)
        one_line_error(capsys, ["evaluate", "--checkpoint", str(run), "--engine", "all", *flags], says)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["translate", "--checkpoint", str(run), "--engine", "ctranslate2", "--quantize", "int4", "hi"])
    assert exit_info.value.code == 2 and "invalid choice: 'int4'" in capsys.readouterr().err
    model, tokenizer, meta = load_model(run)
    from clearformer.config import ModelConfig
    from clearformer.model.transformer import Transformer

    pre_norm = Transformer(ModelConfig.from_dict({**model.config.to_dict(), "norm_first": True}))
    save_model(tmp_path / "pre-norm", pre_norm, tokenizer, meta)
    one_line_error(capsys, ["translate", "--checkpoint", str(tmp_path / "pre-norm"), "--engine", "ctranslate2",
                            "I love you"], "--engine ctranslate2: cannot export to Marian: norm_first=True")
    assert not (tmp_path / "pre-norm" / "ctranslate2").exists()


@pytest.mark.parametrize("count", [2, 7, 20])
def test_a_paragraph_reads_the_same_pieces_through_the_engine(run, count, capsys):
    """One input path (issue 32): the command cuts a paragraph into its sentences for the engine as for
    clearformer's own decoder, and both translate it alike."""
    from clearformer.generate.source import prepare_sources

    per = 30 // (3 * count) + 1  # toy sentences joined by "and": more than 25 words in all, so it is cut
    text = " ".join(" and ".join(SENTENCES[(i * per + j) % len(SENTENCES)] for j in range(per)) + "."
                    for i in range(count))
    model, tokenizer, _ = load_model(run)
    assert len(prepare_sources(tokenizer, [text], model.config.max_len).texts) == count
    rules = ["--brevity", "0", "--placeholders", "free"]  # what the engine decodes as clearformer does
    assert main(["translate", "--checkpoint", str(run), *rules, text]) == 0
    ours = capsys.readouterr().out
    assert main(["translate", "--checkpoint", str(run), *rules, "--engine", "ctranslate2", text]) == 0
    assert capsys.readouterr().out == ours
