"""One front for every training run, a translation model's or a language model's, fresh or continued:

    train(options, resume=False)        TrainOptions: the paper's recipe (train/setup.py `prepare`, train/task.py);
                                        LMOptions: nanoGPT's (train/lm.py `prepare_language_model`);
                                        either way the one trainer (train/loop.py) runs it
    resume_options(run_dir, kind)       the options a run was saved with ("translate" or "lm"), to continue it

`clearformer train`, `clearformer lm train`, the lessons' toy model and the benchmarks all start here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from clearformer.errors import UserError
from clearformer.store import lock
from clearformer.train import rundir, state
from clearformer.train.lm import LMOptions, prepare_language_model
from clearformer.train.loop import TrainResult, run_setup
from clearformer.train.options import TrainOptions
from clearformer.train.setup import prepare

# A run's kind (trainer_state.json "task") -> its options and the command that continues it.
KINDS: dict[str, tuple[type, str]] = {"translate": (TrainOptions, "train"), "lm": (LMOptions, "lm train")}


def train(options: TrainOptions | LMOptions, resume: bool = False, progress: bool = True, overwrite: bool = False,
          fresh: Callable | None = None) -> TrainResult:
    """Train (or with `resume` continue) the run in options.loop.run_dir; the run folder's lock (store/lock.py,
    taken while preparing) is released at the end. fresh() -> (tokenizer, model, train_lines, valid_lines)
    builds a new language model run (`clearformer lm train`); a translation run builds its own."""
    run_dir = Path(options.loop.run_dir)
    try:
        if isinstance(options, LMOptions):
            setup = prepare_language_model(options, resume, overwrite, fresh)
        else:
            setup = prepare(options, resume, run_dir, overwrite)
        return run_setup(setup, progress)
    finally:
        lock.release(run_dir)


def resume_options(run_dir: str | Path, kind: str = "translate", **changes) -> TrainOptions | LMOptions:
    """The options of the `kind` run in `run_dir` (from its newest step checkpoint), with `changes` (flat option
    names: steps, minutes, device, corpus, ...; None = keep) applied; a UserError for a folder without a
    checkpoint or a run of the other kind (naming the command that continues it)."""
    options_class, command = KINDS[kind]
    run_dir = Path(run_dir)
    checkpoints = state.step_checkpoints(run_dir)
    if not checkpoints:
        raise rundir.no_checkpoint(run_dir, command)
    saved = state.load_step_checkpoint(checkpoints[-1])[2]
    saved_kind = saved.get("task", "translate")
    if saved_kind != kind:
        what = "a language-model run" if saved_kind == "lm" else "a translation run"
        other = KINDS.get(saved_kind, KINDS["translate"])[1]
        raise UserError(f"{run_dir}: {what}; continue it with `clearformer {other} --resume --out {run_dir}`")
    options = options_class.from_dict(saved["options"], f"{checkpoints[-1]}/trainer_state.json options")
    return options.with_values(**{name: value for name, value in changes.items() if value is not None},
                               run_dir=str(run_dir))
