"""Options objects (clearformer/options.py): flags, ranges and JSON from the fields, and the library
refusing what the command line refuses, with the same one-line message, for every option that has a
range or choices."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, fields

import pytest
import torch

from clearformer.cli import main
from clearformer.errors import UserError
from clearformer.generate.options import DecodingOptions
from clearformer.generate.sampling import SamplingOptions
from clearformer.limits import MAX_BEAM
from clearformer.options import Options, check_value, option, part, part_class
from clearformer.train.lm import LMOptions
from clearformer.train.options import LoopOptions, TrainOptions


@pytest.fixture(autouse=True)
def _keep_threads_and_folders(tmp_path, monkeypatch):
    for name in ("RUNS", "DATA", "CACHE"):
        monkeypatch.setenv(f"CLEARFORMER_{name}", str(tmp_path / name.lower()))
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)  # `train` takes one thread for a toy preset


def flat_fields(cls):
    """(field) of an options class, its parts' fields included."""
    for item in fields(cls):
        part = part_class(item)
        yield from flat_fields(part) if part is not None else [item]


def bad_values(item) -> list:
    """Values just outside a field's range, NaN and infinity for a float, a word outside its choices."""
    spec, is_float = item.metadata, "float" in str(item.type)
    step = 0.5 if is_float else 1
    out = []
    if spec.get("at_least") is not None:
        out.append(spec["at_least"] - step)
    if spec.get("at_most") is not None:
        out.append(spec["at_most"] + step)
    out += [spec[name] for name in ("above", "below") if spec.get(name) is not None]
    if is_float:
        out += [math.nan, math.inf]
    if spec.get("choices") is not None:
        out.append("nonsense")
    return out


# (options class, the command line before the flag, what the command needs after it)
COMMANDS = [
    (DecodingOptions, ["translate"], ["hello"]),
    (SamplingOptions, ["lm", "generate"], ["the"]),
    (TrainOptions, ["train"], []),
    (LMOptions, ["lm", "train"], []),
]
CASES = [pytest.param(cls, before, after, item.name, value, id=f"{' '.join(before)} {item.name}={value}")
         for cls, before, after in COMMANDS for item in flat_fields(cls)
         if item.metadata.get("flag") for value in bad_values(item)]


def test_every_ranged_option_has_cases():
    assert len(CASES) > 60
    assert {case.values[3] for case in CASES} >= {"beam", "alpha", "brevity", "stop", "max_extra", "batch_size",
                                                  "temperature", "top_p", "top_k", "seed", "steps", "minutes",
                                                  "dropout", "label_smoothing", "vocab_size", "lr", "compile"}


@pytest.mark.parametrize("cls, before, after, name, value", CASES)
def test_the_library_and_the_command_line_refuse_the_same_value_in_the_same_words(capsys, cls, before, after,
                                                                                   name, value):
    with pytest.raises(UserError) as refused:
        cls.from_values(**{name: value}).check()
    message = str(refused.value)
    assert "\n" not in message
    flag = next(item.metadata["flag"] for item in flat_fields(cls) if item.name == name)
    assert message.startswith(flag + " ")
    capsys.readouterr()
    assert main([*before, flag, str(value), *after]) == 2
    assert capsys.readouterr().err == f"clearformer {before[0]}: error: {message}\n"


def test_the_issue_cases():
    with pytest.raises(UserError, match=f"--beam must be at most {MAX_BEAM}, not 500"):
        DecodingOptions(beam=500, alpha=-3).check()
    with pytest.raises(UserError, match="--alpha must be at least 0, not -3"):
        DecodingOptions(alpha=-3).check()
    with pytest.raises(UserError, match="--temperature must be a finite number, not nan"):
        SamplingOptions(temperature=math.nan).check()
    with pytest.raises(UserError, match=r"--top-p must be in \(0, 1\], not 0"):
        SamplingOptions(top_p=0.0).check()
    with pytest.raises(UserError, match="--beam must be an integer, not '4'"):
        DecodingOptions(beam="4").check()
    with pytest.raises(UserError, match="--batch-size must be an integer, not True"):
        DecodingOptions(batch_size=True).check()
    with pytest.raises(UserError, match="max_new must be at least 1, not 0"):  # a field without a flag
        DecodingOptions(max_new=0).check()


def test_check_value_words():
    cases = [(dict(at_least=1), 0, "x must be at least 1, not 0"),
             (dict(at_most=2.5), 3.0, "x must be at most 2.5, not 3"),
             (dict(above=0.0), 0.0, "x must be greater than 0, not 0"),
             (dict(at_least=0.0, below=1.0), 1.0, "x must be in [0, 1), not 1"),
             (dict(above=0.0, at_most=1.0), 1.5, "x must be in (0, 1], not 1.5"),
             (dict(), math.inf, "x must be a finite number, not inf")]
    for bounds, value, says in cases:
        with pytest.raises(UserError) as error:
            check_value("x", value, **bounds)
        assert str(error.value) == says
    check_value("x", None, at_least=1)  # not set
    check_value("x", 0.0, at_least=0.0, below=1.0)


@dataclass
class Inner(Options):
    title = ""
    size: int = option(3, "--size", "a size", at_least=1)


@dataclass
class Outer(Options):
    name: str = option("a", "--name", "a name", choices=("a", "b"))
    inner: Inner = part(Inner, size=5)
    plain: int = 0


def test_flags_given_values_and_json_of_an_object_made_of_parts():
    parser = argparse.ArgumentParser()
    Outer.add_arguments(parser)
    assert Outer.from_args(parser.parse_args([])) == Outer()  # the part's defaults are its holder's
    assert Outer().inner.size == 5 and parser.parse_args([]).size == 5
    chosen = Outer.from_args(parser.parse_args(["--size", "7", "--name", "b"]))
    assert chosen == Outer(name="b", inner=Inner(size=7)) and chosen.values() == {"name": "b", "size": 7, "plain": 0}
    quiet = argparse.ArgumentParser()
    Outer.add_arguments(quiet, defaults=False)
    assert Outer.given(quiet.parse_args(["--size", "2"])) == {"size": 2}  # only what was typed
    assert Outer.from_dict(chosen.to_dict()) == chosen
    with pytest.raises(UserError, match="run.json: unknown option"):
        Outer.from_dict({"nme": "a"}, "run.json")
    with pytest.raises(UserError, match="unknown option.*colour"):
        Outer.from_values(colour=1)
    with pytest.raises(UserError, match="--size must be at least 1, not 0"):
        Outer.from_values(size=0).check()


def test_training_options_by_concern_with_the_loop_shared_by_the_language_model():
    translation, lm = TrainOptions(), LMOptions()
    assert isinstance(translation.loop, LoopOptions) and isinstance(lm.loop, LoopOptions)
    assert (translation.loop.save_every, lm.loop.save_every) == (500, 250)  # each task's defaults
    toy = TrainOptions.for_preset("toy-translate", steps=7)
    assert (toy.loop.steps, toy.recipe.batch_tokens, toy.vocabulary.tokenizer) == (7, 600, "words")
    assert TrainOptions.from_dict(toy.to_dict()) == toy
    with pytest.raises(UserError, match="say how long to train"):
        TrainOptions.from_values(steps=None, minutes=None, patience=0).check()
    with pytest.raises(UserError, match="give one corpus"):
        TrainOptions.from_values(data_dir="d", tsv="t").check()
    with pytest.raises(UserError, match="decoder-only language model"):
        TrainOptions.from_values(preset="lm-tiny").check()
    assert "slow_down" not in TrainOptions.names() and "slow_down" not in LMOptions.names()  # no test knob
