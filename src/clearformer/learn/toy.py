"""The trained toy translator the lessons, the notebooks and `serve` (with no run of yours) read.

It lives in one place, the same wherever a command or a notebook kernel starts: the cache folder's
`toy-translate/` (`~/.cache/clearformer/toy-translate`, or $CLEARFORMER_CACHE/toy-translate:
store/cachedir.py; with CLEARFORMER_CACHE=off, a temporary folder removed at exit). It is never under
runs/, so training it never moves runs/LATEST. When it is missing it is trained there once (about half
a minute on a laptop CPU), in a child process: a notebook kernel may have switched gradients off, and
a library module never calls the command line. The child trains into `toy-translate.partial/`, which
is renamed into place only when training finished, under the lock `toy-translate.lock`: an
interrupted or failed training leaves nothing that blocks the next try, and a second command started
meanwhile says the model is in use. `--checkpoint DIR` reads another run instead. docs/learn.md says
so for users.

What stands in the cache is checked, never trusted (issue 41): a `CLEARFORMER_CACHE` that is a file or
cannot be written, a `toy-translate` that is a link, a file, or a folder clearformer did not make (it
marks its own with `TOY_MARK`), a lock that is not a regular file: each is one line, and nothing of the
user's is ever removed. With the cache off the model lives in a private temporary folder and needs no
lock (nothing is left in $TMPDIR).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from clearformer.data.toy import toy_pairs
from clearformer.errors import UserError
from clearformer.explain.translation import explain_translation
from clearformer.generate.source import unknown_words_line
from clearformer.learn.lessons import LearnerRun
from clearformer.load import load_decoding_facts, load_model
from clearformer.store.cachedir import cache_dir, cache_root, check_cache_entry, check_cache_folder
from clearformer.store.fixed import open_fixed, what_stands
from clearformer.store.lock import is_clearformer_run
from clearformer.train import TrainOptions, train

TOY_PRESET = "toy-translate"
TOY_MARK = ".clearformer-toy"  # in every toy-translate/ clearformer trained: the only kind it may replace
DEFAULT_SENTENCE = "I love you"
# TrainOptions fields the child trains with besides the preset's (none: the documented toy model; the
# tests make it smaller and shorter).
TOY_TRAINING: dict = {}


def toy_run_dir() -> Path:
    """Where the toy model lives: the cache's toy-translate/ (see the module docstring)."""
    return cache_dir(TOY_PRESET)


def ensure_toy_model(checkpoint: str | Path | None = None, command: str = "learn") -> Path:
    """The run to read: `checkpoint` if given, else the toy model, trained first (in a child) if missing."""
    if checkpoint is not None:
        return Path(checkpoint)
    root = cache_root()
    if root is not None:
        check_cache_folder(root)
    run_dir = toy_run_dir()
    if check_toy_folder(run_dir):
        return run_dir
    if root is None:  # the cache is off: a private temporary folder, which no other process shares
        train_toy_model(run_dir, command)
        return run_dir
    lock = open_lock(run_dir.parent / f"{TOY_PRESET}.lock")
    # The child trains holding it too (pass_fds): a parent killed mid-training leaves the lock held until the
    # child ends, so no next try removes the folder the child is writing.
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(lock, 200, 0).decode("utf-8", "replace").strip() or "another process"
            raise UserError(f"the toy model {run_dir} is in use: {holder} is training it; "
                            f"try again when it has finished (about half a minute)") from None
        os.ftruncate(lock, 0)
        os.pwrite(lock, f"PID {os.getpid()}".encode(), 0)
        if not check_toy_folder(run_dir):  # another process may have finished it meanwhile
            train_toy_model(run_dir, command, lock)
    finally:
        os.close(lock)  # also drops the flock
    return run_dir


def check_toy_folder(run_dir: Path) -> bool:
    """True when `run_dir` holds a model to read; False when nothing, or clearformer's own unfinished folder,
    is there (training may replace it); a one-line UserError for anything else, which is never touched."""
    return check_cache_entry(run_dir, "the lessons' toy model", (run_dir / "model.safetensors").exists(),
                             (run_dir / TOY_MARK).exists(), "move it away, or pass --checkpoint DIR")


