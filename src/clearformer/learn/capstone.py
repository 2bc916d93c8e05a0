"""Lesson 15, "Put it together": the learner's whole Transformer, checked against the toy run and trained.

    clearformer learn exercise transformer        writes transformer.py, the skeleton (capstone_source.py)
    clearformer learn check transformer FILE      the toy run's weights in the learner's model: same logits
                                                  (to 1e-5, in float64) and the same greedy translations?
    clearformer learn train FILE [--out DIR]      clearformer's own trainer on the learner's model

Both run in the child process of `learn/sandbox.py` (the learner's code is never imported here).

The mapping of names. The learner's model names its parameters as the paper reads
(`encoder.0.self_attn.w_q.weight`, `decoder.1.norm3.gamma`, `out.bias`); clearformer's Transformer as its
modules are built (`encoder.layers.0.self_attention.w_q.weight`, `decoder.layers.1.add_norm_3.norm.weight`,
`output.linear.bias`). NAMES below turns the first into the second, one rule per line; it is used both
ways: to load the toy run into the learner's model (`check`), and to save the learner's trained model as a
clearformer run (`train`: `clearformer translate --checkpoint DIR` then reads it).
"""

from __future__ import annotations

import re
import sys
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


def load_into_learner(learner, reference) -> list[str]:
    """Copy clearformer's weights into the learner's model by NAMES; the problems, in words."""
    theirs = reference.state_dict()
    problems, used = [], set()
    with torch.no_grad():
        for name, parameter in learner.state_dict(keep_vars=True).items():
            target = clearformer_name(name)
            if target is None or target not in theirs:
                problems.append(f"your parameter {name!r} has no counterpart in clearformer's model (the names "
                                "of lesson 15's mapping: keep the skeleton's attribute names)")
                continue
            if tuple(parameter.shape) != tuple(theirs[target].shape):
                problems.append(f"your parameter {name!r} has shape {tuple(parameter.shape)}, clearformer's "
                                f"{target!r} {tuple(theirs[target].shape)}")
                continue
            parameter.copy_(theirs[target])
            used.add(target)
    missing = [name for name in theirs if name not in used and not name.endswith("table")]
    if missing and not problems:
        problems.append(f"your model has nothing for clearformer's {missing[0]!r}")
    return problems


def recorded_modules(learner) -> list[tuple[str, str]]:
    """(learner's module name, clearformer's recorded name) for each module of MODULES the learner has."""
    names = dict(learner.named_modules())
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


def first_difference(learner, reference, src, tgt_in, pad_id: int | None = None) -> str | None:
    """Run both on a batch of sentence pairs; the first module (in data-flow order) whose output differs, in words.
    With `pad_id`, only the real tokens' rows are compared (a padded position's row is nobody's output)."""
    from clearformer.record import trace

    outputs, hooks = {}, []
    pairs = recorded_modules(learner)
    modules = dict(learner.named_modules())
    for name, _ in pairs:
        hooks.append(modules[name].register_forward_hook(
            lambda module, args, output, name=name: outputs.setdefault(name, output)))
    try:
        with torch.no_grad():
            got = learner(src, tgt_in)
    finally:
        for hook in hooks:
            hook.remove()
    with torch.no_grad(), trace.Recorder() as recorder:
        expected = reference(src, tgt_in)
    for name, recorded in pairs:
        try:
            want = recorder.get(recorded).to(torch.float64)
        except KeyError:
            continue
        mine = outputs.get(name)
        if not isinstance(mine, torch.Tensor):
            return f"{name}: returned {type(mine).__name__}, expected a tensor like clearformer's {recorded}"
        real = None if pad_id is None else (src if name.startswith(("src_embed", "encoder")) else tgt_in) != pad_id
        words = _differ(mine, want, real)
        if words:
            return f"the first module whose output differs is {name} (clearformer's {recorded}): {words}"
    real = None if pad_id is None else tgt_in != pad_id
    words = _differ(got, expected.to(torch.float64), real) if isinstance(got, torch.Tensor) else "not a tensor"
    return f"the logits differ: {words}" if words else None


