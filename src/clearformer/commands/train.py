"""`clearformer train`: train a translation model (the toy phrase set, a corpus, or your own files)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from clearformer.commands import options
from clearformer.config import PRESETS, ModelConfig, preset
from clearformer.data.catalogue_pairs import is_catalogue
from clearformer.devices import free_gpu_bytes, gpu_batch_tokens, resolve_device
from clearformer.errors import UserError
from clearformer.limits import check_model_size
from clearformer.store.runs import default_run_dir
from clearformer.store.safeio import loads_json
from clearformer.train import TrainOptions, resume_options, train
from clearformer.train.init import FINE_TUNE_DEFAULTS, catalogue_recipe, check_init_flags, init_values
from clearformer.train.options import preset_defaults

# Options a resumed run may change; every other option comes from the checkpoint (--preset and --arch
# only name the run folder, and --arch must match it).
RESUMABLE = ("steps", "minutes", "device", "bf16", "compile", "run_dir", "preset", "arch")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="train a Transformer (default: the toy English->French set, under a minute on CPU)",
        description="Train an encoder-decoder Transformer with the paper's recipe: label smoothing, Adam "
                    "with warmup, dropout, clipping, token-count batches; validation loss and BLEU; "
                    "checkpoints that --resume continues. Without options: the toy English->French model.")
    # Every option of the run, by concern (train/options.py); a flag not given leaves the preset's default.
    TrainOptions.add_arguments(p, defaults=False)
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a model config field, e.g. --set d_model=128 (repeatable)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out (SIGKILL-safe)")
    p.add_argument("--overwrite", action="store_true",
                   help="--out holds a run: delete its files (model, checkpoints, metrics) and start afresh")
    options.add_threads(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run_train)


def parse_overrides(items: list[str]) -> dict:
    overrides = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set d_model=128")
        try:
            value = loads_json(text, f"--set {name.strip()}")
        except UserError:
            value = text  # a bare word: --set positional=rope
        overrides[name.strip()] = value
    return overrides


# The kinds of value a ModelConfig field takes (its annotation, as written in config.py) and their names.
FIELD_KINDS = {"int": ((int,), "a whole number"), "float": ((int, float), "a number"), "str": ((str,), "a word"),
               "bool": ((bool,), "true or false"), "int | None": ((int, type(None)), "a whole number or null")}


def check_override_types(overrides: dict) -> None:
    """Each --set value is of its field's kind (`--set d_model=abc`: one line naming d_model), before any
    comparison with it could fail inside the config's checks."""
    annotations = {f.name: f.type for f in dataclasses.fields(ModelConfig)}
    for name, value in overrides.items():
        kinds, described = FIELD_KINDS.get(annotations.get(name, ""), ((object,), ""))
        wrong_bool = isinstance(value, bool) and bool not in kinds
        if wrong_bool or not isinstance(value, kinds):
            raise UserError(f"--set {name}={json.dumps(value) if not isinstance(value, str) else value}: "
                            f"{name} takes {described}")


def check_overrides(preset_name: str, arch: str, overrides: dict) -> None:
    """--set values that describe no buildable model (d_ff=-5, d_model=10**9) are refused before any work."""
    check_override_types(overrides)
    if arch != "transformer" or not overrides or preset_name not in PRESETS:
        return
    try:
        config = preset(preset_name, **{"src_vocab_size": 16, "tgt_vocab_size": 16, **overrides})
    except TypeError as error:
        raise UserError(f"--set: {error}") from None
    check_model_size(config, "--set")


