"""Every knob of a training run, by concern, with per-preset defaults and range checks.

    TrainOptions            a translation run: its parts
      .model   ModelChoice      preset, arch, tie, overrides (--set)
      .data    DataOptions      data_dir / tsv / src + tgt, skip_bad
      .vocabulary Vocabulary    tokenizer, vocab_size, placeholder_pieces, source_eos
      .recipe  Recipe           batch_tokens, lr_factor, warmup, label_smoothing, dropouts, bleu_sentences
      .loop    LoopOptions      steps, minutes, patience, run_dir, checkpoints, logging, accum, clip, seed
      .hardware Hardware        device, bf16, compile
      .start   StartOptions     init (--init RUN: fine-tune from a run's weights), freeze (train/init.py)

The loop and the hardware are the one trainer's (train/loop.py), shared with the language model's run
(train/lm.py LMOptions). Every field makes its own flag and checks its own range (clearformer/options.py).
The options are plain data (saved as JSON in every checkpoint's trainer_state.json), so a resumed run
uses exactly the options of the run it continues.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from clearformer.config import ARCHITECTURES, PRESETS
from clearformer.errors import UserError
from clearformer.limits import MAX_SEED, MAX_VOCAB
from clearformer.options import Options, option, part
from clearformer.tokenize.placeholders import check_patterns

# The toy preset must learn its phrase set in well under a minute on a laptop CPU: a word
# vocabulary, small batches, a short warmup and a fixed number of steps.
TOY_DEFAULTS = dict(tokenizer="words", batch_tokens=600, warmup=100, lr_factor=1.0, steps=400,
                    eval_every=100, save_every=200, patience=0, bleu_sentences=60, mask_placeholders=False)
# The paper's recipe scaled to a CPU: subwords, 4k-token batches, 4000 warmup steps.
REAL_DEFAULTS = dict(tokenizer="sentencepiece", mask_placeholders=True, batch_tokens=4096, warmup=4000, lr_factor=1.0,
                     steps=None,
                     eval_every=500, save_every=500, patience=10, bleu_sentences=200)
TIES = ("none", "decoder", "all")
# --freeze's parts: the parameter names (prefixes) each covers (train/init.py freezes them).
FREEZABLE = {"embeddings": ("src_embed.", "tgt_embed."), "encoder": ("encoder.",), "decoder": ("decoder.",)}
TOKENIZERS = ("words", "sentencepiece")
COMPILE_CHOICES = ("auto", "on", "off")


@dataclass
class ModelChoice(Options):
    """Which model: a preset (config.PRESETS), its architecture, shared embeddings, config overrides.

    arch: "transformer", or "rnn": the GRU encoder-decoder with attention of model/rnn.py, with the
    preset's width, depth, dropout and max_len; tie: "all" needs the joint vocabulary; overrides:
    ModelConfig fields (`--set FIELD=VALUE`, parsed by the command)."""

    title: ClassVar[str] = "model"
    preset: str = option("toy-translate", "--preset", "model size (toy-translate, small, base, big)")
    arch: str = option("transformer", "--arch", "transformer (default), or rnn: the GRU encoder-decoder with "
                       "attention the paper replaced (model/rnn.py), with the preset's width, depth and dropout, "
                       "trained by the same recipe (default --out runs/<preset>-rnn)", choices=tuple(ARCHITECTURES))
    tie: str = option("all", "--tie", "shared embeddings (default all)", choices=TIES)
    overrides: dict = field(default_factory=dict)


@dataclass
class DataOptions(Options):
    """The corpus: a folder with train/valid/test.tsv, or the user's files (2% held out for validation)."""

    title: ClassVar[str] = "data (default: the built-in phrase set for toy presets, data/en-fr-software otherwise)"
    data_dir: str | None = option(None, "--data", "corpus folder: train/valid/test.tsv; or a translated gettext "
                                  "catalogue (.po): its translated entries as pairs (10%% held out)", metavar="DIR")
    tsv: str | None = option(None, "--tsv", "your corpus as source<TAB>target lines (2%% held out)",
                             metavar="FILE")
    src: str | None = option(None, "--src", "your source sentences, one a line (with --tgt)", metavar="FILE")
    tgt: str | None = option(None, "--tgt", "their translations, line by line", metavar="FILE")
    skip_bad: bool = option(False, "--skip-bad", "skip malformed corpus lines (counted in the log) instead of "
                            "stopping", action="store_true")

    def check(self) -> DataOptions:
        super().check()
        if sum([self.data_dir is not None, self.tsv is not None, self.src is not None or self.tgt is not None]) > 1:
            raise UserError("give one corpus: --data DIR, --tsv FILE, or --src FILE --tgt FILE")
        if (self.src is None) != (self.tgt is None):
            raise UserError("--src and --tgt go together")
        return self