def open_lock(path: Path) -> int:
    """The lock file's descriptor (a regular file, never through a link or a FIFO): one line otherwise."""
    try:
        return open_fixed(path, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        raise UserError(f"{path}: its folder vanished") from None


def train_toy_model(run_dir: Path, command: str, lock: int | None = None) -> None:
    """Train the toy preset into `run_dir` in a child process (`python -m clearformer.learn.toy DIR`)."""
    partial = run_dir.with_name(run_dir.name + ".partial")
    remove_own(partial)  # what an interrupted earlier try left
    print(f"clearformer {command}: no toy model yet; training one into {run_dir} (once, about half a minute)",
          file=sys.stderr, flush=True)
    try:  # the child's progress goes where our messages go (standard error), never into a lesson's output
        err = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a notebook kernel's stream: the child keeps its own
        err = None
    try:
        code = subprocess.run([sys.executable, "-m", "clearformer.learn.toy", str(partial),
                               json.dumps(TOY_TRAINING)], stdin=subprocess.DEVNULL,
                              stdout=err, pass_fds=() if lock is None else (lock,)).returncode
        if code != 0 or not (partial / "model.safetensors").exists():
            raise UserError(f"training the toy model into {run_dir} failed (exit {code}); nothing was kept: "
                            f"run `clearformer learn 1` to try again, or pass --checkpoint DIR")
        (partial / TOY_MARK).write_text("the lessons' toy model, trained by clearformer (learn/toy.py)\n")
        if os.path.lexists(run_dir):  # empty, or ours unfinished (check_toy_folder said so)
            remove_own(run_dir)
        os.replace(partial, run_dir)
    finally:
        remove_own(partial)


def remove_own(folder: Path) -> None:
    """Remove `folder` only if clearformer made it: one training wrote into (the `.partial` it trains into gets
    the run marker first, store/lock.py), an empty folder, or one with the toy's mark; never a link, never a
    user's folder, whatever its name (a `toy-translate.partial/` holding a user's notes stays, in one line)."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        raise UserError(f"{folder}: {what_stands(mode)} stands where clearformer trains the toy model; move it away")
    if is_clearformer_run(folder) or (folder / TOY_MARK).exists() or not any(folder.iterdir()):
        shutil.rmtree(folder, ignore_errors=True)
    else:
        raise UserError(f"{folder}: a folder clearformer did not make; it is left as it is: move it away")


def load_toy_model(checkpoint: str | Path | None = None):
    """(model, tokenizer, path) of the lessons' translator (`ensure_toy_model`), a Transformer translator."""
    path = ensure_toy_model(checkpoint)
    model, tokenizer, _ = load_model(path)
    if model.config.n_encoder_layers == 0 or model.config.architecture != "transformer":
        raise UserError(f"{path}: the lessons read a Transformer translator (a run of `clearformer train`), "
                        "not a language model or the GRU baseline")
    return model, tokenizer, path


def known_words(tokenizer) -> list[str]:
    """The source words the model knows: its vocabulary's words found in the toy phrase set's English side
    (every token but the specials for a model trained on other data)."""
    tokens = [tokenizer.id_to_token(i) for i in range(len(tokenizer))]
    tokens = [t for t in tokens if not (t.startswith("<") and t.endswith(">"))]
    english = {word for source, _ in toy_pairs() for word in tokenizer.tokenize(source)}
    shown = [t for t in tokens if t in english] or tokens
    return sorted(shown, key=lambda word: (word.lower(), word))


def record_sentence(sentence: str = DEFAULT_SENTENCE, checkpoint: str | Path | None = None) -> LearnerRun:
    """Translate `sentence` with the toy model under the recorder (exactly as `clearformer explain` does).
    Words the model does not know are named in one warning line on standard error (they become <unk>)."""
    model, tokenizer, path = load_toy_model(checkpoint)
    walk = explain_translation(model, tokenizer, sentence, facts=load_decoding_facts(path, tokenizer))
    unknown = tokenizer.unknown_words(sentence)
    if unknown:
        print(f"clearformer learn: warning: {unknown_words_line(unknown)} "
              f"(`clearformer learn --vocab` lists the words the model knows)", file=sys.stderr)
    return LearnerRun(sentence, walk, model.config.tgt_vocab_size, Path(path))


def main(argv: list[str]) -> int:
    """The child: train the toy preset, as `clearformer train --preset toy-translate --quiet` does, into
    argv[0], with the TrainOptions fields of the JSON object argv[1] changed."""
    import torch

    torch.set_num_threads(1)  # the toy model's matrices are too small for a second thread (commands/train.py)
    try:
        options = TrainOptions.for_preset(TOY_PRESET, **json.loads(argv[1]), run_dir=argv[0])
        train(options, progress=False)
    except UserError as error:
        print(f"clearformer: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