def build_options(args) -> TrainOptions:
    """The run's options: the preset's defaults and the flags given; on --resume, the saved ones with a new
    length, device, bf16 or compile."""
    given = TrainOptions.given(args)
    if "init" in given and not args.resume:
        return init_options(given, args.set)
    preset_name, arch = given.get("preset", "toy-translate"), given.get("arch", "transformer")
    suffix = "" if arch == "transformer" else f"-{arch}"  # runs/<preset>-rnn for the GRU baseline
    run_dir = Path(given.pop("run_dir")) if "run_dir" in given else default_run_dir(preset_name + suffix)
    if args.resume and args.overwrite:
        raise UserError("--resume and --overwrite exclude each other: continue the run or replace it")
    if args.resume:
        if set(given) - set(RESUMABLE) or args.set:
            raise UserError("--resume continues with the run's saved options; only --steps, --minutes, "
                            "--device, --bf16 and --compile may change")
        saved = resume_options(run_dir, "translate", steps=given.get("steps"), minutes=given.get("minutes"))
        if "arch" in given and given["arch"] != saved.model.arch:
            raise UserError(f"{run_dir}: a run of --arch {saved.model.arch}; --resume continues it as it was trained")
        hardware = {name: given[name] for name in ("device", "bf16", "compile") if name in given}
        return saved.with_values(**hardware, run_dir=str(run_dir))
    values = {**preset_defaults(preset_name), **given, "preset": preset_name}
    if "minutes" in given and "steps" not in given:
        values["steps"] = None  # a time budget alone replaces the preset's step count
    if "batch_tokens" not in given and not preset_name.startswith("toy"):
        # On a GPU the CPU's batch leaves it idle: size it to the GPU's free memory (devices.gpu_batch_tokens).
        values["batch_tokens"] = gpu_batch_tokens_for(preset_name, values.get("device", "cpu"),
                                                      values.get("vocab_size", 8000), values["batch_tokens"])
    overrides = parse_overrides(args.set)
    if "source_eos" in overrides:  # a tokenization fact, no model config field
        raise UserError("--set source_eos: use --source-eos or --no-source-eos (the tokenizer keeps it)")
    if "architecture" in overrides:
        raise UserError("--set architecture: choose the model with --arch transformer|rnn")
    check_overrides(preset_name, arch, overrides)
    return TrainOptions.for_preset(**values, overrides=overrides, run_dir=str(run_dir))


def init_options(given: dict, set_items: list[str]) -> TrainOptions:
    """`train --init RUN`: the run's preset name and architecture, the fine-tuning recipe (train/init.py), the
    flags given over it; a flag that would change the run's tokenizer or architecture is refused by name."""
    check_init_flags(given, set_items)
    started = init_values(Path(given["init"]))
    name = Path(given["init"]).resolve().name
    run_dir = Path(given.pop("run_dir")) if "run_dir" in given else default_run_dir(f"{name}-finetuned")
    # a catalogue (--data CATALOGUE.po): a validation about every epoch, early stopping (train/init.py)
    catalogue = catalogue_recipe(given["data_dir"]) if is_catalogue(given.get("data_dir")) else {}
    values = {**preset_defaults(started["preset"]), **FINE_TUNE_DEFAULTS, **catalogue, **started, **given}
    if "minutes" in given and "steps" not in given:
        values["steps"] = None  # a time budget alone replaces the preset's step count
    return TrainOptions.for_preset(**values, run_dir=str(run_dir))


def gpu_batch_tokens_for(preset_name: str, device_name: str, vocab_size: int, default: int) -> int:
    """--batch-tokens when not given: `default` on a CPU, the GPU rule (devices.gpu_batch_tokens) on CUDA."""
    if device_name == "cpu":
        return default
    device = resolve_device(device_name, int(os.environ.get("LOCAL_RANK", "0")))  # torchrun: this process's GPU
    if device.type != "cuda":
        return default
    try:
        config = preset(preset_name, src_vocab_size=vocab_size, tgt_vocab_size=vocab_size)
    except Exception:  # noqa: BLE001 - an unknown or LM preset: options.validate() says so in one line
        return default
    return gpu_batch_tokens(config, free_gpu_bytes(device))


def run_train(args) -> int:
    import torch

    if args.threads is not None:
        options.apply_threads(args.threads)
    elif getattr(args, "preset", "toy-translate").startswith("toy"):
        # A toy model's matrices are so small that a second thread costs more in synchronisation than
        # it saves (and on a busy machine, far more).
        torch.set_num_threads(1)
    run_options = build_options(args).check()
    train(run_options, resume=args.resume, progress=not args.quiet, overwrite=args.overwrite)
    return 0
