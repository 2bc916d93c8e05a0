"""`clearformer average`: average the weights of a run's last N checkpoints (the paper, section 6.1), or blend a
fine-tuned run with the weights it started from (`--with-start W`: WiSE-FT, Wortsman et al. 2022)."""

from __future__ import annotations

from pathlib import Path

from clearformer.data.deb import sha256_file
from clearformer.errors import UserError
from clearformer.limits import check_model_size
from clearformer.load import load_config_and_tokenizer, load_decoding_facts
from clearformer.model.build import build_model
from clearformer.store.checkpoint import META_FILE, WEIGHTS_FILE, load_weights_into, save_model
from clearformer.store.lock import owned_output
from clearformer.store.runs import latest_checkpoint, mark_latest_if_default
from clearformer.store.safeio import read_json
from clearformer.train.init import InitRecord, carry_companions
from clearformer.train.state import average_weights, step_checkpoints


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "average", help="average the last N checkpoints of a training run into one model",
        description="Average the weights of the newest N step checkpoints of a run (the paper averages the "
                    "last 5 for its base models). The result is a normal checkpoint directory, marked as the "
                    "latest model.")
    p.add_argument("run", nargs="?", help="run directory (default: the run of the latest model)")
    p.add_argument("--last", type=int, metavar="N", help="how many to average (default 5)")
    p.add_argument("--checkpoints", nargs="+", metavar="DIR", help="average these checkpoints instead")
    p.add_argument("--out", metavar="DIR", help="where to write the average (default: RUN/averaged)")
    p.add_argument("--with-start", type=float, metavar="W",
                   help="instead: blend a fine-tuned run (train --init) with the weights it started from, "
                        "W x start + (1 - W) x fine-tuned, 0 < W < 1 (WiSE-FT): the start's knowledge kept in "
                        "proportion (docs/adapt.md); default --out RUN/with-start")
    p.add_argument("--overwrite", action="store_true", help="--out holds a run (an earlier average): replace it")
    p.set_defaults(func=run_average)


def run_with_start(args) -> int:
    """`average RUN --with-start W`: the fine-tuned run's model and its start's, blended (checked: the start's
    weights are still the ones the run recorded)."""
    if args.checkpoints or args.last is not None:
        raise UserError("--with-start blends a run's model with its start: it takes no "
                        + ("--checkpoints" if args.checkpoints else "--last"))
    if not 0 < args.with_start < 1:  # also false for NaN
        raise UserError(f"--with-start {args.with_start:g}: give the start's share, above 0 and below 1")
    run = Path(args.run) if args.run else default_run()
    meta = read_json(run / META_FILE, missing="no meta.json (not a clearformer run)")
    try:
        init = InitRecord.from_dict(meta.get("init") if isinstance(meta, dict) else None)
    except TypeError:
        raise UserError(f"{run / META_FILE}: its `init` record is damaged (fields missing)") from None
    if init is None or not isinstance(init.run, str) or not isinstance(init.weights_sha256, str):
        raise UserError(f"{run}: not a fine-tuned run (meta.json records no `init`): --with-start blends a "
                        "`train --init` run with the weights it started from")
    start = Path(init.run)
    if not (start / WEIGHTS_FILE).is_file():
        raise UserError(f"{start}: the run {run} started from is gone; --with-start needs its weights")
    if sha256_file(start / WEIGHTS_FILE) != init.weights_sha256:
        raise UserError(f"{start / WEIGHTS_FILE}: not the weights {run} started from (its SHA-256 changed since)")
    config, tokenizer = load_config_and_tokenizer(run)
    check_model_size(config, str(run / "config.json"))
    model = build_model(config)
    weight = args.with_start
    load_weights_into(model, average_weights([start, run], [weight, 1 - weight]), run / WEIGHTS_FILE)
    out = Path(args.out) if args.out else run / "with-start"
    meta["with_start"] = {"weight": weight, "start": init.run, "weights_sha256": init.weights_sha256}
    with owned_output(out, args.overwrite, "average"):
        save_model(out, model, tokenizer, meta, load_decoding_facts(run, tokenizer))  # the run's, as it decodes
        carry_companions(run, out)
    mark_latest_if_default(out)
    print(f"blended {run} with {weight:g} of the weights it started from ({start}) into {out}")
    return 0


def default_run() -> Path:
    path = latest_checkpoint()
    # The latest model is a run directory, or a directory inside one (a previous average).
    for candidate in (path, path.parent):
        if (candidate / "checkpoints").is_dir():
            return candidate
    raise UserError(f"{path}: not a training run with step checkpoints; pass the run directory")


def run_average(args) -> int:
    if args.with_start is not None:
        return run_with_start(args)
    if args.checkpoints:
        chosen = [Path(p) for p in args.checkpoints]
        for path in chosen:
            if not path.is_dir():
                raise UserError(f"{path}: no such checkpoint directory")
        out = Path(args.out) if args.out else chosen[-1].parent / "averaged"
    else:
        if args.last is None:
            args.last = 5
        if args.last < 1:
            raise UserError(f"--last must be at least 1, not {args.last}")
        run = Path(args.run) if args.run else default_run()
        if not run.is_dir():
            raise UserError(f"{run}: no such run directory")
        found = step_checkpoints(run)
        if not found:
            raise UserError(f"{run / 'checkpoints'}: no step checkpoints to average")
        if len(found) < args.last:
            raise UserError(f"{run / 'checkpoints'}: only {len(found)} checkpoint(s), --last {args.last} "
                            f"asked; train with --keep {args.last} or lower --last")
        chosen = found[-args.last:]
        out = Path(args.out) if args.out else run / "averaged"
    newest = chosen[-1]
    config, tokenizer = load_config_and_tokenizer(newest)
    check_model_size(config, str(newest / "config.json"))
    model = build_model(config)
    load_weights_into(model, average_weights(chosen), newest / "model.safetensors")
    meta = {}
    if (newest / "meta.json").exists():
        meta = read_json(newest / "meta.json")
        meta = meta if isinstance(meta, dict) else {}
    meta["averaged"] = [str(p) for p in chosen]
    with owned_output(out, args.overwrite, "average"):  # locked; never replaces a run without --overwrite
        save_model(out, model, tokenizer, meta, load_decoding_facts(newest, tokenizer))  # the newest's facts
    mark_latest_if_default(out)  # only a run inside runs/: --out elsewhere writes nothing else
    print(f"averaged {len(chosen)} checkpoints ({', '.join(p.name for p in chosen)}) into {out}")
    return 0
