"""The training loop, for every model: batches -> loss -> optimizer + schedule -> checkpoints.

What is specific to a model (its data, loss, schedule, optimizer, validation) is its task
(train/task.py: the translation model; clearformer/train/lm.py: the language model).

One optimizer step:
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
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from clearformer import devices
from clearformer.errors import Stopped, UserError
from clearformer.store import lock
from clearformer.store.atomic import atomic_write_text
from clearformer.store.checkpoint import save_model
from clearformer.store.runs import mark_latest_if_default
from clearformer.train import distributed, mfu, rundir, state
from clearformer.train.metrics import MetricsLog, perplexity, plot_curves
from clearformer.train.options import TrainOptions
from clearformer.train.setup import RunSetup, prepare
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


# Seconds of sleep after every step: a test-only knob (the kill -9 and SIGTERM tests need a run that is
# still going when they strike). Not an option, never saved with a run: the hidden `--slow-down` flag of
# `train` and `lm train` sets it (commands/options.py, add_test_knobs).
TEST_STEP_DELAY_S = 0.0


def resume_options(run_dir: Path, steps: int | None = None, minutes: float | None = None) -> TrainOptions:
    """The options of the run being resumed (from its newest checkpoint), with a new length if given."""
    checkpoints = state.step_checkpoints(run_dir)
    if not checkpoints:
        raise rundir.no_checkpoint(run_dir)
    _, _, saved = state.load_step_checkpoint(checkpoints[-1])
    if saved.get("task", "translate") != "translate":
        raise UserError(f"{run_dir}: a language-model run; continue it with `clearformer lm train --resume --out "
                        f"{run_dir}`")
    options = TrainOptions.from_dict(saved["options"], f"{checkpoints[-1]}/trainer_state.json options")
    if steps is not None:
        options.loop.steps = steps
    if minutes is not None:
        options.loop.minutes = minutes
    return options


def train(options: TrainOptions, resume: bool = False, progress: bool = True, overwrite: bool = False) -> TrainResult:
    """Train the translation model (see clearformer.train.lm.train_language_model for the LM)."""
    try:
        return run_setup(prepare(options, resume, Path(options.loop.run_dir), overwrite), progress)
    finally:
        lock.release(options.loop.run_dir)  # the run folder's lock (store/lock.py), taken by prepare


def run_setup(setup: RunSetup, progress: bool = True) -> TrainResult:
    """Run a prepared setup of any task to its end; releases the process group after."""
    try:
        return Trainer(setup, progress).run()
    finally:
        distributed.teardown(setup.world)


class Trainer:
    def __init__(self, setup: RunSetup, progress: bool = True) -> None:
        self.s = setup
        self.options = setup.options
        self.o = setup.options.loop  # the loop's part, the same class for every task (train/options.py)
        self.hardware = setup.options.hardware
        self.world = setup.world
        self.model = setup.model
        self.task = setup.task
        self.network = self.task.network(self.model)
        if self.world.distributed:
            device_ids = [setup.device.index] if setup.device.type == "cuda" else None
            self.network = torch.nn.parallel.DistributedDataParallel(self.network, device_ids=device_ids)
        saved = setup.trainer_state
        self.step = saved.get("step", 0)
        self.elapsed_before = saved.get("elapsed_s", 0.0)
        self.tokens_seen = saved.get("tokens_seen", 0)
        self.best_valid = saved.get("best_valid_loss")
        self.best_step = saved.get("best_step")
        self.bad_validations = saved.get("bad_validations", 0)
        self.last_valid = (saved.get("last_valid_loss"), saved.get("last_valid_bleu"))
        self.metrics = MetricsLog(setup.run_dir / "metrics.csv")
        self.progress = progress and self.world.is_main
        if self.world.is_main and setup.resumed_from is not None:
            self.metrics.truncate_after(self.step)
        self.autocast_dtype = devices.autocast_dtype(setup.device, self.hardware.bf16)
        self.autocast = self._autocast_factory()
        if setup.device.type == "cuda":
            # fp32 matrix products (all of them without --bf16) on tensor cores, as TF32.
            torch.set_float32_matmul_precision("high")
        self.compiled = devices.use_compile(self.hardware.compile, setup.device)
        self.forward = compile_forward(TrainingForward(self.network, setup.device.type, self.autocast_dtype),
                                       self.compiled)
        self.interval = self.empty_interval()
        self.last_step: tuple[torch.Tensor, int] | None = None  # (this process's loss sum, labels) of the last step
        # MFU against the peak of the dtype the products run in (bf16 under --bf16).
        self.peak = mfu.MeasuredPeak(setup.device, self.autocast_dtype or torch.float32,
                                     None if self.world.is_main else 0.0)  # never over 100% (train/mfu.py)
        self.last_loss: float | None = None
        self.stop = StopSignals()  # installed while the loop runs
        self.signalled = False
        self.session = {"real": 0, "flops": 0.0, "time": 0.0}  # this process's run, for the closing line

    # -- helpers ------------------------------------------------------------------------------

    def _autocast_factory(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext
        device_type, dtype = self.s.device.type, self.autocast_dtype
        return lambda: torch.autocast(device_type=device_type, dtype=dtype)

    @staticmethod
    def empty_interval() -> dict:
        # sums: this process's (loss, nll) sums on the device, read back at the next flush.
        return {"sums": None, "tokens": 0, "real": 0, "padded": 0, "time": 0.0, "steps": 0, "flops": 0.0}

    def elapsed(self) -> float:
        """Training time so far, across resumes: validation and checkpoint writing do not count."""
        return self.elapsed_before + (time.monotonic() - self.started) - self.paused

    def should_stop(self) -> str | None:
        reason = None
        if self.o.steps is not None and self.step >= self.o.steps:
            reason = f"reached {self.o.steps} steps"
        elif self.o.minutes is not None and self.elapsed() >= self.o.minutes * 60:
            reason = f"reached the time budget of {self.o.minutes:g} min"
        elif self.o.patience and self.bad_validations >= self.o.patience:
            reason = f"early stopping: no better validation loss in {self.o.patience} validations"
        # Process 0 decides (its clock rules), everyone follows; a stop signal any process got stops all.
        stop, signalled = distributed.stop_flags(reason is not None, self.stop.signal is not None, self.world,
                                                 self.s.device)
        if signalled:
            self.signalled = True
            return f"stopped by {self.stop.name if self.stop.signal is not None else 'a signal to another process'}"
        return (reason or "stopped by process 0") if stop else None

    def meta(self) -> dict:
        return {
            "preset": self.options.preset, "step": self.step, **self.task.meta(),
            "valid_loss": self.last_valid[0], "valid_bleu": self.last_valid[1],
            "best_step": self.best_step, "parameters": self.model.num_parameters(),
            "options": self.options.to_dict(),
        }

    # -- one optimizer step -------------------------------------------------------------------

    def train_step(self) -> dict:
        self.step += 1
        lr = self.task.learning_rate(self.step)
        for group in self.s.optimizer.param_groups:
            group["lr"] = lr
        batches = self.task.batches(self.world.size * self.o.accum)
        mine = batches[self.world.rank * self.o.accum:(self.world.rank + 1) * self.o.accum]
        step_labels = sum(b.target_tokens for b in batches)
        self.s.optimizer.zero_grad(set_to_none=True)
        sums = None  # (loss, nll) summed over this process's batches, on the device
        for index, batch in enumerate(mine):
            batch = to_device(batch, self.s.device)
            last = index == len(mine) - 1
            # Gradients are all-reduced once per step, after the last batch of this process.
            sync = contextlib.nullcontext() if last or not self.world.distributed else self.network.no_sync()
            with sync:
                loss, nll, _ = self.forward(batch)
                (loss * (self.world.size / step_labels)).backward()
            pair = torch.stack([loss.detach().float(), nll.detach().float()])
            sums = pair if sums is None else sums + pair
        parameters = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.o.clip if self.o.clip > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(parameters, max_norm)  # a device tensor: no wait here
        self.s.optimizer.step()
        real = sum(b.real_tokens for b in batches)
        padded = sum(b.padded_tokens for b in batches)
        flops = sum(self.task.flops(self.model, b) for b in batches) if self.world.is_main else 0.0
        return {"lr": lr, "sums": sums, "labels": step_labels, "real": real, "padded": padded,
                "grad_norm": grad_norm, "flops": flops}

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        """The loop; SIGTERM or a first Ctrl-C stops it between steps (train/stopping.py)."""
        with StopSignals() as self.stop:
            result = self._run()
        if self.signalled:
            command = "train" if self.task.kind == "translate" else "lm train"
            checkpoints = state.step_checkpoints(self.s.run_dir)
            saved = checkpoints[-1] if checkpoints and self.step else None
            advice = resume_advice(command, self.s.run_dir, self.step, saved) if self.world.is_main else ""
            raise Stopped(advice, self.stop.exit_code if self.stop.signal is not None else 143)
        return result

    def _run(self) -> TrainResult:
        self.started = time.monotonic()
        self.paused = 0.0
        if self.world.is_main:
            self.announce()
        bar = tqdm(total=self.o.steps, initial=self.step, disable=not self.progress, unit="step",
                   dynamic_ncols=True, desc="train",
                   # In a log (CI, `setup.sh | tee`) a redrawn bar becomes thousands of lines: update rarely.
                   mininterval=0.1 if sys.stderr.isatty() else 15.0)
        reason = self.should_stop()
        while reason is None:
            began = time.monotonic()
            result = self.train_step()
            seconds = time.monotonic() - began
            self.tokens_seen += result["real"]
            self.record_interval(result, seconds)
            if self.progress:
                bar.update(1)
            if self.step % self.o.log_every == 0:
                self.flush_interval(result, bar)
            if self.step % self.o.eval_every == 0:
                self.validate(bar)
            if self.step % self.o.save_every == 0:
                self.save()
            if TEST_STEP_DELAY_S:
                time.sleep(TEST_STEP_DELAY_S)
            reason = self.should_stop()
        bar.close()
        if self.interval["steps"]:
            self.flush_interval(None)
        self.last_loss = self.read_last_loss()
        # A stop signal: no last validation (it can take longer than the seconds a scheduler waits).
        if self.step % self.o.eval_every != 0 and self.task.can_validate and not self.signalled:
            self.validate(None)
        if self.step % self.o.save_every != 0:
            self.save()
        self.finish(reason)
        done = self.session
        rate = done["real"] / done["time"] if done["time"] > 0 else None
        utilisation = self.peak.share(done["flops"] / done["time"]) if done["time"] > 0 else None
        return TrainResult(self.s.run_dir, self.step, self.last_loss, self.last_valid[0], self.last_valid[1],
                           reason, rate, utilisation)

    def announce(self) -> None:
        s = self.s
        where = f"resuming from {s.resumed_from}" if s.resumed_from else f"writing to {s.run_dir}"
        processes = f", {self.world.size} processes" if self.world.distributed else ""
        print(f"clearformer train: preset {self.options.preset}, {self.model.num_parameters():,} parameters, "
              f"{self.task.describe()}; device {s.device}{processes}{self.step_kind()} "
              f"(measured {self.peak_kind}matmul peak {self.peak.value / 1e9:.1f} GFLOP/s); {where}", flush=True)
        saved_world = s.trainer_state.get("world_size", self.world.size)
        if saved_world != self.world.size:
            print(f"clearformer train: warning: the run was saved by {saved_world} process(es) and "
                  f"continues with {self.world.size}: each step now takes {self.world.size * self.o.accum} "
                  "batches, and dropout draws new random numbers", flush=True)

    @property
    def peak_kind(self) -> str:
        return "bf16 " if self.autocast_dtype is not None else ""

    def step_kind(self) -> str:
        """How the step runs, for the first line: bf16 autocast, compiled, fused Adam."""
        kinds = [name for name, on in (("bf16 autocast", self.autocast_dtype is not None),
                                       ("compiled step", self.compiled),
                                       ("fused Adam", any(g.get("fused") for g in self.s.optimizer.param_groups)))
                 if on]
        return f", {', '.join(kinds)}" if kinds else ""

    def postfix(self, loss: float, lr: float, interval: dict) -> dict:
        """The progress bar's fields: the last logging interval's loss, speed and padding."""
        seconds = max(interval["time"], 1e-9)
        fields = {"loss": f"{loss:.3f}", "lr": f"{lr:.2e}",
                  "tok/s": f"{interval['real'] / seconds:,.0f}",
                  "MFU": self.peak.text(interval["flops"] / seconds),
                  "pad": f"{1 - interval['real'] / max(interval['padded'], 1):.0%}"}
        if self.o.minutes is not None:
            left = max(0.0, self.o.minutes * 60 - self.elapsed())
            fields["left"] = f"{int(left // 60)}:{int(left % 60):02d}"
        return fields

    def record_interval(self, result: dict, seconds: float) -> None:
        i = self.interval
        i["sums"] = result["sums"] if i["sums"] is None else i["sums"] + result["sums"]
        i["tokens"] += result["labels"]
        i["real"] += result["real"]
        i["padded"] += result["padded"]
        i["time"] += seconds
        i["steps"] += 1
        i["flops"] += result["flops"]
        for key, value in (("real", result["real"]), ("flops", result["flops"]), ("time", seconds)):
            self.session[key] += value
        self.last_step = (result["sums"][0], result["labels"])

    def read_back(self, values: list[torch.Tensor]) -> list[float]:
        """Device tensors -> floats. The host waits here for the device to finish the steps it was
        given, and that wait is training time: it goes to the interval's and the session's clock."""
        waited = time.monotonic()
        numbers = torch.stack([v.detach().double().reshape(()) for v in values]).tolist()
        seconds = time.monotonic() - waited
        self.interval["time"] += seconds
        self.session["time"] += seconds
        return numbers

    def flush_interval(self, result: dict | None, bar=None) -> None:
        i = self.interval
        if i["steps"]:
            extra = [result["grad_norm"]] if result is not None else []
            numbers = self.read_back([i["sums"][0], i["sums"][1], *extra])
            # Every process flushes at the same steps: the sums of all processes, every log_every steps.
            loss_sum, nll_sum = distributed.all_sum(numbers[:2], self.world, self.s.device)
            loss, lr = loss_sum / i["tokens"], self.task.learning_rate(self.step)
            if self.world.is_main:
                self.metrics.append({
                    "step": self.step, "epoch": self.task.epoch, "elapsed_s": round(self.elapsed(), 2),
                    "train_loss": loss, "train_ppl": perplexity(nll_sum / i["tokens"]), "lr": lr,
                    "tokens_per_s": i["real"] / max(i["time"], 1e-9),
                    "mfu": self.peak.share(i["flops"] / max(i["time"], 1e-9)),
                    "padding_share": 1 - i["real"] / i["padded"],
                    "grad_norm": numbers[2] if result is not None else None})
            if bar is not None and self.progress:
                bar.set_postfix(self.postfix(loss, lr, i), refresh=False)
        self.interval = self.empty_interval()

    def read_last_loss(self) -> float | None:
        """The last step's loss per label (over all processes), as TrainResult reports it."""
        if self.last_step is None:
            return None
        loss_sum, labels = self.last_step
        (loss_sum,) = distributed.all_sum(self.read_back([loss_sum]), self.world, self.s.device)
        return loss_sum / labels

    def validate(self, bar) -> None:
        if not self.task.can_validate:
            return
        began = time.monotonic()
        try:
            self._validate(bar)
        finally:
            self.paused += time.monotonic() - began

    def _validate(self, bar) -> None:
        improved = False
        if self.world.is_main:
            loss, nll, bleu = self.task.validate(self.model, self.s.device, self.autocast)
            self.last_valid = (loss, bleu)
            improved = self.best_valid is None or loss < self.best_valid - 1e-4
            self.metrics.append({"step": self.step, "epoch": self.task.epoch,
                                 "elapsed_s": round(self.elapsed(), 2), "valid_loss": loss,
                                 "valid_ppl": perplexity(nll), "valid_bleu": bleu})
            line = (f"step {self.step}: valid loss {loss:.3f}, ppl {perplexity(nll):.2f}"
                    + (f", BLEU {bleu:.1f}" if bleu is not None else "") + (" (best)" if improved else ""))
            (bar.write if bar is not None and self.progress else print)(line)
        improved = distributed.broadcast_flag(improved, self.world, self.s.device)
        if improved:
            self.best_valid, self.best_step, self.bad_validations = self.last_valid[0], self.step, 0
        else:
            self.bad_validations += 1
        if self.world.is_main and (improved or not self.task.keep_best):
            save_model(self.s.run_dir, self.model, self.s.tokenizer, self.meta())

    def save(self) -> None:
        began = time.monotonic()
        try:
            self._save()
        finally:
            self.paused += time.monotonic() - began

    def _save(self) -> None:
        rng = distributed.gather_rng_states(self.world)
        if self.world.is_main:
            trainer_state = {
                "task": self.task.kind, "step": self.step, "stream": self.task.position,
                "elapsed_s": self.elapsed(),
                "tokens_seen": self.tokens_seen, "best_valid_loss": self.best_valid,
                "best_step": self.best_step,
                "bad_validations": self.bad_validations, "last_valid_loss": self.last_valid[0],
                "last_valid_bleu": self.last_valid[1], "world_size": self.world.size,
                "options": self.options.to_dict()}
            state.save_step_checkpoint(self.s.run_dir, self.step, self.model, self.s.tokenizer, self.meta(),
                                       self.s.optimizer, rng, trainer_state, self.o.keep)
            if self.best_step is None or not self.task.keep_best:  # the newest model is the run's model
                save_model(self.s.run_dir, self.model, self.s.tokenizer, self.meta())
            self.plot()
        distributed.barrier(self.world)

    def plot(self) -> None:
        plot_curves(self.metrics.read(), self.s.run_dir / "curve.png",
                    f"clearformer {self.options.preset}: loss and learning rate")

    def finish(self, reason: str) -> None:
        if not self.world.is_main:
            return
        self.plot()
        if self.task.kind == "translate":  # translate/explain/serve follow the pointer: LMs stay out of it
            mark_latest_if_default(self.s.run_dir)
        summary = {"stopped_because": reason, "step": self.step, "elapsed_s": round(self.elapsed(), 1),
                   "best_step": self.best_step, "best_valid_loss": self.best_valid,
                   "last_valid_bleu": self.last_valid[1], "tokens_seen": self.tokens_seen}
        atomic_write_text(self.s.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        bleu = f", BLEU {self.last_valid[1]:.1f}" if self.last_valid[1] is not None else ""
        valid = f"; valid loss {self.last_valid[0]:.3f}{bleu}" if self.last_valid[0] is not None else ""
        best = (f" (model of step {self.best_step}, the best validation loss)"
                if self.best_step and self.task.keep_best else "")
        done = self.session
        if done["time"] > 0:
            print(f"clearformer train: trained at {done['real'] / done['time']:,.0f} tok/s on average "
                  f"(MFU {self.peak.text(done['flops'] / done['time'])} of the measured matmul peak)",
                  flush=True)
        print(f"clearformer train: {reason} after {self.step} steps in {self.elapsed():.0f} s{valid}; "
              f"model in {self.s.run_dir}{best}", flush=True)