@dataclass
class Vocabulary(Options):
    """The tokenizer (joint vocabulary always) and the tokenization facts it keeps (tokenize/facts.py).

    source_eos: <eos> appended to every source; placeholder_pieces: the placeholders frequent in the
    training sources (`%s`, `{0}`, ...) become single SentencePiece pieces, which decoding copies
    exactly (generate/constraints.py); mask_placeholders: each placeholder becomes a reserved token ｟ph{i}｠
    before the model and is restored after (tokenize/placeholders.py; on for the real presets, off for the
    toy ones, whose phrases hold none); placeholder_patterns: extra regexes masked as placeholders too."""

    title: ClassVar[str] = "vocabulary"
    tokenizer: str = option("words", "--tokenizer", "vocabulary kind (joint)", choices=TOKENIZERS)
    vocab_size: int = option(8000, "--vocab-size", "SentencePiece vocabulary size (default 8000)", at_least=16,
                             at_most=MAX_VOCAB)
    placeholder_pieces: bool = option(True, "--placeholder-pieces", "keep frequent placeholders (%%s, {0}, <b>, "
                                      "...) as single SentencePiece pieces, which decoding then copies exactly "
                                      "(default on)", action=argparse.BooleanOptionalAction)
    source_eos: bool = option(True, "--source-eos", "append <eos> to every source sentence (kept by the "
                              "tokenizer; default on)", action=argparse.BooleanOptionalAction)
    mask_placeholders: bool = option(False, "--mask-placeholders", "replace each placeholder by a reserved token "
                                     "｟ph0｠, ｟ph1｠, ... before the model and restore its exact text after decoding "
                                     "(default on, off for toy presets)", action=argparse.BooleanOptionalAction)
    placeholder_patterns: list = option(flag="--placeholder-pattern", help="also mask what this regular "
                                        "expression matches (repeatable; kept by the tokenizer)", factory=list,
                                        action="append", metavar="REGEX")

    def check(self) -> Vocabulary:
        super().check()
        try:
            self.placeholder_patterns = list(check_patterns(self.placeholder_patterns or ()))
        except ValueError as error:
            raise UserError(f"--placeholder-pattern: {error}") from None
        return self


@dataclass
class Recipe(Options):
    """The paper's recipe for translation: token-count batches, the warmup schedule, label smoothing,
    dropout; and how much validation decodes for BLEU (0 = no BLEU)."""

    title: ClassVar[str] = "recipe"
    batch_tokens: int = option(4096, "--batch-tokens", "padded tokens per batch (and per process)", at_least=8)
    lr_factor: float = option(1.0, "--lr-factor", "multiplies the paper's learning-rate schedule (with --init: "
                              "0.02 by default)", above=0.0)
    warmup: int = option(4000, "--warmup", "warmup steps of the schedule (with --init: 20 by default)", at_least=1)
    label_smoothing: float = option(0.1, "--label-smoothing", "epsilon of label smoothing (default 0.1; 0 with "
                                    "--init)", at_least=0.0, below=1.0)
    dropout: float | None = option(None, "--dropout", "residual + embedding dropout (default: the preset's)",
                                   at_least=0.0, below=1.0)
    attention_dropout: float = option(0.0, "--attention-dropout", "dropout on attention weights (default 0)",
                                      at_least=0.0, below=1.0)
    ffn_dropout: float = option(0.0, "--ffn-dropout", "dropout in the feed-forward layer (default 0)",
                                at_least=0.0, below=1.0)
    bleu_sentences: int = option(200, "--bleu-sentences", "validation sentences decoded for BLEU (0 = none)",
                                 metavar="N", at_least=0)


