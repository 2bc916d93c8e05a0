"""Every knob of a training run, with per-preset defaults and range checks.

`TrainOptions` is plain data (saved as JSON in every checkpoint's trainer_state.json), so a
resumed run uses exactly the options of the run it continues.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from clearformer.config import PRESETS, RNN_FIELDS
from clearformer.errors import UserError
from clearformer.store.compat import upgrade_train_options
from clearformer.tokenize.placeholders import check_patterns

# The toy preset must learn its phrase set in well under a minute on a laptop CPU: a word
# vocabulary, small batches, a short warmup and a fixed number of steps.
TOY_DEFAULTS = dict(tokenizer="words", batch_tokens=600, warmup=100, lr_factor=1.0, steps=400,
                    eval_every=100, save_every=200, patience=0, bleu_sentences=60)
# The paper's recipe scaled to a CPU: subwords, 4k-token batches, 4000 warmup steps.
REAL_DEFAULTS = dict(tokenizer="sentencepiece", mask_placeholders=True, batch_tokens=4096, warmup=4000, lr_factor=1.0,
                     steps=None,
                     eval_every=500, save_every=500, patience=10, bleu_sentences=200)


@dataclass
class TrainOptions:
    """What to train, on what, for how long, and how.

    model: preset (a name in config.PRESETS), overrides (ModelConfig fields), tie ("none",
        "decoder", "all": shared embeddings; "all" needs the joint vocabulary), arch ("transformer",
        or "rnn": the GRU encoder-decoder with attention of model/rnn.py, with the preset's width,
        depth, dropout and max_len; runs saved before the field existed are Transformers).
    data: data_dir (train/valid/test.tsv), or tsv / src + tgt (a user corpus; 2% held out for
        validation), skip_bad (skip malformed lines instead of stopping at the first).
    tokenizer: "words" or "sentencepiece", vocab_size (subwords only), joint vocabulary always;
        source_eos: <eos> appended to every source (kept by the tokenizer: tokenize/facts.py);
        placeholder_pieces: the placeholders frequent in the training sources (`%s`, `{0}`, ...)
        become single SentencePiece pieces, which decoding copies exactly (generate/constraints.py);
        mask_placeholders: each placeholder becomes a reserved token ｟ph{i}｠ before the model and is
        restored after (tokenize/placeholders.py; on for the real presets, off for the toy ones, whose
        phrases hold none, and for runs saved before it existed), placeholder_patterns: extra regexes
        masked as placeholders too (kept by the tokenizer).
    recipe: batch_tokens (padded tokens per batch and process), accum (batches per update),
        lr_factor and warmup (the schedule), label_smoothing, clip (max gradient norm, 0 = off),
        dropout (residual + embedding dropout; None = the preset's), attention_dropout and ffn_dropout
        (on attention weights / the feed-forward hidden layer; 0 as in the paper), seed.
    length: steps and/or minutes (whichever ends first), patience (validations without a better
        validation loss before stopping, 0 = never stop early).
    checkpoints: run_dir, save_every (steps), keep (last N step checkpoints kept for averaging).
    validation: eval_every (steps), bleu_sentences (validation sentences decoded for BLEU, 0 = no BLEU).
    device: "cpu", "cuda", "cuda:1", "auto"; bf16 autocast; compile ("auto", "on", "off": the
        training step through torch.compile; auto = on CUDA only, see devices.use_compile).
    """

    preset: str = "toy-translate"
    arch: str = "transformer"
    overrides: dict = field(default_factory=dict)
    tie: str = "all"
    data_dir: str | None = None
    tsv: str | None = None
    src: str | None = None
    tgt: str | None = None
    skip_bad: bool = False
    tokenizer: str = "words"
    vocab_size: int = 8000
    placeholder_pieces: bool = True
    mask_placeholders: bool = False
    placeholder_patterns: list[str] = field(default_factory=list)
    source_eos: bool = True
    batch_tokens: int = 4096
    accum: int = 1
    lr_factor: float = 1.0
    warmup: int = 4000
    label_smoothing: float = 0.1
    clip: float = 1.0
    dropout: float | None = None
    attention_dropout: float = 0.0
    ffn_dropout: float = 0.0
    seed: int = 1
    steps: int | None = None
    minutes: float | None = None
    patience: int = 10
    run_dir: str = ""
    save_every: int = 500
    keep: int = 5
    eval_every: int = 500
    bleu_sentences: int = 200
    log_every: int = 10
    device: str = "cpu"
    bf16: bool = False
    compile: str = "auto"
    slow_down: float = 0.0  # seconds of sleep per step; only the kill -9 resume test uses it

    def validate(self) -> None:
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise UserError(message)

        need(self.preset in PRESETS, f"unknown preset {self.preset!r}; choose one of: {', '.join(PRESETS)}")
        need(not PRESETS[self.preset].get("n_encoder_layers", 1) == 0,
             f"preset {self.preset!r} is a decoder-only language model: train it with `clearformer lm`")
        need(self.tie in ("none", "decoder", "all"), f"--tie must be none, decoder or all, not {self.tie!r}")
        need(self.arch in ("transformer", "rnn"), f"--arch must be transformer or rnn, not {self.arch!r}")
        need("architecture" not in self.overrides, "--set architecture: choose the model with --arch transformer|rnn")
        if self.arch == "rnn":
            check_rnn_options(self)
        need(self.tokenizer in ("words", "sentencepiece"),
             f"--tokenizer must be words or sentencepiece, not {self.tokenizer!r}")
        need(self.vocab_size >= 16, f"--vocab-size must be at least 16, not {self.vocab_size}")
        try:
            check_patterns(self.placeholder_patterns)
        except ValueError as error:
            raise UserError(f"--placeholder-pattern: {error}") from None
        need(self.batch_tokens >= 8, f"--batch-tokens must be at least 8, not {self.batch_tokens}")
        need(self.lr_factor > 0, f"--lr-factor must be positive, not {self.lr_factor}")
        need(self.warmup >= 1, f"--warmup must be at least 1, not {self.warmup}")
        need(0.0 <= self.label_smoothing < 1.0,
             f"--label-smoothing must be in [0, 1), not {self.label_smoothing}")
        need(self.dropout is None or 0.0 <= self.dropout < 1.0,
             f"--dropout must be in [0, 1), not {self.dropout}")
        for name in ("attention_dropout", "ffn_dropout"):
            value = getattr(self, name)
            need(0.0 <= value < 1.0, f"--{name.replace('_', '-')} must be in [0, 1), not {value}")
        need(self.compile in ("auto", "on", "off"), f"--compile must be auto, on or off, not {self.compile!r}")
        need(self.bleu_sentences >= 0, f"--bleu-sentences must be >= 0, not {self.bleu_sentences}")
        sources = [self.data_dir is not None, self.tsv is not None,
                   self.src is not None or self.tgt is not None]
        need(sum(sources) <= 1, "give one corpus: --data DIR, --tsv FILE, or --src FILE --tgt FILE")
        need((self.src is None) == (self.tgt is None), "--src and --tgt go together")
        check_loop_options(self)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainOptions:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in upgrade_train_options(data).items() if k in known})


def check_rnn_options(o: TrainOptions) -> None:
    """--arch rnn: a one-line error for an option the GRU baseline has nothing to apply to."""
    foreign = [name for name in o.overrides if name not in RNN_FIELDS]
    if foreign:
        raise UserError(f"--set {foreign[0]}: does not apply to --arch rnn (the GRU encoder-decoder has no heads, "
                        f"feed-forward layers, positions or norms; it reads "
                        f"{', '.join(n for n in RNN_FIELDS if n != 'architecture')})")
    for name in ("attention_dropout", "ffn_dropout"):
        if getattr(o, name):
            raise UserError(f"--{name.replace('_', '-')}: does not apply to --arch rnn "
                            f"(the GRU baseline has no {'attention-weight' if name[0] == 'a' else 'feed-forward'} "
                            f"dropout; --dropout sets its embedding and layer dropout)")


def check_loop_options(o) -> None:
    """The checks of the options every task's run has (TrainOptions, lm.training.LMOptions): one-line errors."""
    def need(ok: bool, message: str) -> None:
        if not ok:
            raise UserError(message)

    need(o.steps is None or o.steps >= 1, f"--steps must be at least 1, not {o.steps}")
    need(o.minutes is None or o.minutes > 0, f"--minutes must be positive, not {o.minutes}")
    need(o.patience >= 0, f"--patience must be >= 0, not {o.patience}")
    need(o.save_every >= 1, f"--save-every must be at least 1, not {o.save_every}")
    need(o.keep >= 1, f"--keep must be at least 1, not {o.keep}")
    need(o.eval_every >= 1, f"--eval-every must be at least 1, not {o.eval_every}")
    need(o.log_every >= 1, f"--log-every must be at least 1, not {o.log_every}")
    need(o.accum >= 1, f"--accum must be at least 1, not {o.accum}")
    need(o.clip >= 0, f"--clip must be >= 0 (0 = no clipping), not {o.clip}")
    need(o.slow_down >= 0, "--slow-down must be >= 0")
    need(o.steps is not None or o.minutes is not None or o.patience > 0,
         "say how long to train: --steps N, --minutes N or --patience N (early stopping)")


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
