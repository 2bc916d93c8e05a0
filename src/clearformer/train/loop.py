"""The training loop, for every model: batches -> loss -> optimizer + schedule -> checkpoints.

What is specific to a model (its data, loss, schedule, optimizer, validation) is its task
(train/task.py: the translation model; clearformer/train/lm.py: the language model); train/front.py
is the one front that prepares either and runs it here.

One optimizer step (`Trainer.train_step`):
    1. lr = task.learning_rate(step)      (translation: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5))
    2. take world_size * accum batches; this process trains on its `accum` of them
    3. for each: (summed loss, summed nll, labels) = task network(batch);
       backward of loss_sum * world_size / (labels in the whole step)   (so the gradient is the
       per-token mean over everything the step saw, however it is split)
    4. clip the gradient norm, optimizer update
Every `eval_every` steps: validation (loss, and BLEU for translation), early stopping, the model
written to the run directory (the best one, or the newest for tasks with keep_best False). Every
`save_every` steps: a resumable step checkpoint and the curve PNG. The progress bar and the
metrics.csv rows carry tokens/s and MFU against this machine's measured matmul peak (clearformer.train.mfu).

What the Trainer holds, by record: `Standing` (where the run is: what a step checkpoint saves and
--resume restores), `Clock` (training time across resumes), `Execution` (how a step runs on this
device), `Tally` (sums over a logging interval and over the session) and `StepNumbers` (one step's).

On a GPU (docs/gpu.md): the forward + loss of step 3 runs compiled (`--compile`, train/step.py),
under bf16 autocast with --bf16, Adam uses fused kernels (devices.optimizer_implementation), batches
travel through pinned memory, and nothing in a step waits for the device: losses and the gradient
norm stay on the device and are read back every `log_every` steps, when the progress bar and
metrics.csv are updated.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch
from tqdm import tqdm

from clearformer import devices
from clearformer.errors import Stopped
from clearformer.store.atomic import atomic_write_text
from clearformer.store.checkpoint import save_model
from clearformer.store.runs import mark_latest_if_default
from clearformer.train import distributed, mfu, state
from clearformer.train.metrics import MetricsLog, perplexity, plot_curves
from clearformer.train.setup import RunSetup
from clearformer.train.step import TrainingForward, compile_forward, to_device
from clearformer.train.stopping import StopSignals, resume_advice


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    train_loss: float | None
    valid_loss: float | None
    valid_bleu: float | None
    stopped_because: str
    tokens_per_second: float | None = None  # this session's average (process 0's count of all processes' tokens)
    mfu: float | None = None  # of the measured matmul peak


@dataclass
class Standing:
    """Where the run stands: what every step checkpoint saves (trainer_state.json, under these names) and
    --resume restores, so that a resumed run goes on exactly as an uninterrupted one."""

    step: int = 0
    elapsed_s: float = 0.0  # training time so far (validation and checkpoint writing do not count)
    tokens_seen: int = 0
    best_valid_loss: float | None = None
    best_step: int | None = None
    bad_validations: int = 0  # validations in a row without a better loss (early stopping's count)
    last_valid_loss: float | None = None
    last_valid_bleu: float | None = None

    @classmethod
    def from_saved(cls, saved: dict) -> Standing:
        return cls(**{item.name: saved[item.name] for item in fields(cls) if saved.get(item.name) is not None})


@dataclass
class Clock:
    """Training time across resumes: `before` (the checkpoint's) plus this session's, less the pauses
    (validation and checkpoint writing)."""

    before: float = 0.0
    started: float = field(default_factory=time.monotonic)
    paused: float = 0.0

    def start(self) -> None:
        self.started, self.paused = time.monotonic(), 0.0

    def elapsed(self) -> float:
        return self.before + (time.monotonic() - self.started) - self.paused

    @contextlib.contextmanager
    def pause(self):
        began = time.monotonic()
        try:
            yield
        finally:
            self.paused += time.monotonic() - began


@dataclass
class StepNumbers:
    """One optimizer step. `sums` (this process's summed loss and nll) and `grad_norm` stay on the device
    until a log line reads them; `labels`, `real` and `padded` count the whole step (all processes')."""

    lr: float
    sums: torch.Tensor
    labels: int
    real: int
    padded: int
    grad_norm: torch.Tensor
    flops: float  # training FLOPs of the step's batches (report/flops.py; process 0 counts, others 0)


@dataclass
class Tally:
    """Sums over steps: a logging interval's (emptied at each log line) or the whole session's."""

    sums: torch.Tensor | None = None  # (loss, nll) on the device
    labels: int = 0
    real: int = 0
    padded: int = 0
    seconds: float = 0.0
    steps: int = 0
    flops: float = 0.0

    def add(self, step: StepNumbers, seconds: float) -> None:
        self.sums = step.sums if self.sums is None else self.sums + step.sums
        self.labels += step.labels
        self.real += step.real
        self.padded += step.padded
        self.seconds += seconds
        self.steps += 1
        self.flops += step.flops

    def tokens_per_second(self) -> float:
        return self.real / max(self.seconds, 1e-9)

    def utilisation(self, peak: mfu.MeasuredPeak) -> float | None:
        """MFU: the share of the measured matmul peak the model's arithmetic used; None for a share over 100%,
        which is a measurement error, not a result (train/mfu.py's MeasuredPeak measures again first)."""
        return peak.share(self.flops / max(self.seconds, 1e-9))

    def utilisation_text(self, peak: mfu.MeasuredPeak) -> str:
        """The MFU as shown: "21.6%", or "n/a" (see `utilisation`)."""
        return peak.text(self.flops / max(self.seconds, 1e-9))


@dataclass
class Execution:
    """How a step runs on this device: the network (the task's loss module, DDP-wrapped across processes),
    its forward (compiled or eager), bf16 autocast or none, and the matmul peak MFU is measured against."""

    network: torch.nn.Module
    forward: Callable
    compiled: bool
    autocast_dtype: torch.dtype | None
    device: torch.device
    peak: mfu.MeasuredPeak

    @classmethod
    def on(cls, setup: RunSetup) -> Execution:
        network = setup.task.network(setup.model)
        if setup.world.distributed:
            device_ids = [setup.device.index] if setup.device.type == "cuda" else None
            network = torch.nn.parallel.DistributedDataParallel(network, device_ids=device_ids)
        dtype = devices.autocast_dtype(setup.device, setup.options.hardware.bf16)
        if setup.device.type == "cuda":
            # fp32 matrix products (all of them without --bf16) on tensor cores, as TF32.
            torch.set_float32_matmul_precision("high")
        compiled = devices.use_compile(setup.options.hardware.compile, setup.device)
        forward = compile_forward(TrainingForward(network, setup.device.type, dtype), compiled)
        # MFU against the peak of the dtype the products run in (bf16 under --bf16).
        peak = mfu.MeasuredPeak(setup.device, dtype or torch.float32, None if setup.world.is_main else 0.0)
        return cls(network, forward, compiled, dtype, setup.device, peak)

    def autocast(self):
        """The context validation runs in: the step's autocast, or none."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    def describe(self, optimizer: torch.optim.Optimizer) -> str:
        """How the step runs, for the first line: bf16 autocast, compiled, fused Adam."""
        kinds = [name for name, on in (("bf16 autocast", self.autocast_dtype is not None),
                                       ("compiled step", self.compiled),
                                       ("fused Adam", any(g.get("fused") for g in optimizer.param_groups)))
                 if on]
        return f", {', '.join(kinds)}" if kinds else ""


def run_setup(setup: RunSetup, progress: bool = True) -> TrainResult:
    """Run a prepared setup of any task to its end; releases the process group after."""
    try:
        return Trainer(setup, progress).run()
    finally:
        distributed.teardown(setup.world)


class Trainer:
    """Runs a prepared run (`RunSetup`: options, model, task, optimizer, device, processes) step by step."""

    def __init__(self, setup: RunSetup, progress: bool = True) -> None:
        self.setup = setup
        self.loop = setup.options.loop  # the loop's part of the options, the same class for every task
        self.task, self.model, self.world = setup.task, setup.model, setup.world
        self.standing = Standing.from_saved(setup.trainer_state)
        self.init = setup.init  # a fine-tuning run's start (train/init.py): validated at step 0, compared with
        self.clock = Clock(before=self.standing.elapsed_s)
        self.execution = Execution.on(setup)
        self.interval, self.session = Tally(), Tally()  # since the last log line; this process's whole run
        self.last_step: tuple[torch.Tensor, int] | None = None  # (this process's loss sum, labels) of the last step
        self.metrics = MetricsLog(setup.run_dir / "metrics.csv")
        if self.world.is_main and setup.resumed_from is not None:
            self.metrics.truncate_after(self.standing.step)
        self.show_bar = progress and self.world.is_main
        self.stop = StopSignals()  # installed while the loop runs
        self.signalled = False

    # -- one optimizer step -------------------------------------------------------------------

    def train_step(self) -> StepNumbers:
        self.standing.step += 1
        lr = self.task.learning_rate(self.standing.step)
        optimizer = self.setup.optimizer
        for group in optimizer.param_groups:
            group["lr"] = lr
        accum, rank = self.loop.accum, self.world.rank
        batches = self.task.batches(self.world.size * accum)
        mine = batches[rank * accum:(rank + 1) * accum]
        step_labels = sum(b.target_tokens for b in batches)
        optimizer.zero_grad(set_to_none=True)
        sums = None  # (loss, nll) summed over this process's batches, on the device
        for index, batch in enumerate(mine):
            batch = to_device(batch, self.setup.device)
            last = index == len(mine) - 1
            # Gradients are all-reduced once per step, after the last batch of this process.
            network = self.execution.network
            sync = contextlib.nullcontext() if last or not self.world.distributed else network.no_sync()
            with sync:
                loss, nll, _ = self.execution.forward(batch)
                (loss * (self.world.size / step_labels)).backward()
            pair = torch.stack([loss.detach().float(), nll.detach().float()])
            sums = pair if sums is None else sums + pair
        parameters = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.loop.clip if self.loop.clip > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_norm)  # a device tensor: no wait here
        optimizer.step()
        flops = sum(self.task.flops(b) for b in batches) if self.world.is_main else 0.0
        return StepNumbers(lr, sums, step_labels, sum(b.real_tokens for b in batches),
                           sum(b.padded_tokens for b in batches), grad_norm, flops)

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        """The loop; SIGTERM or a first Ctrl-C stops it between steps (train/stopping.py)."""
        with StopSignals() as self.stop:
            result = self._run()
        if self.signalled:
            command = "train" if self.task.kind == "translate" else "lm train"
            checkpoints = state.step_checkpoints(self.setup.run_dir)
            saved = checkpoints[-1] if checkpoints and self.standing.step else None
            advice = (resume_advice(command, self.setup.run_dir, self.standing.step, saved)
                      if self.world.is_main else "")
            raise Stopped(advice, self.stop.exit_code if self.stop.signal is not None else 143)
        return result

    def _run(self) -> TrainResult:
        self.clock.start()
        if self.world.is_main:
            self.announce()
        bar = tqdm(total=self.loop.steps, initial=self.standing.step, disable=not self.show_bar, unit="step",
                   dynamic_ncols=True, desc="train",
                   # In a log (CI, `setup.sh | tee`) a redrawn bar becomes thousands of lines: update rarely.
                   mininterval=0.1 if sys.stderr.isatty() else 15.0)
        if self.init is not None and self.standing.step == 0:
            self.validate(bar)  # the starting weights on the new data: what every later validation must beat
        reason = self.should_stop()
        while reason is None:
            began = time.monotonic()
            numbers = self.train_step()
            seconds = time.monotonic() - began
            self.standing.tokens_seen += numbers.real
            self.interval.add(numbers, seconds)
            self.session.add(numbers, seconds)
            self.last_step = (numbers.sums[0], numbers.labels)
            if self.show_bar:
                bar.update(1)
            step = self.standing.step
            if step % self.loop.log_every == 0:
                self.flush_interval(numbers, bar)
            if step % self.loop.eval_every == 0:
                self.validate(bar)
            if step % self.loop.save_every == 0:
                self.save()
            reason = self.should_stop()
        bar.close()
        if self.interval.steps:
            self.flush_interval(None)
        last_loss = self.read_last_loss()
        step = self.standing.step
        # A stop signal: no last validation (it can take longer than the seconds a scheduler waits).
        if step % self.loop.eval_every != 0 and self.task.can_validate and not self.signalled:
            self.validate(None)
        if step % self.loop.save_every != 0:
            self.save()
        self.finish(reason)
        done, standing = self.session, self.standing
        rate = done.tokens_per_second() if done.seconds > 0 else None
        utilisation = done.utilisation(self.execution.peak) if done.seconds > 0 and self.execution.peak.value else None
        return TrainResult(self.setup.run_dir, step, last_loss, standing.last_valid_loss, standing.last_valid_bleu,
                           reason, rate, utilisation)

    def should_stop(self) -> str | None:
        reason, loop = None, self.loop
        if loop.steps is not None and self.standing.step >= loop.steps:
            reason = f"reached {loop.steps} steps"
        elif loop.minutes is not None and self.clock.elapsed() >= loop.minutes * 60:
            reason = f"reached the time budget of {loop.minutes:g} min"
        elif loop.patience and self.standing.bad_validations >= loop.patience:
            reason = f"early stopping: no better validation loss in {loop.patience} validations"
        # Process 0 decides (its clock rules), everyone follows; a stop signal any process got stops all.
        stop, signalled = distributed.stop_flags(reason is not None, self.stop.signal is not None, self.world,
                                                 self.setup.device)
        if signalled:
            self.signalled = True
            return f"stopped by {self.stop.name if self.stop.signal is not None else 'a signal to another process'}"
        return (reason or "stopped by process 0") if stop else None

    # -- what the run prints and logs ---------------------------------------------------------

    def announce(self) -> None:
        setup, world = self.setup, self.world
        where = f"resuming from {setup.resumed_from}" if setup.resumed_from else f"writing to {setup.run_dir}"
        processes = f", {world.size} processes" if world.distributed else ""
        bf16 = "bf16 " if self.execution.autocast_dtype is not None else ""
        print(f"clearformer train: preset {setup.options.preset}, {self.model.num_parameters():,} parameters, "
              f"{self.task.describe()}; device {setup.device}{processes}{self.execution.describe(setup.optimizer)} "
              f"(measured {bf16}matmul peak {self.execution.peak.value / 1e9:.1f} GFLOP/s); {where}", flush=True)
        saved_world = setup.trainer_state.get("world_size", world.size)
        if saved_world != world.size:
            print(f"clearformer train: warning: the run was saved by {saved_world} process(es) and "
                  f"continues with {world.size}: each step now takes {world.size * self.loop.accum} "
                  "batches, and dropout draws new random numbers", flush=True)

    def postfix(self, loss: float, lr: float) -> dict:
        """The progress bar's fields: the last logging interval's loss, speed and padding."""
        interval = self.interval
        fields_ = {"loss": f"{loss:.3f}", "lr": f"{lr:.2e}",
                   "tok/s": f"{interval.tokens_per_second():,.0f}",
                   "MFU": interval.utilisation_text(self.execution.peak),
                   "pad": f"{1 - interval.real / max(interval.padded, 1):.0%}"}
        if self.loop.minutes is not None:
            left = max(0.0, self.loop.minutes * 60 - self.clock.elapsed())
            fields_["left"] = f"{int(left // 60)}:{int(left % 60):02d}"
        return fields_

    def read_back(self, values: list[torch.Tensor]) -> list[float]:
        """Device tensors -> floats. The host waits here for the device to finish the steps it was
        given, and that wait is training time: it goes to the interval's and the session's clock."""
        waited = time.monotonic()
        numbers = torch.stack([v.detach().double().reshape(()) for v in values]).tolist()
        seconds = time.monotonic() - waited
        self.interval.seconds += seconds
        self.session.seconds += seconds
        return numbers

    def flush_interval(self, numbers: StepNumbers | None, bar=None) -> None:
        interval = self.interval
        if interval.steps:
            extra = [numbers.grad_norm] if numbers is not None else []
            values = self.read_back([interval.sums[0], interval.sums[1], *extra])
            # Every process flushes at the same steps: the sums of all processes, every log_every steps.
            loss_sum, nll_sum = distributed.all_sum(values[:2], self.world, self.setup.device)
            loss, lr = loss_sum / interval.labels, self.task.learning_rate(self.standing.step)
            if self.world.is_main:
                self.metrics.append({
                    "step": self.standing.step, "epoch": self.task.epoch, "elapsed_s": round(self.clock.elapsed(), 2),
                    "train_loss": loss, "train_ppl": perplexity(nll_sum / interval.labels), "lr": lr,
                    "tokens_per_s": interval.tokens_per_second(), "mfu": interval.utilisation(self.execution.peak),
                    "padding_share": 1 - interval.real / interval.padded,
                    "grad_norm": values[2] if numbers is not None else None})
            if bar is not None and self.show_bar:
                bar.set_postfix(self.postfix(loss, lr), refresh=False)
        self.interval = Tally()

    def read_last_loss(self) -> float | None:
        """The last step's loss per label (over all processes), as TrainResult reports it."""
        if self.last_step is None:
            return None
        loss_sum, labels = self.last_step
        (loss_sum,) = distributed.all_sum(self.read_back([loss_sum]), self.world, self.setup.device)
        return loss_sum / labels

    # -- validation, checkpoints, the end -----------------------------------------------------

    def meta(self) -> dict:
        standing = self.standing
        return {
            "preset": self.setup.options.preset, "step": standing.step, **self.task.meta(),
            "valid_loss": standing.last_valid_loss, "valid_bleu": standing.last_valid_bleu,
            "best_step": standing.best_step, "parameters": self.model.num_parameters(),
            "options": self.setup.options.to_dict(),
            **({"init": self.init.to_dict()} if self.init is not None else {}),
        }

    def validate(self, bar) -> None:
        if not self.task.can_validate:
            return
        with self.clock.pause():
            self._validate(bar)

    def _validate(self, bar) -> None:
        standing, improved = self.standing, False
        if self.world.is_main:
            loss, nll, bleu = self.task.validate(self.model, self.setup.device, self.execution.autocast)
            standing.last_valid_loss, standing.last_valid_bleu = loss, bleu
            improved = standing.best_valid_loss is None or loss < standing.best_valid_loss - 1e-4
            if self.init is not None and standing.step == 0:
                self.init = self.init.with_start_loss(loss)
            start = self.init.valid_loss_at_start if self.init is not None else None
            self.metrics.append({"step": standing.step, "epoch": self.task.epoch,
                                 "elapsed_s": round(self.clock.elapsed(), 2), "valid_loss": loss,
                                 "valid_ppl": perplexity(nll), "valid_bleu": bleu,
                                 "valid_vs_start": loss - start if start is not None else None})
            line = (f"step {standing.step}: valid loss {loss:.3f}, ppl {perplexity(nll):.2f}"
                    + (f", BLEU {bleu:.1f}" if bleu is not None else "") + (" (best)" if improved else "")
                    + self.against_start(loss))
            (bar.write if bar is not None and self.show_bar else print)(line)
        improved = distributed.broadcast_flag(improved, self.world, self.setup.device)
        if improved:
            standing.best_valid_loss, standing.best_step = standing.last_valid_loss, standing.step
            standing.bad_validations = 0
        else:
            standing.bad_validations += 1
        if self.world.is_main and (improved or not self.task.keep_best):
            save_model(self.setup.run_dir, self.model, self.setup.tokenizer, self.meta(), self.setup.facts)

    def against_start(self, loss: float) -> str:
        """For a fine-tuning run: how this validation compares with the starting weights' (step 0)."""
        start = self.init.valid_loss_at_start if self.init is not None else None
        if start is None or self.standing.step == 0:
            return " (the starting weights)" if self.init is not None else ""
        if loss > start:
            return f"; WORSE than the run it started from ({loss:.3f} > {start:.3f} at step 0)"
        return f"; {start - loss:.3f} below the run it started from"

    def save(self) -> None:
        with self.clock.pause():
            self._save()

    def _save(self) -> None:
        rng = distributed.gather_rng_states(self.world)
        setup = self.setup
        if self.world.is_main:
            trainer_state = {"task": self.task.kind, "stream": self.task.position,
                             **asdict(self.standing), "elapsed_s": self.clock.elapsed(),
                             "world_size": self.world.size, "options": setup.options.to_dict(),
                             "init": self.init.to_dict() if self.init is not None else None}
            state.save_step_checkpoint(setup.run_dir, self.standing.step, self.model, setup.tokenizer, self.meta(),
                                       setup.optimizer, rng, trainer_state, self.loop.keep, setup.facts)
            if self.standing.best_step is None or not self.task.keep_best:  # the newest model is the run's model
                save_model(setup.run_dir, self.model, setup.tokenizer, self.meta(), setup.facts)
            self.plot()
        distributed.barrier(self.world)

    def plot(self) -> None:
        plot_curves(self.metrics.read(), self.setup.run_dir / "curve.png",
                    f"clearformer {self.setup.options.preset}: loss and learning rate")

    def finish(self, reason: str) -> None:
        if not self.world.is_main:
            return
        self.plot()
        setup, standing = self.setup, self.standing
        if self.task.kind == "translate":  # translate/explain/serve follow the pointer: LMs stay out of it
            mark_latest_if_default(setup.run_dir)
        summary = {"stopped_because": reason, "step": standing.step, "elapsed_s": round(self.clock.elapsed(), 1),
                   "best_step": standing.best_step, "best_valid_loss": standing.best_valid_loss,
                   "last_valid_bleu": standing.last_valid_bleu, "tokens_seen": standing.tokens_seen}
        atomic_write_text(setup.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        bleu = f", BLEU {standing.last_valid_bleu:.1f}" if standing.last_valid_bleu is not None else ""
        valid = f"; valid loss {standing.last_valid_loss:.3f}{bleu}" if standing.last_valid_loss is not None else ""
        best = (f" (model of step {standing.best_step}, the best validation loss)"
                if standing.best_step and self.task.keep_best else "")
        if self.session.seconds > 0:
            print(f"clearformer train: trained at {self.session.tokens_per_second():,.0f} tok/s on average "
                  f"(MFU {self.session.utilisation_text(self.execution.peak)} of the measured matmul peak)",
                  flush=True)
        print(f"clearformer train: {reason} after {standing.step} steps in {self.clock.elapsed():.0f} s{valid}; "
              f"model in {setup.run_dir}{best}", flush=True)
        if self.init is not None and standing.best_step == 0 and standing.step > 0:
            print(f"clearformer train: fine-tuning never beat the validation loss of {self.init.run} (step 0); "
                  "the run's model is its starting weights: try a lower --lr-factor or more data", flush=True)
