"""`clearformer average`: average the weights of a run's last N checkpoints (the paper, section 6.1)."""

from __future__ import annotations

from pathlib import Path

from clearformer.errors import UserError
from clearformer.limits import check_model_size
from clearformer.load import load_config_and_tokenizer
from clearformer.model.build import build_model
from clearformer.store.checkpoint import load_weights_into, save_model
from clearformer.store.lock import owned_output
from clearformer.store.runs import latest_checkpoint, mark_latest_if_default
from clearformer.store.safeio import read_json
from clearformer.train.state import average_weights, step_checkpoints


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "average", help="average the last N checkpoints of a training run into one model",
        description="Average the weights of the newest N step checkpoints of a run (the paper averages the "
                    "last 5 for its base models). The result is a normal checkpoint directory, marked as the "
                    "latest model.")
    p.add_argument("run", nargs="?", help="run directory (default: the run of the latest model)")
    p.add_argument("--last", type=int, default=5, metavar="N", help="how many to average (default 5)")
    p.add_argument("--checkpoints", nargs="+", metavar="DIR", help="average these checkpoints instead")
    p.add_argument("--out", metavar="DIR", help="where to write the average (default: RUN/averaged)")
    p.add_argument("--overwrite", action="store_true", help="--out holds a run (an earlier average): replace it")
    p.set_defaults(func=run_average)


def default_run() -> Path:
    path = latest_checkpoint()
    # The latest model is a run directory, or a directory inside one (a previous average).
    for candidate in (path, path.parent):
        if (candidate / "checkpoints").is_dir():
            return candidate
    raise UserError(f"{path}: not a training run with step checkpoints; pass the run directory")


def run_average(args) -> int:
    if args.checkpoints:
        chosen = [Path(p) for p in args.checkpoints]
        for path in chosen:
            if not path.is_dir():
                raise UserError(f"{path}: no such checkpoint directory")
        out = Path(args.out) if args.out else chosen[-1].parent / "averaged"
    else:
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
        save_model(out, model, tokenizer, meta)
    mark_latest_if_default(out)  # only a run inside runs/: --out elsewhere writes nothing else
    print(f"averaged {len(chosen)} checkpoints ({', '.join(p.name for p in chosen)}) into {out}")
    return 0