def _differ(mine: torch.Tensor, want: torch.Tensor, real: torch.Tensor | None = None) -> str | None:
    """Where `mine` differs from `want`, in words; `real` (batch, seq): the rows that count."""
    if tuple(mine.shape) != tuple(want.shape):
        return f"shape {tuple(mine.shape)}, expected {tuple(want.shape)}"
    mine = mine.detach().to(torch.float64)
    bad = ~((mine - want).abs() <= TOLERANCE + TOLERANCE * want.abs())
    if real is not None and bad.dim() == 3 and tuple(real.shape) == tuple(bad.shape[:2]):
        bad &= real[..., None]
    if not bool(bad.any()):
        return None
    index = tuple(int(i) for i in bad.nonzero()[0])
    return (f"{int(bad.sum())} of {want.numel()} cells differ; at {list(index)} expected {float(want[index]):.6g}, "
            f"got {float(mine[index]):.6g}")


def test_sentences() -> list[tuple[str, str]]:
    from clearformer.data.toy import toy_splits

    return [("I love you", "Je t'aime")] + toy_splits()["test"][:SENTENCES]


# ----------------------------------------------------------------------------- the child's jobs


def child_job(job: dict, emit, limit) -> dict:
    from clearformer.learn.check import load_module
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
    emit("case", index=0, name="building your Transformer")
    if job["kind"] == "train":
        return train_learner(job, module, reference, tokenizer, emit)
    return check_learner(job, module, reference, tokenizer, emit)


def _model_or_error(module, reference, path: Path):
    from clearformer.learn.check import describe, learner_line

    try:
        learner = learner_model(module, reference.config, path)
    except UserError:
        raise
    except BaseException as error:
        return None, f"{learner_line(error, path)}: building Transformer(...) raised {describe(error)}"
    return learner, None


def check_learner(job: dict, module, reference, tokenizer, emit) -> dict:
    from clearformer.learn import reference as modules
    from clearformer.learn.check import CaseResult, Mismatch, Report, describe, learner_line, report_dict
    from clearformer.tokenize import encode_source

    path = Path(job["path"])
    report = Report("transformer", str(path))
    learner, error = _model_or_error(module, reference, path)
    if error is None:
        problems = load_into_learner(learner, reference)
        error = problems[0] if problems else None
    if error is not None:
        report.results.append(CaseResult("the toy run's weights in your model", False, Mismatch("", error)))
        return {"report": report_dict(report)}
    report.results.append(CaseResult("the toy run's weights in your model (lesson 15's mapping of names)", True))
    learner.double().eval()
    reference = reference.double().eval()
    translate = getattr(module, "translate", None)
    for index, (english, french) in enumerate(test_sentences(), start=1):
        src = torch.tensor([encode_source(tokenizer, english)])
        tgt_in = torch.tensor([[tokenizer.bos_id] + tokenizer.encode(french)])
        name = f"{english!r}: logits with {french!r} as the decoder input"
        emit("case", index=index, name=name)
        try:
            words = first_difference(learner, reference, src, tgt_in)
        except BaseException as failure:
            words = f"{learner_line(failure, path)}: your model raised {describe(failure)}{unwritten(failure)}"
        report.results.append(CaseResult(name, words is None, None if words is None else Mismatch("", words)))
        name = f"{english!r}: greedy translation"
        emit("case", index=index, name=name)
        expected = modules.greedy(reference, src, MAX_NEW_TOKENS)
        try:
            if not callable(translate):
                raise UserError(f"{path} defines no function translate(model, src_ids, bos_id, eos_id, "
                                "max_new_tokens)")
            got = translate(learner, src, tokenizer.bos_id, tokenizer.eos_id, MAX_NEW_TOKENS)
            got = got.tolist() if isinstance(got, torch.Tensor) else list(got)
            words = None if got == expected else (f"ids {got[:12]}, expected {expected[:12]}: {tokenizer.decode(got)!r}"
                                                  f" instead of {tokenizer.decode(expected)!r}")
        except UserError:
            raise
        except BaseException as failure:
            words = f"{learner_line(failure, path)}: translate() raised {describe(failure)}{unwritten(failure)}"
        report.results.append(CaseResult(name, words is None, None if words is None else Mismatch("", words)))
    report.results.append(batch_case(learner, reference, tokenizer, path, emit))
    return {"report": report_dict(report)}


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


