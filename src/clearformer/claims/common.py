"""What every claim shares: the built-in toy data as batches, a short training loop, timing, and
writing a result (JSON + PNG) without overwriting anything.

The quick training loop is deliberately small: it reuses the project's label-smoothed loss
(train/loss.py), the paper's learning-rate schedule (train/schedule.py), the token-count batching
(batching.py) and the trainer's optimizer (Adam 0.9/0.98/1e-9), and leaves out what a quick
experiment does not need (checkpoints, validation BLEU, resuming, DDP). The full versions
(benchmarks/claims.py) train through `clearformer.train.train`, the real trainer.
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from clearformer.config import ModelConfig, preset
from clearformer.data.batching import BatchStream, Example, collate, drop_long, make_batches
from clearformer.data.toy import toy_splits
from clearformer.errors import UserError
from clearformer.evaluate import evaluate_model
from clearformer.model.build import build_model
from clearformer.store.output import check_output, write_output
from clearformer.tokenize import WordTokenizer, encode_source
from clearformer.train.loss import label_smoothed_loss
from clearformer.train.schedule import noam_lr
from clearformer.train.setup import new_optimizer as trainer_optimizer

DEFAULT_OUT = "claims"  # `clearformer claims N` writes here unless --out says otherwise


@dataclass
class ToyData:
    """The built-in English->French phrase set as token ids: a word tokenizer, train and valid examples."""

    tokenizer: object
    train: list
    valid: list
    valid_pairs: list[tuple[str, str]] = field(default_factory=list)


def toy_data(max_len: int = 64) -> ToyData:
    """Tokenizer built from the training split (as `clearformer train` builds it), examples that fit max_len."""
    splits = toy_splits()
    tokenizer = WordTokenizer.build([s for pair in splits["train"] for s in pair])

    def encode(pairs):
        examples = [Example(tuple(encode_source(tokenizer, s)), tuple(tokenizer.encode(t))) for s, t in pairs]
        return drop_long(examples, max_len)[0]

    return ToyData(tokenizer, encode(splits["train"]), encode(splits["valid"]), splits["valid"])


def new_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    """The trainer's optimizer: Adam with the paper's betas and epsilon; the schedule sets lr each step."""
    return trainer_optimizer(model)


def batch_loss(model, batch, smoothing: float = 0.1) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(summed smoothed loss, summed nll, labels) of one teacher-forced batch, with the project's loss."""
    logits = model(batch.src, batch.tgt_in)
    return label_smoothed_loss(logits, batch.tgt_out, model.config.pad_id, smoothing)