@dataclass
class LoopOptions(Options):
    """The one trainer's loop (train/loop.py), for translation and the language model alike.

    Length: steps and/or minutes (whichever ends first), patience (validations without a better
    validation loss before stopping, 0 = never early). Checkpoints: run_dir, save_every (steps), keep
    (last N step checkpoints kept for averaging). eval_every, log_every (metrics.csv rows); accum
    (batches per optimizer step), clip (max gradient norm, 0 = off), seed."""

    title: ClassVar[str] = "the training loop: how long, checkpoints, logging"
    steps: int | None = option(None, "--steps", "stop after N optimizer steps", metavar="N", at_least=1)
    minutes: float | None = option(None, "--minutes", "stop after N minutes of training (validation and "
                                   "checkpoints not counted; whichever of --steps/--minutes comes first)",
                                   above=0.0)
    patience: int = option(10, "--patience", "stop after N validations without progress (0: never)",
                           metavar="N", at_least=0)
    eval_every: int = option(500, "--eval-every", "validation every N steps", metavar="N", at_least=1)
    run_dir: str = option("", "--out", "run directory (default: runs/<preset>)", metavar="DIR")
    save_every: int = option(500, "--save-every", "write a resumable checkpoint every N steps", metavar="N",
                             at_least=1)
    keep: int = option(5, "--keep", "step checkpoints kept for `clearformer average`", metavar="N", at_least=1)
    log_every: int = option(10, "--log-every", "a metrics.csv row every N steps", metavar="N", at_least=1)
    accum: int = option(1, "--accum", "batches accumulated per optimizer step (and per process)", at_least=1)
    clip: float = option(1.0, "--clip", "max gradient norm (0 = no clipping; default 1)", at_least=0.0)
    seed: int = option(1, "--seed", "random seed", metavar="N", at_least=0, at_most=MAX_SEED)

    def check(self) -> LoopOptions:
        super().check()
        if self.steps is None and self.minutes is None and self.patience == 0:
            raise UserError("say how long to train: --steps N, --minutes N or --patience N (early stopping)")
        return self


@dataclass
class Hardware(Options):
    """Where the run computes: device ("cpu", "cuda", "cuda:1", "auto"), bf16 autocast, and compile
    ("auto", "on", "off": the training step through torch.compile; auto = eager for now, devices.use_compile)."""

    title: ClassVar[str] = "hardware"
    device: str = option("cpu", "--device", "cpu, cuda, cuda:N or auto (default cpu)")
    bf16: bool = option(False, "--bf16", "bfloat16 autocast", action="store_true")
    compile: str = option("auto", "--compile", "compile the training step with torch.compile: on, off, or auto "
                          "(default: eager for now, see docs/gpu.md; falls back to eager with a warning if "
                          "compiling fails)", choices=COMPILE_CHOICES)


@dataclass
class StartOptions(Options):
    """Where the weights start: the preset's random init (default), or another translation run's weights,
    tokenizer and architecture (`--init RUN`, train/init.py), some of its parts frozen (`--freeze`)."""

    title: ClassVar[str] = "fine-tuning: start from a run (docs/adapt.md)"
    init: str | None = option(None, "--init", "start from this translation run's weights, keeping its tokenizer, "
                              "vocabulary and architecture (a run trained here, `clearformer import marian`, ...); "
                              "the fine-tuning recipe becomes the default (docs/adapt.md)", metavar="RUN")
    freeze: str = option("", "--freeze", "with --init: parts that do not train, comma-separated: embeddings, "
                         "encoder, decoder", metavar="PARTS")

    @property
    def frozen(self) -> tuple[str, ...]:
        """--freeze as names: "embeddings,encoder" -> ("embeddings", "encoder")."""
        return tuple(name.strip() for name in self.freeze.split(",") if name.strip())

    def check(self) -> StartOptions:
        super().check()
        unknown = [name for name in self.frozen if name not in FREEZABLE]
        if unknown:
            raise UserError(f"--freeze {unknown[0]!r}: not a part; choose from {', '.join(FREEZABLE)}")
        if self.frozen and self.init is None:
            raise UserError("--freeze needs --init RUN: a model trained from scratch has nothing to keep")
        return self


