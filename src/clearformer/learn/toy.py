"""The trained toy translator the lessons record the learner's sentence with.

The lessons read `runs/toy-translate` ($CLEARFORMER_RUNS/toy-translate), the run that
`clearformer train --preset toy-translate` writes; when it is missing, it is trained there once
(about half a minute on a laptop CPU), with a one-line note on standard error. `--checkpoint DIR`
reads another run instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

from clearformer.errors import UserError
from clearformer.explain.translation import explain_translation
from clearformer.learn.lessons import LearnerRun
from clearformer.store.checkpoint import load_model
from clearformer.store.runs import default_run_dir

TOY_PRESET = "toy-translate"
DEFAULT_SENTENCE = "I love you"


def toy_run_dir() -> Path:
    return default_run_dir(TOY_PRESET)


def ensure_toy_model(checkpoint: str | Path | None = None) -> Path:
    """The run to read: `checkpoint` if given, else runs/toy-translate, trained first if missing."""
    if checkpoint is not None:
        return Path(checkpoint)
    run_dir = toy_run_dir()
    if (run_dir / "model.safetensors").exists():
        return run_dir
    if run_dir.exists() and any(run_dir.iterdir()):
        raise UserError(f"{run_dir} holds no finished model: finish it with `clearformer train --preset "
                        f"{TOY_PRESET} --resume`, or pass --checkpoint DIR")
    print(f"clearformer learn: no toy model yet; training one into {run_dir} (once, about half a minute)",
          file=sys.stderr, flush=True)
    from clearformer.cli import main  # the `train` command itself, so the run is the documented one

    code = main(["train", "--preset", TOY_PRESET, "--quiet"])
    if code != 0:
        raise UserError(f"training the toy model into {run_dir} failed (exit {code})")
    return run_dir


def record_sentence(sentence: str = DEFAULT_SENTENCE, checkpoint: str | Path | None = None) -> LearnerRun:
    """Translate `sentence` with the toy model under the recorder (exactly as `clearformer explain` does)."""
    path = ensure_toy_model(checkpoint)
    model, tokenizer, _ = load_model(path)
    if model.config.n_encoder_layers == 0 or model.config.architecture != "transformer":
        raise UserError(f"{path}: the lessons read a Transformer translator (a run of `clearformer train`), "
                        "not a language model or the GRU baseline")
    walk = explain_translation(model, tokenizer, sentence)
    return LearnerRun(sentence, walk, model.config.tgt_vocab_size)
