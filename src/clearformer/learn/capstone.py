"""Lesson 15, "Put it together": the learner's whole Transformer, checked against the toy run and trained.

    clearformer learn exercise transformer        writes transformer.py, the skeleton (capstone_source.py)
    clearformer learn check transformer FILE      the toy run's weights in the learner's model: same logits
                                                  (to 1e-5, in float64) and the same greedy translations?
    clearformer learn train FILE [--out DIR]      clearformer's own trainer on the learner's model

Both run the learner's code in the child process of `learn/sandbox.py` (this module's child side, below); the
checker's process never imports it. For `check`, the child only builds the learner's model, loads the toy run's
weights into it and sends back what it computed (its parameter names and shapes, every module's output, the logits,
the translations: learn/wire.py); learn/capstone_judge.py compares them, in the checker's process, with the toy
run's own outputs. `train` runs clearformer's trainer on the learner's modules, which can only happen in the child.

The mapping of names. The learner's model names its parameters as the paper reads
(`encoder.0.self_attn.w_q.weight`, `decoder.1.norm3.gamma`, `out.bias`); clearformer's Transformer as its
modules are built (`encoder.layers.0.self_attention.w_q.weight`, `decoder.layers.1.add_norm_3.norm.weight`,
`output.linear.bias`). NAMES below turns the first into the second, one rule per line; it is used both
ways: to load the toy run into the learner's model (`check`), and to save the learner's trained model as a
clearformer run (`train`: `clearformer translate --checkpoint DIR` then reads it).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import torch

from clearformer.errors import UserError

# learner's parameter name (regular expression) -> clearformer's (docs/learn.md, lesson 15)
NAMES = [
    (r"^(src|tgt)_embed\.table\.weight$", r"\1_embed.tokens.weight"),
    (r"^(encoder|decoder)\.(\d+)\.self_attn\.(w_[qkvo])\.(weight|bias)$", r"\1.layers.\2.self_attention.\3.\4"),
    (r"^decoder\.(\d+)\.cross_attn\.(w_[qkvo])\.(weight|bias)$", r"decoder.layers.\1.cross_attention.\2.\3"),
    (r"^(encoder|decoder)\.(\d+)\.norm(\d)\.gamma$", r"\1.layers.\2.add_norm_\3.norm.weight"),
    (r"^(encoder|decoder)\.(\d+)\.norm(\d)\.beta$", r"\1.layers.\2.add_norm_\3.norm.bias"),
    (r"^(encoder|decoder)\.(\d+)\.ffn\.linear(\d)\.(weight|bias)$", r"\1.layers.\2.feed_forward.linear_\3.\4"),
    (r"^out\.(weight|bias)$", r"output.linear.\1"),
]

# learner's module -> the recorded output of clearformer's that must equal it, in the order data flows
MODULES = [
    (r"src_embed", "src_embed.X"),
    (r"encoder\.(\d+)\.self_attn", r"encoder.layers.\1.self_attention.output"),
    (r"encoder\.(\d+)\.norm1", r"encoder.layers.\1.add_norm_1.norm"),
    (r"encoder\.(\d+)\.ffn", r"encoder.layers.\1.feed_forward.output"),
    (r"encoder\.(\d+)\.norm2", r"encoder.layers.\1.add_norm_2.norm"),
    (r"tgt_embed", "tgt_embed.X"),
    (r"decoder\.(\d+)\.self_attn", r"decoder.layers.\1.self_attention.output"),
    (r"decoder\.(\d+)\.norm1", r"decoder.layers.\1.add_norm_1.norm"),
    (r"decoder\.(\d+)\.cross_attn", r"decoder.layers.\1.cross_attention.output"),
    (r"decoder\.(\d+)\.norm2", r"decoder.layers.\1.add_norm_2.norm"),
    (r"decoder\.(\d+)\.ffn", r"decoder.layers.\1.feed_forward.output"),
    (r"decoder\.(\d+)\.norm3", r"decoder.layers.\1.add_norm_3.norm"),
    (r"out", "output.logits"),
]

TOLERANCE = 1e-5
SENTENCES = 4          # the toy test sentences compared (and "I love you")
MAX_NEW_TOKENS = 30


def clearformer_name(name: str) -> str | None:
    for pattern, replacement in NAMES:
        if re.match(pattern, name):
            return re.sub(pattern, replacement, name)
    return None


def check_config(config, path: Path) -> None:
    """The capstone is the paper's model: post-norm, ReLU, sinusoidal positions, scaled and tied embeddings."""
    wanted = dict(norm_first=False, activation="relu", positional="sinusoidal", scale_embedding=True, bias=True,
                  tie_embeddings="all", architecture="transformer", attention="mha")
    for field, value in wanted.items():
        if getattr(config, field, value) != value:
            raise UserError(f"{path}: the capstone reads a run of the paper's model ({field} = {value!r}); this run "
                            f"has {field} = {getattr(config, field)!r}")