@dataclass
class TrainOptions(Options):
    """What to train, on what, for how long, and how: one part per concern (the module docstring)."""

    model: ModelChoice = part(ModelChoice)
    data: DataOptions = part(DataOptions)
    vocabulary: Vocabulary = part(Vocabulary)
    recipe: Recipe = part(Recipe)
    loop: LoopOptions = part(LoopOptions)
    hardware: Hardware = part(Hardware)
    start: StartOptions = part(StartOptions)

    @classmethod
    def for_preset(cls, preset: str = "toy-translate", **values) -> TrainOptions:
        """The options `clearformer train --preset PRESET` starts from (the preset's recipe, `preset_defaults`),
        with flat field `values` over them (not checked: `train` checks)."""
        return cls.from_values(**{**preset_defaults(preset), "preset": preset, **values})

    @property
    def preset(self) -> str:
        """The model preset (what the trainer's log and meta.json name the run by)."""
        return self.model.preset

    def check(self) -> TrainOptions:
        """Every part's ranges, then what relates the model to the rest; return self."""
        model = self.model
        if self.start.init is not None:  # the model is the run's (train/init.py), whatever preset names it
            super().check()
            if self.loop.run_dir and Path(self.start.init).resolve() == Path(self.loop.run_dir).resolve():
                raise UserError(f"--init {self.start.init}: the run to start from cannot be --out, the run "
                                "being written")
            return self
        if model.preset not in PRESETS:
            raise UserError(f"unknown preset {model.preset!r}; choose one of: {', '.join(PRESETS)}")
        if PRESETS[model.preset].get("n_encoder_layers", 1) == 0:
            raise UserError(f"preset {model.preset!r} is a decoder-only language model: train it with "
                            f"`clearformer lm`")
        super().check()
        if "architecture" in model.overrides:
            raise UserError("--set architecture: choose the model with --arch transformer|rnn")
        check_architecture_options(self)
        return self


def check_architecture_options(o: TrainOptions) -> None:
    """--arch with an architecture that reads only some config fields (config.ARCHITECTURES, e.g. the GRU
    baseline): a one-line error for an option it has nothing to apply to."""
    reads = ARCHITECTURES[o.model.arch]
    if reads is None:
        return
    foreign = [name for name in o.model.overrides if name not in reads]
    if foreign:
        raise UserError(f"--set {foreign[0]}: does not apply to --arch {o.model.arch} (it has no heads, feed-forward "
                        f"layers, positions or norms; it reads {', '.join(n for n in reads if n != 'architecture')})")
    for name in ("attention_dropout", "ffn_dropout"):  # the Transformer's sublayers (ModelConfig)
        if getattr(o.recipe, name):
            raise UserError(f"--{name.replace('_', '-')}: does not apply to --arch {o.model.arch} "
                            f"(it has no {'attention-weight' if name[0] == 'a' else 'feed-forward'} "
                            f"dropout; --dropout sets its embedding and layer dropout)")


def is_toy(preset: str) -> bool:
    return preset.startswith("toy")


def preset_defaults(preset: str) -> dict:
    """The option defaults a preset brings (the toy one trains on the built-in set by default)."""
    if is_toy(preset):
        return dict(TOY_DEFAULTS)
    # The paper warms up for 4000 steps of 25k-token batches; `small` is meant for a CPU run of
    # 2048-token batches, where a short warmup pays (BENCHMARKS.md, "Translation quality after 25 CPU
    # minutes (en-fr-software)", benchmarks/quality.py).
    return dict(REAL_DEFAULTS, batch_tokens=2048, warmup=400) if preset == "small" else dict(REAL_DEFAULTS)