class QuickTrainer:
    """A short training loop that can be continued: `advance(seconds, max_steps)` trains some more with
    the same optimizer, schedule position and batch stream (for BLEU-against-time curves)."""

    def __init__(self, model, data: ToyData, batch_tokens: int = 1024, warmup: int = 100, lr_factor: float = 2.0,
                 seed: int = 1) -> None:
        tok = data.tokenizer
        self.model, self.warmup, self.lr_factor = model, warmup, lr_factor
        self.stream = BatchStream(data.train, batch_tokens, seed, tok.pad_id, tok.bos_id, tok.eos_id)
        self.optimizer = new_optimizer(model)
        self.step, self.seconds, self.losses = 0, 0.0, []

    def advance(self, seconds: float, max_steps: int = 10_000) -> None:
        """Train until `seconds` more have passed or the step count reaches `max_steps`."""
        model, start = self.model, time.perf_counter()
        model.train()
        while self.step < max_steps and time.perf_counter() - start < seconds:
            self.step += 1
            for group in self.optimizer.param_groups:
                group["lr"] = noam_lr(self.step, model.config.d_model, self.warmup, self.lr_factor)
            loss, _, labels = batch_loss(model, self.stream.next())
            self.optimizer.zero_grad(set_to_none=True)
            (loss / max(labels, 1)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            self.optimizer.step()
            self.losses.append(loss.item() / max(labels, 1))
        model.eval()
        self.seconds += time.perf_counter() - start

    def report(self) -> dict:
        """{"steps", "seconds", "first_loss", "last_loss"} (losses per label, label-smoothed)."""
        losses = self.losses
        return {"steps": self.step, "seconds": round(self.seconds, 2), "first_loss": losses[0] if losses else None,
                "last_loss": statistics.fmean(losses[-10:]) if losses else None}


def quick_train(model, data: ToyData, seconds: float, max_steps: int = 10_000, **options) -> dict:
    """Train `model` on data.train for at most `seconds` (or max_steps updates); QuickTrainer.report()."""
    trainer = QuickTrainer(model, data, **options)
    trainer.advance(seconds, max_steps)
    return trainer.report()


def bleu(model, data: ToyData) -> float:
    """Greedy-decoding BLEU (sacrebleu) of `model` on the validation split, through `evaluate_model`."""
    return evaluate_model(model, data.tokenizer, data.valid_pairs)[0].bleu


def bleu_curve(model, data: ToyData, minutes: float, points: int, **options) -> dict:
    """Train for `minutes` of wall time, measuring validation BLEU `points` times along the way.

    Returns {"minutes": [...], "steps": [...], "bleu": [...], "training": QuickTrainer.report()}.
    """
    trainer = QuickTrainer(model, data, **options)
    curve = {"minutes": [], "steps": [], "bleu": []}
    for _ in range(points):
        trainer.advance(minutes * 60 / points)
        curve["minutes"].append(round(trainer.seconds / 60, 3))
        curve["steps"].append(trainer.step)
        curve["bleu"].append(bleu(model, data))
    return {**curve, "training": trainer.report()}


@torch.no_grad()
def valid_nll(model, data: ToyData, batch_tokens: int = 2048) -> float:
    """Mean negative log-likelihood per target token on the validation split (teacher forced, no smoothing)."""
    tok = data.tokenizer
    total, labels = 0.0, 0
    for indices in make_batches(data.valid, batch_tokens):
        batch = collate([data.valid[i] for i in indices], tok.pad_id, tok.bos_id, tok.eos_id)
        _, nll, count = label_smoothed_loss(model(batch.src, batch.tgt_in), batch.tgt_out, tok.pad_id, 0.0)
        total, labels = total + nll.item(), labels + count
    return total / max(labels, 1)


def median_seconds(function, repeats: int = 3, warmup: int = 1) -> float:
    """Median wall time of `function()` over `repeats` calls after `warmup` untimed calls."""
    for _ in range(warmup):
        function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def new_figure(width: float, height: float):
    """A matplotlib Figure on an Agg canvas (no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def result_paths(out_dir: Path, number: int, slug: str, quick: bool) -> tuple[Path, Path]:
    """(json, png) paths of one claim's result: claimN-slug[-quick].{json,png}."""
    stem = f"claim{number}-{slug}" + ("-quick" if quick else "")
    return out_dir / f"{stem}.json", out_dir / f"{stem}.png"


RESULT_EXISTS = "pass --overwrite to replace it, or --out DIR for a fresh folder"


def check_writable(paths: tuple[Path, ...], overwrite: bool) -> None:
    """Before the claim runs: the --out folder (made if missing, as the docs say) takes the result files, and
    each is new, or replaceable with `overwrite` (store/output.py: never a link, a FIFO, a folder); one line."""
    folder = paths[0].parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"--out {folder}: cannot be made ({error.strerror or error})") from None
    for path in paths:
        check_output(path, "--out", overwrite, RESULT_EXISTS)


def write_result(json_path: Path, png_path: Path, results: dict, figure) -> None:
    """Write the results as JSON and the figure as PNG, each atomically."""
    write_output(check_output(json_path, "--out"), json.dumps(results, indent=2) + "\n")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    write_output(check_output(png_path, "--out"), buffer.getvalue())


def machine() -> dict:
    """Where a measurement was taken (goes into every JSON next to the numbers)."""
    import platform

    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}


@contextlib.contextmanager
def thread_count(threads: int | None):
    """Run the block with `threads` torch threads (None: leave the count as it is)."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def toy_transformer(data: ToyData, preset_name: str = "toy-translate", **overrides):
    """The preset's Transformer (default toy-translate) for data's vocabulary (one joint, tied table, as
    `clearformer train`)."""
    tok = data.tokenizer
    fields = dict(src_vocab_size=len(tok), tgt_vocab_size=len(tok), tie_embeddings="all", pad_id=tok.pad_id)
    return build_model(preset(preset_name, **{**fields, **overrides}))


def toy_rnn(data: ToyData, d_model: int = 64, layers: int = 2):
    """The GRU encoder-decoder (model/rnn.py) for data's vocabulary, tied like `toy_transformer`."""
    tok = data.tokenizer
    return build_model(ModelConfig(src_vocab_size=len(tok), tgt_vocab_size=len(tok), d_model=d_model,
                                  n_encoder_layers=layers, n_decoder_layers=layers, tie_embeddings="all",
                                  pad_id=tok.pad_id, max_len=64, architecture="rnn"))