def learner_model(module, config, path: Path):
    """The learner's Transformer, sized like `config` (a UserError when the file has none)."""
    cls = getattr(module, "Transformer", None)
    if not isinstance(cls, type):
        raise UserError(f"{path} defines no class Transformer (`clearformer learn exercise transformer` writes it)")
    return cls(config.tgt_vocab_size, d_model=config.d_model, n_heads=config.n_heads, d_ff=config.d_ff,
               n_encoder_layers=config.n_encoder_layers, n_decoder_layers=config.n_decoder_layers,
               pad_id=config.pad_id)


def parameter_shapes(model) -> dict[str, tuple[int, ...]]:
    return {name: tuple(int(size) for size in tensor.shape) for name, tensor in model.state_dict().items()}


def mapping_problems(mine: dict[str, tuple[int, ...]], theirs: dict[str, tuple[int, ...]]) -> list[str]:
    """What keeps clearformer's weights (`theirs`: name -> shape) from loading into the learner's model (`mine`) by
    NAMES, in words; [] when every parameter has its counterpart of the same shape."""
    problems, used = [], set()
    for name, shape in mine.items():
        target = clearformer_name(name)
        if target is None or target not in theirs:
            problems.append(f"your parameter {name!r} has no counterpart in clearformer's model (the names "
                            "of lesson 15's mapping: keep the skeleton's attribute names)")
            continue
        if tuple(shape) != tuple(theirs[target]):
            problems.append(f"your parameter {name!r} has shape {tuple(shape)}, clearformer's "
                            f"{target!r} {tuple(theirs[target])}")
            continue
        used.add(target)
    missing = [name for name in theirs if name not in used and not name.endswith("table")]
    if missing and not problems:
        problems.append(f"your model has nothing for clearformer's {missing[0]!r}")
    return problems


def load_into_learner(learner, reference) -> list[str]:
    """Copy clearformer's weights into the learner's model by NAMES (when nothing keeps them out); the problems."""
    problems = mapping_problems(parameter_shapes(learner), parameter_shapes(reference))
    if problems:
        return problems
    theirs = reference.state_dict()
    with torch.no_grad():
        for name, parameter in learner.state_dict(keep_vars=True).items():
            parameter.copy_(theirs[clearformer_name(name)])
    return []


def recorded_modules(names: list[str]) -> list[tuple[str, str]]:
    """(learner's module name, clearformer's recorded name) for each of the learner's module `names` that MODULES
    knows, in data-flow order."""
    pairs = []
    for pattern, recorded in MODULES:
        for name in names:
            if re.fullmatch(pattern, name):
                pairs.append((name, re.sub(pattern, recorded, name) if "\\" in recorded else recorded))
    order = {pattern: i for i, (pattern, _) in enumerate(MODULES)}

    def key(pair):
        name = pair[0]
        side = 0 if name.startswith(("src_embed", "encoder")) else 1
        layer = int(re.search(r"\d+", name).group()) if re.search(r"\d+", name) else (-1 if "embed" in name else 99)
        pattern = next(p for p in order if re.fullmatch(p, name))
        return side, layer, order[pattern]

    return sorted(pairs, key=key)


def forward_bytes(config, src: torch.Tensor, tgt_in: torch.Tensor) -> int:
    """The bytes of float64 cells an honest model's outputs on one batch come to: every module MODULES records
    (d_model per token) and the logits (a vocabulary per token). Twice this is what the child sends at most."""
    modules = 3 + 4 * config.n_encoder_layers + 6 * config.n_decoder_layers
    return (src.numel() + tgt_in.numel()) * (modules * config.d_model + config.tgt_vocab_size) * 8


def fresh_model(config):
    """clearformer's Transformer with its own initialisation from seed 0 (the same weights in every process)."""
    from clearformer.model.transformer import Transformer

    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Transformer(config).double().eval()


def test_sentences() -> list[tuple[str, str]]:
    from clearformer.data.toy import toy_splits

    return [("I love you", "Je t'aime")] + toy_splits()["test"][:SENTENCES]