def batch_case(learner, reference, tokenizer, path: Path, emit):
    """Sentences of different lengths as one padded batch (what training feeds): a model without the padding mask
    lets the real tokens attend to <pad>, and the first module that does is named. Run on the toy run's weights
    and on clearformer's fresh initialisation (seed 0): the trained heads are so sharp that the weight a real token
    gives to <pad> can stay below the tolerance, the untrained ones spread it."""
    from clearformer.learn.check import CaseResult, Mismatch, describe, learner_line
    from clearformer.model.transformer import Transformer

    src, tgt_in = padded_batch(tokenizer)
    lengths = [int((row != tokenizer.pad_id).sum()) for row in src]
    name = (f"a padded batch of {src.shape[0]} sentences ({', '.join(map(str, lengths))} source tokens, padded to "
            f"{src.shape[1]} with <pad>): logits at the real tokens, trained and fresh weights")
    emit("case", index=len(test_sentences()) + 1, name=name)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        fresh = Transformer(reference.config).double().eval()
    words = None
    try:
        for weights, model in (("the toy run's weights", reference), ("fresh weights", fresh)):
            if model is fresh:
                learner = learner_model_like(learner, model)
            words = first_difference(learner, model, src, tgt_in, pad_id=tokenizer.pad_id)
            if words is not None:
                words = f"with {weights}, {words} (only in a padded batch: are the <pad> keys blocked in every " \
                        "attention that reads the source?)"
                break
    except UserError:
        raise
    except BaseException as failure:
        words = f"{learner_line(failure, path)}: your model raised {describe(failure)}{unwritten(failure)}"
    return CaseResult(name, words is None, None if words is None else Mismatch("", words))


def learner_model_like(learner, reference):
    """The learner's model with `reference`'s weights (by NAMES), in float64 evaluation mode."""
    problems = load_into_learner(learner, reference)
    if problems:
        raise UserError(problems[0])
    return learner.double().eval()


def unwritten(failure: BaseException) -> str:
    """A starter's `raise NotImplementedError` still in place: say so (learner_line names its file and line)."""
    if isinstance(failure, NotImplementedError):
        return " (a starter's `raise NotImplementedError` still stands there: fill that block)"
    return ""


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


def train_learner(job: dict, module, reference, tokenizer, emit) -> dict:
    """clearformer's trainer (train/loop.py) on the learner's model, started from the weights clearformer's
    own initialisation gives (so a right model trains as the toy run did); then "I love you"."""
    from clearformer.learn.check import describe, learner_line
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
        learner, error = _model_or_error(module, setup.model, path)
        if error is None:
            problems = load_into_learner(learner, setup.model)   # clearformer's initial weights
            error = problems[0] if problems else None
        if error is not None:
            return {"failed": error}
        adapter = LearnerAsClearformer(learner, setup.model.config).to(setup.device).train()
        setup.model = adapter
        setup.optimizer = setup.task.new_optimizer(adapter)
        emit("case", index=1, name="training")
        began = time.monotonic()
        try:
            result = run_setup(setup, progress=False)
        except BaseException as failure:
            return {"failed": f"{learner_line(failure, path)}: training your model raised {describe(failure)}"}
    finally:
        lock.release(options.loop.run_dir)
    emit("case", index=2, name="translating 'I love you'")
    learner.eval()
    src = torch.tensor([encode_source(tokenizer, "I love you")])
    try:
        ids = module.translate(learner, src, tokenizer.bos_id, tokenizer.eos_id, MAX_NEW_TOKENS)
        ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    except BaseException as failure:
        return {"failed": f"{learner_line(failure, path)}: translate() raised {describe(failure)}"}
    return {"trained": {"steps": result.step, "seconds": round(time.monotonic() - began, 1),
                        "loss": result.train_loss, "valid_loss": result.valid_loss, "run": str(result.run_dir),
                        "translation": tokenizer.decode(ids)}}


def write_line(text: str) -> None:
    sys.stdout.write(text + "\n")
