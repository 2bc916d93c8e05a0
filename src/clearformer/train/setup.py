"""Everything a run needs before its first step: device, data, tokenizer, model, optimizer, position.

A fresh run builds the tokenizer from the training split and the model from the preset; a
resumed run (`--resume`) takes the tokenizer, config, weights, optimizer moments, data position,
clock and random generator states from the run's newest step checkpoint instead.

`open_run` is the part every task shares (device, processes, the run folder, the checkpoint to
resume); `prepare` builds the translation task on it, clearformer.train.lm the LM task.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from clearformer.config import ARCHITECTURES, ConfigError, ModelConfig, preset
from clearformer.data.batching import drop_long
from clearformer.devices import resolve_device
from clearformer.errors import UserError
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.limits import check_model_size
from clearformer.load import load_config_and_tokenizer, load_decoding_facts
from clearformer.model.build import build_model
from clearformer.report.flops import FlopCount
from clearformer.store.checkpoint import load_weights_into
from clearformer.store.runs import check_latest_if_default
from clearformer.tokenize import encode_source
from clearformer.tokenize.fold import TargetFold
from clearformer.train import corpus, distributed, rundir, state
from clearformer.train.init import InitRecord, carry_companions, freeze, load_init
from clearformer.train.options import TrainOptions
from clearformer.train.task import TranslationTask, paper_adam

new_optimizer = paper_adam  # the translation model's optimizer (tests and benchmarks name it so)


@dataclass
class RunStart:
    """A run folder claimed and, for --resume, its newest step checkpoint read."""

    device: torch.device
    world: distributed.World
    run_dir: Path
    resumed_from: Path | None = None
    trainer_state: dict = field(default_factory=dict)
    weights: dict | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class RunSetup:
    options: object
    device: torch.device
    world: distributed.World
    run_dir: Path
    tokenizer: object
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    task: object
    resumed_from: Path | None = None
    trainer_state: dict = field(default_factory=dict)
    init: InitRecord | None = None  # where a fine-tuning run (--init) started
    facts: DecodingFacts = NO_FACTS  # the run's decoding facts, saved as decoding.json with each checkpoint


def open_run(options, resume: bool, run_dir: Path, overwrite: bool = False,
             command: str = "train") -> RunStart:
    """Device, processes, the run folder (claimed, see train/rundir.py) and the checkpoint to resume."""
    # Under torchrun each process takes the GPU of its LOCAL_RANK (when --device names none).
    device = resolve_device(options.hardware.device, int(os.environ.get("LOCAL_RANK", "0")))
    if int(os.environ.get("RANK", "0")) == 0:  # one process owns the folder (before the others wait for it)
        rundir.claim(run_dir, resume, overwrite, command)
    world = distributed.setup(device)
    start = RunStart(device, world, Path(run_dir))
    if resume:
        checkpoints = state.step_checkpoints(run_dir)
        if not checkpoints:
            raise rundir.no_checkpoint(run_dir, command)
        start.resumed_from = checkpoints[-1]
        start.weights, start.extra, start.trainer_state = state.load_step_checkpoint(start.resumed_from)
    torch.manual_seed(options.loop.seed + world.rank)
    return start


def finish_setup(start: RunStart, options, tokenizer, model, task, facts: DecodingFacts = NO_FACTS) -> RunSetup:
    """The optimizer (restored on --resume), the data position and the random generators."""
    optimizer = task.new_optimizer(model)
    if start.resumed_from is not None:
        try:
            state.restore_optimizer(optimizer, start.extra, start.trainer_state["optimizer"])
        except (KeyError, ValueError, RuntimeError) as error:
            raise UserError(f"{start.resumed_from}: optimizer state does not fit the model ({error})") from None
        task.restore(start.trainer_state["stream"])
        if start.trainer_state.get("world_size", 1) == start.world.size:
            distributed.restore_rng_state(start.extra, start.world)
    return RunSetup(options, start.device, start.world, start.run_dir, tokenizer, model, optimizer, task,
                    start.resumed_from, start.trainer_state, facts=facts)


def restored_model(start: RunStart):
    """The tokenizer and model of the checkpoint being resumed."""
    config, tokenizer = load_config_and_tokenizer(start.resumed_from)
    check_model_size(config, str(start.resumed_from / "config.json"))
    model = build_model(config)
    load_weights_into(model, start.weights, start.resumed_from / "model.safetensors")
    return tokenizer, model


def model_config(options: TrainOptions, vocab_size: int, pad_id: int) -> ModelConfig:
    """The preset's config with the run's overrides; for an --arch that reads only some fields
    (config.ARCHITECTURES; the GRU: the preset's width, depth, dropout and max_len) only those, the rest
    left at their defaults."""
    choice = options.model
    fields = dict(choice.overrides)
    if options.recipe.dropout is not None:
        fields["dropout"] = options.recipe.dropout
    # Dropout lives in the config, read by each module when it is built (a resumed run keeps its config's).
    fields.update(attention_dropout=options.recipe.attention_dropout, ffn_dropout=options.recipe.ffn_dropout)
    sizes = dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, tie_embeddings=choice.tie, pad_id=pad_id)
    try:
        reads = ARCHITECTURES[choice.arch]
        if reads is None:
            return preset(choice.preset, **sizes, **fields)
        base = {name: value for name, value in preset(choice.preset).to_dict().items() if name in reads}
        return ModelConfig(**{**base, **sizes, **fields, "architecture": choice.arch})
    except TypeError as error:
        raise UserError(f"--set: {error}") from None
    except ConfigError as error:
        raise UserError(str(error)) from None


def prepare(options: TrainOptions, resume: bool, run_dir: Path, overwrite: bool = False) -> RunSetup:
    """Build (or restore) a translation run; raises UserError for anything the user can fix."""
    options.check()
    check_latest_if_default(run_dir)  # a link or a folder at runs/LATEST: refused before training, not after
    start = open_run(options, resume, run_dir, overwrite)
    splits, source, data_record = corpus.load_splits(options.data, options.model.preset)
    init_record, facts = None, NO_FACTS
    if resume:
        tokenizer, model = restored_model(start)
        init_record = InitRecord.from_dict(start.trainer_state.get("init"))
        facts = load_decoding_facts(start.resumed_from, tokenizer)  # as its first start measured them
    elif options.start.init is not None:  # fine-tuning: the run's tokenizer, config and weights (train/init.py)
        tokenizer, model, init_record = load_init(options.start, options.recipe)
        facts = load_decoding_facts(options.start.init, tokenizer)  # an imported run's length factor, shortlist
        carry_companions(options.start.init, run_dir)
    else:
        tokenizer = corpus.build_tokenizer(options.vocabulary, splits["train"], options.loop.seed)
        config = model_config(options, len(tokenizer), tokenizer.pad_id)
        check_model_size(config, "the model config (--preset, --set)")  # before allocating (clearformer.limits)
        model = build_model(config)
    freeze(model, options.start.frozen)
    model.to(start.device).train()
    limit = min(model.config.max_len, options.recipe.batch_tokens)
    # A vocabulary made for other text (--init) may lack characters of this corpus: fold them in the targets
    # (tokenize/fold.py). A word vocabulary has no characters to fold to; one built here lacks none.
    fold = TargetFold(tokenizer) if init_record is not None and tokenizer.kind != "words" else None
    train, dropped = drop_long(corpus.encode_pairs(tokenizer, splits["train"], fold), limit)
    valid, _ = drop_long(corpus.encode_pairs(tokenizer, splits["valid"], fold), limit)
    # BLEU decodes only sources the model can read: a run started from another (--init) may have a shorter
    # max_len than the new data's sentences, and translate refuses a source longer than max_len.
    valid_pairs = [pair for pair in splits["valid"] if len(encode_source(tokenizer, pair[0])) <= model.config.max_len]
    if not train:
        raise UserError(f"{source}: no training pair fits {limit} tokens (raise --batch-tokens or max_len)")
    # A resumed run keeps the ratio its first start measured. A run fine-tuned from an imported model (ratio 0:
    # no brevity rule) keeps none either, so that it decodes as the engine it goes back to (export --to marian-bin).
    if not resume and (init_record is None or facts.length_ratio > 0):
        facts = replace(facts, length_ratio=corpus.length_ratio(train, tokenizer.source_eos))  # a new record, whole
    task = TranslationTask(options, tokenizer, model.config, train, valid, valid_pairs, source, data_record,
                           dropped, FlopCount.of(model), fold.summary() if fold else "", facts)
    setup = finish_setup(start, options, tokenizer, model, task, facts)
    setup.init = init_record
    return setup
