"""`clearformer train`: train a translation model (the toy phrase set, a corpus, or your own files)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from clearformer.commands import options
from clearformer.config import PRESETS, preset
from clearformer.devices import free_gpu_bytes, gpu_batch_tokens, resolve_device
from clearformer.errors import UserError
from clearformer.limits import check_model_size
from clearformer.store.runs import default_run_dir
from clearformer.store.safeio import loads_json
from clearformer.train import TrainOptions, resume_options, train
from clearformer.train.options import preset_defaults

# Options a resumed run may change; every other option comes from the checkpoint.
RESUMABLE = ("steps", "minutes", "device", "bf16", "compile")
TUNABLE = ("tokenizer", "vocab_size", "placeholder_pieces", "mask_placeholders", "placeholder_patterns",
           "batch_tokens", "accum", "lr_factor", "warmup",
           "label_smoothing", "clip", "dropout", "attention_dropout", "ffn_dropout", "seed", "patience",
           "save_every", "keep", "eval_every", "bleu_sentences", "log_every", "tie", "device", "bf16", "compile",
           "slow_down")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="train a Transformer (default: the toy English->French set, under a minute on CPU)",
        description="Train an encoder-decoder Transformer with the paper's recipe: label smoothing, Adam "
                    "with warmup, dropout, clipping, token-count batches; validation loss and BLEU; "
                    "checkpoints that --resume continues. Without options: the toy English->French model.")
    p.add_argument("--preset", default="toy-translate", help="model size (toy-translate, small, base, big)")
    p.add_argument("--arch", choices=["transformer", "rnn"], default=None,
                   help="transformer (default), or rnn: the GRU encoder-decoder with attention the paper replaced "
                        "(model/rnn.py), with the preset's width, depth and dropout, trained by the same recipe "
                        "(default --out runs/<preset>-rnn)")
    data = p.add_argument_group("data (default: the built-in phrase set for toy presets, "
                                "data/en-fr-software otherwise)")
    data.add_argument("--data", dest="data_dir", metavar="DIR", help="corpus folder: train/valid/test.tsv")
    data.add_argument("--tsv", metavar="FILE", help="your corpus as source<TAB>target lines (2%% held out)")
    data.add_argument("--src", metavar="FILE", help="your source sentences, one a line (with --tgt)")
    data.add_argument("--tgt", metavar="FILE", help="their translations, line by line")
    data.add_argument("--skip-bad", action="store_true", default=None,
                      help="skip malformed corpus lines (counted in the log) instead of stopping")
    length = p.add_argument_group("how long")
    length.add_argument("--steps", type=int, help="stop after N optimizer steps")
    length.add_argument("--minutes", type=float, help="stop after N minutes of training (validation and "
                        "checkpoints not counted; whichever of --steps/--minutes comes first)")
    length.add_argument("--patience", type=int, help="stop after N validations without progress (0: never)")
    run = p.add_argument_group("run directory and checkpoints")
    run.add_argument("--out", metavar="DIR", help="run directory (default: runs/<preset>)")
    run.add_argument("--resume", action="store_true", help="continue the run in --out (SIGKILL-safe)")
    run.add_argument("--overwrite", action="store_true",
                     help="--out holds a run: delete its files (model, checkpoints, metrics) and start afresh")
    run.add_argument("--save-every", type=int, metavar="N", help="write a resumable checkpoint every N steps")
    run.add_argument("--keep", type=int, metavar="N", help="step checkpoints kept for `clearformer average`")
    run.add_argument("--eval-every", type=int, metavar="N", help="validation loss and BLEU every N steps")
    run.add_argument("--bleu-sentences", type=int, metavar="N", help="validation sentences decoded for BLEU")
    run.add_argument("--log-every", type=int, metavar="N", help="a metrics.csv row every N steps (10)")
    recipe = p.add_argument_group("recipe")
    recipe.add_argument("--tokenizer", choices=["words", "sentencepiece"], help="vocabulary kind (joint)")
    recipe.add_argument("--vocab-size", type=int, help="SentencePiece vocabulary size (default 8000)")
    recipe.add_argument("--placeholder-pieces", action=argparse.BooleanOptionalAction, default=None,
                        help="keep frequent placeholders (%%s, {0}, <b>, ...) as single SentencePiece pieces, "
                             "which decoding then copies exactly (default on)")
    recipe.add_argument("--mask-placeholders", action=argparse.BooleanOptionalAction, default=None,
                        help="replace each placeholder by a reserved token ｟ph0｠, ｟ph1｠, ... before the model "
                             "and restore its exact text after decoding (default on, off for toy presets)")
    recipe.add_argument("--placeholder-pattern", dest="placeholder_patterns", action="append", metavar="REGEX",
                        help="also mask what this regular expression matches (repeatable; kept by the tokenizer)")
    recipe.add_argument("--tie", choices=["none", "decoder", "all"], help="shared embeddings (default all)")
    recipe.add_argument("--batch-tokens", type=int, help="padded tokens per batch (and per process)")
    recipe.add_argument("--accum", type=int, help="batches accumulated per optimizer step")
    recipe.add_argument("--lr-factor", type=float, help="multiplies the paper's learning-rate schedule")
    recipe.add_argument("--warmup", type=int, help="warmup steps of the schedule")
    recipe.add_argument("--label-smoothing", type=float, help="epsilon of label smoothing (default 0.1)")
    recipe.add_argument("--clip", type=float, help="max gradient norm (0 = no clipping; default 1)")
    recipe.add_argument("--dropout", type=float, help="residual + embedding dropout (default: the preset's)")
    recipe.add_argument("--attention-dropout", type=float, help="dropout on attention weights (default 0)")
    recipe.add_argument("--ffn-dropout", type=float, help="dropout in the feed-forward layer (default 0)")
    options.add_seed(recipe, None)
    recipe.add_argument("--source-eos", action=argparse.BooleanOptionalAction, default=None,
                        help="append <eos> to every source sentence (kept by the tokenizer; default on)")
    recipe.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="override a model config field, e.g. --set d_model=128 (repeatable)")
    hardware = p.add_argument_group("hardware")
    options.add_device(hardware, None)
    hardware.add_argument("--bf16", action="store_true", default=None, help="bfloat16 autocast")
    hardware.add_argument("--compile", choices=["auto", "on", "off"], default=None,
                          help="compile the training step with torch.compile (default auto: on CUDA only; "
                               "falls back to eager with a warning if compiling fails)")
    options.add_threads(hardware)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--slow-down", type=float, help=argparse.SUPPRESS)
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


def check_overrides(preset_name: str, arch: str, overrides: dict) -> None:
    """--set values that describe no buildable model (d_ff=-5, d_model=10**9) are refused before any work."""
    if arch != "transformer" or not overrides or preset_name not in PRESETS:
        return
    try:
        config = preset(preset_name, **{"src_vocab_size": 16, "tgt_vocab_size": 16, **overrides})
    except TypeError as error:
        raise UserError(f"--set: {error}") from None
    check_model_size(config, "--set")


def build_options(args):
    arch = args.arch or "transformer"
    run_dir = Path(args.out) if args.out else default_run_dir(args.preset + ("-rnn" if arch == "rnn" else ""))
    if args.resume and args.overwrite:
        raise UserError("--resume and --overwrite exclude each other: continue the run or replace it")
    if args.resume:
        changed = [name for name in TUNABLE if name not in RESUMABLE and getattr(args, name) is not None]
        if changed or args.set or args.data_dir or args.tsv or args.src or args.skip_bad or args.source_eos is not None:
            raise UserError("--resume continues with the run's saved options; only --steps, --minutes, "
                            "--device, --bf16 and --compile may change")
        options = resume_options(run_dir, args.steps, args.minutes)
        if args.arch is not None and args.arch != options.arch:
            raise UserError(f"{run_dir}: a run of --arch {options.arch}; --resume continues it as it was trained")
        for name in ("device", "bf16", "compile"):
            if getattr(args, name) is not None:
                setattr(options, name, getattr(args, name))
        options.run_dir = str(run_dir)
        return options
    fields = preset_defaults(args.preset)
    for name in TUNABLE + ("steps", "minutes", "data_dir", "tsv", "src", "tgt", "skip_bad"):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    if args.minutes is not None and args.steps is None:
        fields["steps"] = None  # a time budget alone replaces the preset's step count
    if args.batch_tokens is None and not args.preset.startswith("toy"):
        # On a GPU the CPU's batch leaves it idle: size it to the GPU's free memory (devices.gpu_batch_tokens).
        fields["batch_tokens"] = gpu_batch_tokens_for(args.preset, fields.get("device") or "cpu",
                                                      fields.get("vocab_size", 8000), fields["batch_tokens"])
    overrides = parse_overrides(args.set)
    if "source_eos" in overrides:  # a tokenization fact, no longer a model config field
        raise UserError("--set source_eos: use --source-eos or --no-source-eos (the tokenizer keeps it)")
    if "architecture" in overrides:
        raise UserError("--set architecture: choose the model with --arch transformer|rnn")
    check_overrides(args.preset, arch, overrides)
    if args.source_eos is not None:
        fields["source_eos"] = args.source_eos
    return TrainOptions(preset=args.preset, arch=arch, overrides=overrides, run_dir=str(run_dir), **fields)


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
    elif args.preset.startswith("toy"):
        # A toy model's matrices are so small that a second thread costs more in synchronisation than
        # it saves (and on a busy machine, far more).
        torch.set_num_threads(1)
    run_options = build_options(args)
    train(run_options, resume=args.resume, progress=not args.quiet, overwrite=args.overwrite)
    return 0
