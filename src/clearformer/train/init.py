"""Fine-tuning: a run that starts from another translation run's weights (`clearformer train --init RUN`).

The starting run is read through the one run-loading API (`store.checkpoint.load_model`), so any run
whose architecture clearformer knows works: a run trained here, one imported with `clearformer import
marian`, or any other importer that writes a run folder. The new run keeps the starting run's
tokenizer (so its vocabulary and ids), its config (architecture, sizes, positions, tying) and its
weights; a flag that would change them (`REFUSED_WITH_INIT`) is refused by name before any work.

What it may change: the data, the recipe (learning rate, warmup, dropout, batch size, label smoothing),
the loop, and `--freeze`: the parameters of the named parts get `requires_grad = False`, so they get
no gradient, Adam skips them, and they end the run bit for bit as they started (a part tied to another,
such as an output layer sharing the target embedding, is frozen with it).

The fine-tuning recipe (`FINE_TUNE_DEFAULTS`) replaces the from-scratch one when --init is given: a
lower learning rate, a short warmup and no label smoothing, chosen by measurement (BENCHMARKS.md,
"Fine-tuning: the recipe (train --init)", benchmarks/adapt.py).

The run records where it started (`InitRecord`: the run's path and name, the SHA-256 of its weights
file, its step and preset) in meta.json and in every step checkpoint, and the validation loss of the
starting weights on the new data (validated at step 0, train/loop.py), which every later validation is
compared with: a run that only gets worse says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from clearformer.data.catalogue_pairs import read_catalogue_pairs
from clearformer.data.deb import sha256_file
from clearformer.errors import UserError
from clearformer.limits import MAX_JSON_FILE_BYTES
from clearformer.load import load_model, read_config
from clearformer.model.build import build_model
from clearformer.store.atomic import atomic_write_bytes
from clearformer.store.checkpoint import META_FILE, WEIGHTS_FILE, model_tensors
from clearformer.store.safeio import read_bytes, read_json
from clearformer.train.options import FREEZABLE, Recipe, StartOptions

# Flags that would change what --init keeps: the tokenizer, the vocabulary, the architecture (field -> flag).
REFUSED_WITH_INIT = {"preset": "--preset", "arch": "--arch", "tie": "--tie", "tokenizer": "--tokenizer",
                     "vocab_size": "--vocab-size", "placeholder_pieces": "--placeholder-pieces",
                     "source_eos": "--source-eos", "mask_placeholders": "--mask-placeholders",
                     "placeholder_patterns": "--placeholder-pattern"}
# Files of an imported run that are not weights, tokenizer or config (interop/marian_bin_import.py), kept by a
# fine-tuned run.
COMPANION_FILES = ("MODEL_LICENSE.txt", "provenance.json", "engine_tokenizer.json")
# The recipe when --init is given (flags still override each field): the paper's schedule at a low factor with a
# short warmup, and no label smoothing. Chosen in BENCHMARKS.md, "Fine-tuning: the recipe (train --init)", among
# candidates given the same steps on Firefox's en-pt student: the old default's long warmup climbed past a rate
# that unlearns, higher peaks lost BLEU too, and label smoothing spent the steps flattening a distilled student's
# peaky distributions rather than learning the new text.
FINE_TUNE_DEFAULTS = dict(lr_factor=0.02, warmup=20, label_smoothing=0.0, eval_every=200, save_every=200,
                          patience=10, bleu_sentences=200)
# From a translated catalogue (--data CATALOGUE.po): hundreds of pairs, a few training steps an epoch (4096-token
# batches). The best model comes after a few epochs and the next ones overfit (BENCHMARKS.md, "Learning from the
# catalogue"), so validation comes about once an epoch (`catalogue_recipe`) and early stopping ends the run after
# 5 validations without a better loss; a step checkpoint is written at the end only (the best model is saved when
# found).
CATALOGUE_PATIENCE = 5
PAIRS_PER_STEP = 120  # a catalogue's pairs in one 4096-token batch, about (Django's and Synaptic's pt_BR)


def catalogue_recipe(path: str | Path) -> dict:
    """The loop's defaults for fine-tuning on the catalogue at `path` (flags override them): a validation about
    every epoch (at least every 3 steps), early stopping after CATALOGUE_PATIENCE of them without progress."""
    steps_per_epoch = len(read_catalogue_pairs(path)) // PAIRS_PER_STEP
    every = max(3, steps_per_epoch)
    return dict(eval_every=every, save_every=10 * every, patience=CATALOGUE_PATIENCE, keep=1)


@dataclass(frozen=True)
class InitRecord:
    """Where a fine-tuned run started: the run's path and folder name, the SHA-256 of its weights file,
    its step and preset (None for an imported run); the starting weights' validation loss on the new data."""

    run: str
    name: str
    weights_sha256: str
    step: int | None = None
    preset: str | None = None
    valid_loss_at_start: float | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> InitRecord | None:
        if not isinstance(data, dict):
            return None
        known = {item.name for item in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

    def with_start_loss(self, loss: float) -> InitRecord:
        return dataclasses.replace(self, valid_loss_at_start=loss)


def check_init_flags(given: dict, set_items: list[str]) -> None:
    """--init with a flag that would change the starting run's tokenizer, vocabulary or architecture: one line."""
    if set_items:
        raise UserError(f"--set {set_items[0].partition('=')[0]}: --init RUN keeps the run's architecture; "
                        "drop --set (or train from scratch without --init)")
    for name, flag in REFUSED_WITH_INIT.items():
        if name in given:
            raise UserError(f"{flag}: --init RUN keeps the run's tokenizer, vocabulary and architecture; "
                            f"drop {flag} (or train from scratch without --init)")


def init_values(run: Path) -> dict:
    """The option values a run started from `run` takes from it: its preset's name (or "imported") and its
    architecture, read from its config and meta.json, for the log, meta.json and the default data."""
    if not run.is_dir():
        raise UserError(f"--init {run}: no such run directory")
    config = read_config(run)
    meta = read_json(run / META_FILE) if (run / META_FILE).exists() else {}
    name = meta.get("preset") if isinstance(meta, dict) and isinstance(meta.get("preset"), str) else "imported"
    return {"preset": name, "arch": config.architecture}


def load_init(start: StartOptions, recipe: Recipe):
    """(tokenizer, model in train mode, InitRecord) of the run --init names; the recipe's dropouts (--dropout, and
    --attention-dropout / --ffn-dropout when not 0) replace the config's: the only config fields a fine-tuning run
    may change (they have no weights)."""
    run = Path(start.init)  # never --out: TrainOptions.check refused that before the run folder was claimed
    model, tokenizer, meta = load_model(run)
    if model.config.n_encoder_layers == 0:
        raise UserError(f"--init {run}: a language model run; `clearformer train` fine-tunes translation runs")
    given = (("dropout", recipe.dropout), ("attention_dropout", recipe.attention_dropout or None),
             ("ffn_dropout", recipe.ffn_dropout or None))  # None: not given (the two sublayer rates default to 0)
    rates = {name: value for name, value in given if value is not None and value != getattr(model.config, name)}
    if rates:
        weights = model_tensors(model)
        model = build_model(dataclasses.replace(model.config, **rates))
        model.load_state_dict(weights, strict=False)
    step = meta.get("step") if isinstance(meta.get("step"), int) else None
    preset = meta.get("preset") if isinstance(meta.get("preset"), str) else None
    # The full path: `average --with-start` reads the start again, maybe from another folder.
    record = InitRecord(str(run.resolve()), run.resolve().name, sha256_file(run / WEIGHTS_FILE), step, preset)
    return tokenizer, model.train(), record


def carry_companions(start: Path, run_dir: Path) -> list[str]:
    """Copy the starting run's companion files into the new run (the names written): an imported model's licence
    notice (MPL-2.0 asks that it travel with the weights, fine-tuned or not), its provenance and the engine's own
    tokenizer file, without which `export --to marian-bin` cannot ship the run back to its engine."""
    copied = []
    for name in COMPANION_FILES:
        source = Path(start) / name
        if source.is_file() and not source.is_symlink():
            atomic_write_bytes(run_dir / name, read_bytes(source, MAX_JSON_FILE_BYTES, missing="missing"))
            copied.append(name)
    return copied


def freeze(model: torch.nn.Module, parts: tuple[str, ...]) -> int:
    """Parameters of `parts` (names of FREEZABLE) stop training; returns how many values were frozen.
    A UserError when a part names no parameter of this model, or nothing would be left to train."""
    frozen = 0
    for part in parts:
        prefixes = FREEZABLE[part]
        chosen = [p for name, p in model.named_parameters() if name.startswith(prefixes)]
        if not chosen:
            raise UserError(f"--freeze {part}: this model has no {part} parameters")
        for parameter in chosen:
            frozen += parameter.numel() if parameter.requires_grad else 0
            parameter.requires_grad_(False)
    if parts and not any(p.requires_grad for p in model.parameters()):
        raise UserError(f"--freeze {','.join(parts)}: nothing is left to train")
    return frozen