def sentence_batches(tokenizer) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each test sentence as (src, tgt_in), (1, len): the English ids, and <bos> + the French reference's."""
    from clearformer.tokenize import encode_source

    return [(torch.tensor([encode_source(tokenizer, english)]), torch.tensor([[tokenizer.bos_id] +
                                                                             tokenizer.encode(french)]))
            for english, french in test_sentences()]


def batch_sentences() -> list[tuple[str, str]]:
    """"I love you" and the first toy test sentence of each other length (words): a batch that needs padding."""
    from clearformer.data.toy import toy_splits

    chosen = {3: ("I love you", "Je t'aime")}
    for english, french in toy_splits()["test"]:
        chosen.setdefault(len(english.split()), (english, french))
    return [chosen[length] for length in sorted(chosen)]


def padded_batch(tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """The test sentences as one batch, each padded with <pad> to the longest: (src, tgt_in), (batch, len)."""
    from clearformer.tokenize import encode_source

    pairs = [(encode_source(tokenizer, english), [tokenizer.bos_id] + tokenizer.encode(french))
             for english, french in batch_sentences()]
    pad = tokenizer.pad_id

    def padded(rows: list[list[int]]) -> torch.Tensor:
        width = max(len(row) for row in rows)
        return torch.tensor([row + [pad] * (width - len(row)) for row in rows])

    return padded([s for s, _ in pairs]), padded([t for _, t in pairs])


# ----------------------------------------------------------------------------- the child's side


def child_job(job: dict, emit, limit) -> dict:
    from clearformer.learn.learner import load_module
    from clearformer.learn.sandbox import read_source
    from clearformer.load import load_model

    path = Path(job["path"])
    source = read_source(path)
    reference, tokenizer, _ = load_model(job["run"])
    check_config(reference.config, Path(job["run"]))
    if job["kind"] == "train":
        torch.set_num_threads(1)  # a toy model: one thread is the fastest (commands/train.py)
    limit()
    emit("ready")
    emit("stage", stage="import")
    module = load_module(path, source, "transformer")
    emit("stage", stage="cases")
    emit("case", index=0)
    if job["kind"] == "train":
        return train_learner(job, module, tokenizer, emit)
    return check_learner(job, module, reference, tokenizer, emit)


def build_learner(module, config, path: Path) -> tuple[object, dict | None]:
    """(the learner's Transformer, None), or (None, what building it raised); UserError when there is no class."""
    from clearformer.learn.learner import raised

    try:
        return learner_model(module, config, path), None
    except UserError:
        raise
    except BaseException as error:
        return None, raised(error, path, "", "Transformer")


def check_learner(job: dict, module, reference, tokenizer, emit) -> dict:
    """Send what the learner's model computes on each case (the case numbers of learn/capstone_judge.py): its
    parameters' names and shapes, then per sentence every module's output and the logits, and the translation,
    then the padded batch with the toy run's weights and with fresh ones. Nothing is compared here."""
    path = Path(job["path"])
    learner, error = build_learner(module, reference.config, path)
    if error is not None:
        emit("result", index=0, raised=error)
        return {}
    emit("result", index=0, parameters=[[name, list(shape)] for name, shape in parameter_shapes(learner).items()])
    if load_into_learner(learner, reference):
        return {}   # the checker names the first problem from the names and shapes
    learner.double().eval()
    translate = getattr(module, "translate", None)
    index = 1
    for src, tgt_in in sentence_batches(tokenizer):
        emit("case", index=index)
        emit("result", index=index, **forward(learner, reference.config, src, tgt_in, path))
        emit("case", index=index + 1)
        if not callable(translate):
            raise UserError(f"{path} defines no function translate(model, src_ids, bos_id, eos_id, max_new_tokens)")
        emit("result", index=index + 1, **translation(translate, learner, src, tokenizer, path))
        index += 2
    src, tgt_in = padded_batch(tokenizer)
    emit("case", index=index)
    emit("result", index=index, **forward(learner, reference.config, src, tgt_in, path))
    problems = load_into_learner(learner, fresh_model(reference.config))
    if problems:
        raise UserError(problems[0])
    emit("case", index=index + 1)
    emit("result", index=index + 1, **forward(learner.double().eval(), reference.config, src, tgt_in, path))
    return {}


def forward(learner, config, src: torch.Tensor, tgt_in: torch.Tensor, path: Path) -> dict:
    """The learner's model on one batch: {"modules": [[name, its output], ...] for each module MODULES records,
    "logits": what the model returned}, as plain data (learn/wire.py); or {"raised": ...}."""
    from clearformer.learn import wire
    from clearformer.learn.learner import raised

    outputs, hooks = {}, []
    modules = dict(learner.named_modules())
    pairs = recorded_modules(list(modules))
    try:
        for name, _ in pairs:
            hooks.append(modules[name].register_forward_hook(
                lambda module, args, output, name=name: outputs.setdefault(name, output)))
        with torch.no_grad():
            got = learner(src, tgt_in)
        budget = wire.Budget(2 * forward_bytes(config, src, tgt_in))
        logits = wire.encode(got, budget)   # first: the logits are what the verdict needs most
        return {"modules": [[name, wire.encode(outputs.get(name), budget)] for name, _ in pairs], "logits": logits}
    except BaseException as failure:
        return {"raised": raised(failure, path, "")}
    finally:
        for hook in hooks:
            hook.remove()


def translation(translate, learner, src: torch.Tensor, tokenizer, path: Path) -> dict:
    """{"value": what the learner's translate() returned} or {"raised": ...}."""
    from clearformer.learn import wire
    from clearformer.learn.learner import raised

    try:
        return {"value": wire.encode(translate(learner, src, tokenizer.bos_id, tokenizer.eos_id, MAX_NEW_TOKENS))}
    except BaseException as failure:
        return {"raised": raised(failure, path, "", "translate")}


class LearnerAsClearformer(torch.nn.Module):
    """The learner's model seen by clearformer's trainer: encode/decode/project and a config; its state dict
    under clearformer's names (NAMES), so every checkpoint the trainer writes is a clearformer run."""

    def __init__(self, learner, config) -> None:
        super().__init__()
        self.learner = learner
        self.config = config

    def encode(self, src_ids):
        return self.learner.encode(src_ids), src_ids        # the "mask" the trainer hands back: the ids

    def decode(self, tgt_ids, memory, src_ids):
        return self.learner.decode(tgt_ids, memory, src_ids)

    def project(self, hidden):
        return self.learner.project(hidden)

    def forward(self, src_ids, tgt_ids):
        return self.learner(src_ids, tgt_ids)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def state_dict(self, *args, **kwargs):
        return {clearformer_name(name): tensor for name, tensor in self.learner.state_dict(*args, **kwargs).items()}


def train_learner(job: dict, module, tokenizer, emit) -> dict:
    """clearformer's trainer (train/loop.py) on the learner's model, started from the weights clearformer's
    own initialisation gives (so a right model trains as the toy run did); then "I love you". Three results
    (learn/capstone_run.py reads them): 0 the model built and loaded ({"loaded": true}, a "problem" or "raised"),
    1 the training ({"trained": the trainer's numbers} or "raised"), 2 the translation ("value" or "raised")."""
    from clearformer.learn.learner import raised
    from clearformer.store import lock
    from clearformer.tokenize import encode_source
    from clearformer.train.loop import run_setup
    from clearformer.train.options import TrainOptions
    from clearformer.train.setup import prepare

    path = Path(job["path"])
    # `clearformer train --preset toy-translate --out OUT`'s options; no BLEU: it decodes with clearformer's
    # cached search, which the learner's model does not have.
    steps = {"steps": int(job["steps"])} if job.get("steps") else {}
    options = TrainOptions.for_preset("toy-translate", run_dir=str(job["out"]), bleu_sentences=0, **steps).check()
    try:
        setup = prepare(options, resume=False, run_dir=Path(options.loop.run_dir), overwrite=bool(job.get("overwrite")))
        learner, error = build_learner(module, setup.model.config, path)
        problems = [] if error is not None else load_into_learner(learner, setup.model)  # clearformer's initial weights
        emit("result", index=0, **({"raised": error} if error else {"problem": problems[0]} if problems else
                                   {"loaded": True}))
        if error is not None or problems:
            return {}
        adapter = LearnerAsClearformer(learner, setup.model.config).to(setup.device).train()
        setup.model = adapter
        setup.optimizer = setup.task.new_optimizer(adapter)
        emit("case", index=1)
        began = time.monotonic()
        try:
            result = run_setup(setup, progress=False)
        except BaseException as failure:
            emit("result", index=1, raised=raised(failure, path, ""))
            return {}
    finally:
        lock.release(options.loop.run_dir)
    emit("result", index=1, trained={"steps": result.step, "seconds": round(time.monotonic() - began, 1),
                                     "loss": result.train_loss, "valid_loss": result.valid_loss})
    emit("case", index=2)
    learner.eval()
    src = torch.tensor([encode_source(tokenizer, "I love you")])
    emit("result", index=2, **translation(lambda *args: module.translate(*args), learner, src, tokenizer, path))
    return {}
