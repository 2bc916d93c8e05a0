"""The GPU window: everything a short GPU lease should measure first, stage by stage, into one folder.

    bash benchmarks/gpu_window.sh                      # on a GPU: every stage, each under its own time limit
    python -m benchmarks.gpu_window all --device cpu --tiny --out /tmp/w    # the same code, tiny, seconds
    python -m benchmarks.gpu_window merge OUT/sections.md                   # here: the sections into BENCHMARKS.md

Stages (each its own process in gpu_window.sh, so a hang or a crash in one leaves the others' files):

  profile   torch.profiler over `--profile-steps` eager bf16 steps of `base` on token-count batches
            (today's `clearformer train` step): the top kernels by device time and their shares, the
            top host-side operators, how much of the wall time the GPU was busy (profile.txt), and
            the chrome trace (trace.json.gz) when it is small enough to bring back.
  train     steady-state throughput and MFU of `base`, in rotating order on the same batches: clearformer's
            eager step on token-count batches (today), its eager step on fixed-shape batches with the fused
            loss (train/shapes.py), torch.nn.Transformer eager.
  decode    greedy and beam 4 of the `small` size (random weights, a fixed number of new tokens, as
            benchmarks/decode_speed.py): clearformer eager with the growing cache, clearformer with the
            static cache replayed as a CUDA graph (generate/graphs.py), Transformers' generate; whether
            the graph's tokens equal the eager ones.
  compiled  clearformer's step compiled for the fixed shapes (torch.compile, dynamic=False), its compile
            time per shape (noted as each finishes) apart from its steady state. Last: the likeliest to
            run out of time.

Every stage appends its lines to summary.txt and results.jsonl and its BENCHMARKS.md section to
sections.md (the format of benchmarks/report.py, machine and date included), as soon as it has them.
The data are synthetic: random token ids (4 .. vocab - 1) with sentence lengths drawn from a fixed
distribution (median about 16 tokens, a long tail to 120; targets 0.9-1.3x their source), so a
fresh GPU machine needs no corpus; speed does not depend on which ids a batch holds.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python benchmarks/gpu_window.py` works too

from benchmarks.report import machine, markdown_table, put_section, section_text  # noqa: E402
from clearformer import devices  # noqa: E402
from clearformer.config import preset  # noqa: E402
from clearformer.data.batching import BatchStream, Example  # noqa: E402
from clearformer.model.transformer import Transformer  # noqa: E402
from clearformer.report.flops import FlopCount  # noqa: E402
from clearformer.train import mfu  # noqa: E402
from clearformer.train.shapes import FixedShapes  # noqa: E402
from clearformer.train.step import TrainingForward, TranslationLoss  # noqa: E402

PAD, BOS, EOS = 0, 1, 2
STAGES = ("profile", "train", "decode", "compiled")


# ----------------------------------------------------------------------------- what every stage shares


class Window:
    """The output folder and the run's settings; `note` and `section` append as soon as a number exists."""

    def __init__(self, args) -> None:
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.device = devices.resolve_device(args.device)
        self.cuda = self.device.type == "cuda"
        if self.cuda:
            torch.set_float32_matmul_precision("high")  # as `clearformer train` on CUDA
        self.dtype = torch.bfloat16  # bf16 autocast, as `clearformer train --bf16` (the CPU has it too)

    def note(self, stage: str, line: str, **numbers) -> None:
        print(f"[{stage}] {line}", flush=True)
        with open(self.out / "summary.txt", "a", encoding="utf-8") as summary:
            summary.write(f"[{stage}] {line}\n")
        if numbers:
            with open(self.out / "results.jsonl", "a", encoding="utf-8") as results:
                results.write(json.dumps({"stage": stage, **numbers}) + "\n")

    def section(self, name: str, title: str, body: str) -> None:
        command = "bash benchmarks/gpu_window.sh" if self.cuda else \
            "python -m benchmarks.gpu_window " + " ".join(sys.argv[1:])
        with open(self.out / "sections.md", "a", encoding="utf-8") as sections:
            sections.write(section_text(name, title, body, command, machine()) + "\n\n")

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def config(self, name: str):
        return preset(name, src_vocab_size=self.args.vocab, tgt_vocab_size=self.args.vocab, tie_embeddings="all",
                      pad_id=PAD, max_len=max(512, self.args.longest + 2))


def synthetic_examples(count: int, vocab: int, longest: int, seed: int = 0) -> list[Example]:
    """Sentence pairs of random ids; source lengths log-normal (median 16 tokens), targets 0.9-1.3x."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        src_len = min(longest - 1, max(1, round(rng.lognormvariate(math.log(16), 0.6))))
        tgt_len = min(longest - 1, max(1, round(src_len * rng.uniform(0.9, 1.3))))
        pairs.append(Example(tuple(rng.randrange(4, vocab) for _ in range(src_len)),
                             tuple(rng.randrange(4, vocab) for _ in range(tgt_len))))
    return pairs


def token_batches(window: Window, count: int, budget: int) -> list:
    """Token-count batches (data/batching.py, as `clearformer train` cuts them) of the synthetic pairs."""
    pairs = synthetic_examples(window.args.sentences, window.args.vocab, window.args.longest)
    stream = BatchStream(pairs, budget, seed=1, pad_id=PAD, bos_id=BOS, eos_id=EOS)
    return stream.take(count)


def shape_batches(window: Window, count: int, shapes: FixedShapes) -> list:
    """Fixed-shape batches (train/shapes.py) of the same synthetic pairs, at least one of each shape used first."""
    pairs = synthetic_examples(window.args.sentences, window.args.vocab, window.args.longest)
    batches = shapes.batches(pairs, seed=1, pad_id=PAD, bos_id=BOS, eos_id=EOS)
    first = {}
    for batch in batches:
        first.setdefault(tuple(batch.src.shape), batch)
    ordered = list(first.values()) + [b for b in batches if all(b is not f for f in first.values())]
    return (ordered * (1 + count // max(1, len(ordered))))[:max(count, len(first))]


def batch_budget(window: Window, config) -> int:
    if window.args.batch_tokens:
        return window.args.batch_tokens
    return devices.gpu_batch_tokens(config, devices.free_gpu_bytes(window.device)) if window.cuda else 2048


class Runner:
    """One model's training step (Adam as `clearformer train` on this device, clipping at 1), its batches
    on the device with their host-counted labels, and its step times."""

    def __init__(self, window: Window, name: str, model, network, batches: list, every_cell: bool,
                 compiled: str | None = None) -> None:
        self.name, self.model, self.window = name, model, window
        forward = TrainingForward(network, window.device.type, window.dtype)
        self.forward = torch.compile(forward, dynamic=False, backend=compiled) if compiled else forward
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9,
                                          **devices.optimizer_implementation(window.device))
        self.batches = [(b.src.to(window.device), b.tgt_in.to(window.device), b.tgt_out.to(window.device),
                         b.tgt_out.numel() if every_cell else b.target_tokens, b) for b in batches]
        self.count = FlopCount.of(model) if isinstance(model, Transformer) else FlopCount.of(
            Transformer(model.config))  # the peer: the same sizes, counted as clearformer's model
        self.times: list[float] = []
        self.losses: list[torch.Tensor] = []  # device tensors, read after the timing (no sync per step)

    def step(self, index: int) -> torch.Tensor:
        src, tgt_in, tgt_out, labels, batch = self.batches[index % len(self.batches)]
        self.optimizer.zero_grad(set_to_none=True)
        loss, _, _ = self.forward(src, tgt_in, tgt_out, labels)
        (loss / batch.target_tokens).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        return loss.detach() / batch.target_tokens

    def timed(self, index: int) -> None:
        self.window.sync()
        began = time.perf_counter()
        self.losses.append(self.step(index))
        self.window.sync()
        self.times.append(time.perf_counter() - began)

    def real_tokens(self, index: int) -> int:
        return self.batches[index % len(self.batches)][4].real_tokens

    def flops(self, index: int) -> float:
        batch = self.batches[index % len(self.batches)][4]
        return self.count.batch(batch.src, batch.tgt_out, self.model.config.pad_id)


def clearformer_model(window: Window, config):
    torch.manual_seed(0)
    return Transformer(config).to(window.device).train()


# ----------------------------------------------------------------------------- profile


def stage_profile(window: Window) -> None:
    """torch.profiler over eager bf16 steps of today's training step: where the time goes."""
    from torch.profiler import ProfilerActivity, profile

    args = window.args
    config = window.config(args.preset)
    budget = batch_budget(window, config)
    model = clearformer_model(window, config)
    runner = Runner(window, "clearformer", model, TranslationLoss(model, 0.1),
                    token_batches(window, args.warmup + args.profile_steps, budget), every_cell=False)
    for index in range(args.warmup):
        runner.step(index)
    window.sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if window.cuda else [])
    began = time.perf_counter()
    with profile(activities=activities) as profiler:
        for index in range(args.warmup, args.warmup + args.profile_steps):
            runner.step(index)
        window.sync()
    wall = time.perf_counter() - began
    report = profile_report(profiler, window, wall, args.profile_steps, budget, config)
    (window.out / "profile.txt").write_text(report, encoding="utf-8")
    save_trace(profiler, window)


def profile_report(profiler, window: Window, wall: float, steps: int, budget: int, config) -> str:
    """The top kernels by device time (on a CPU: operators by own CPU time) and their shares, the top
    host-side operators, and the share of the wall time the device was busy."""
    events = profiler.key_averages()
    device_key = "self_device_time_total" if window.cuda else "self_cpu_time_total"

    def own(event) -> float:
        return getattr(event, device_key, 0) or (getattr(event, "self_cuda_time_total", 0) if window.cuda else 0)

    kernels = [e for e in events if own(e) > 0]
    busy = sum(own(e) for e in kernels) / 1e6  # seconds of device (or CPU operator) time
    rows = [[e.key[:90], e.count, f"{own(e) / 1e3:.1f}", f"{own(e) / 1e6 / busy:.1%}"]
            for e in sorted(kernels, key=own, reverse=True)[:30]]
    host = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:15]
    host_rows = [[e.key[:90], e.count, f"{e.self_cpu_time_total / 1e3:.1f}"] for e in host]
    launches = sum(e.count for e in events if "LaunchKernel" in e.key or "cudaLaunch" in e.key)
    where = "device" if window.cuda else "CPU (operators' own time)"
    text = (f"{steps} eager bf16 steps of `{window.args.preset}` (d_model {config.d_model}, "
            f"{config.n_encoder_layers}+{config.n_decoder_layers} layers, vocabulary {config.tgt_vocab_size}), "
            f"token-count batches of <= {budget} padded tokens per side, on {machine()}.\n"
            f"wall {wall:.3f} s ({wall / steps * 1000:.1f} ms a step); {where} busy {busy:.3f} s "
            f"({busy / wall:.0%} of the wall time); kernel launches {launches} ({launches / steps:.0f} a step)\n\n"
            f"Top kernels by {where} time:\n" + markdown_table(["kernel", "calls", "ms", "share"], rows)
            + "\n\nTop operators by own host time:\n" + markdown_table(["operator", "calls", "host ms"], host_rows)
            + "\n")
    window.note("profile", f"{wall / steps * 1000:.1f} ms a step, {where} busy {busy / wall:.0%} of the wall time, "
                f"{launches / steps:.0f} launches a step; top: " + "; ".join(f"{r[0][:40]} {r[3]}" for r in rows[:5]),
                ms_per_step=wall / steps * 1000, busy_share=busy / wall, launches_per_step=launches / steps,
                top=[{"kernel": r[0], "share": r[3]} for r in rows[:10]])
    return text


def save_trace(profiler, window: Window, limit: int = 15 * 1024 * 1024) -> None:
    """The chrome trace, gzipped, when it is small enough to come back from the GPU machine."""
    import gzip

    raw = window.out / "trace.json"
    profiler.export_chrome_trace(str(raw))
    packed = window.out / "trace.json.gz"
    with open(raw, "rb") as source, gzip.open(packed, "wb", compresslevel=6) as target:
        target.write(source.read())
    raw.unlink()
    if packed.stat().st_size > limit:
        packed.unlink()
        window.note("profile", f"chrome trace left out: over {limit >> 20} MB gzipped")


# ----------------------------------------------------------------------------- train


def stage_train(window: Window) -> None:
    """Steady-state step time, tokens/s and MFU: eager rows in rotating order, then the compiled step."""
    from benchmarks.train_throughput import FullLogitsLoss, TorchPeer

    args = window.args
    config = window.config(args.preset)
    budget = batch_budget(window, config)
    shapes = FixedShapes(budget, tuple(args.lengths))
    count = args.warmup + args.steps
    tokens, fixed = token_batches(window, count, budget), shape_batches(window, count, shapes)
    peak = mfu.measure_matmul_peak(size=window.args.peak_size, device=window.device, dtype=window.dtype)
    window.note("train", f"measured bf16 matmul peak {peak / 1e12:.3g} TFLOP/s", peak=peak)
    runners = []
    model = clearformer_model(window, config)
    runners.append(Runner(window, "clearformer, token-count batches (today's step)", model,
                          TranslationLoss(model, 0.1), tokens, every_cell=False))
    model = clearformer_model(window, config)
    runners.append(Runner(window, "clearformer, fixed shapes + fused loss", model,
                          TranslationLoss(model, 0.1, fused=True), fixed, every_cell=True))
    torch.manual_seed(0)
    peer = TorchPeer(config).to(window.device).train()
    runners.append(Runner(window, "torch.nn.Transformer, token-count batches", peer, FullLogitsLoss(peer), tokens,
                          every_cell=False))
    for runner in runners:
        for index in range(args.warmup):
            runner.step(index)
    for index in range(args.warmup, count):
        for turn in range(len(runners)):
            runners[(index + turn) % len(runners)].timed(index)
    rows = [throughput_row(window, runner, "eager", peak, runners[-1]) for runner in runners]
    window.section(f"gpu_window_train_{window.device.type}", f"Training step, eager ({window.device.type}, bf16, "
                   f"{args.preset}; GPU window)", train_body(window, config, budget, shapes, peak, rows, "eager"))


def throughput_row(window: Window, runner: Runner, mode: str, peak: float, peer: Runner | None,
                   stage: str = "train") -> list:
    args = window.args
    indices = range(args.warmup, args.warmup + len(runner.times))
    total = sum(runner.times)
    real = sum(runner.real_tokens(i) for i in indices)
    flops = sum(runner.flops(i) for i in indices)
    versus = f"{sum(peer.times) / total:.2f}x" if peer is not None and peer.times else "—"
    loss = float(runner.losses[-1]) if runner.losses else float("nan")
    window.note(stage, f"{runner.name} ({mode}): median {statistics.median(runner.times) * 1000:.1f} ms, "
                f"{real / total:,.0f} real tokens/s, MFU {flops / total / peak:.1%}, vs torch.nn.Transformer {versus}",
                model=runner.name, mode=mode, median_ms=statistics.median(runner.times) * 1000,
                tokens_per_s=real / total, mfu=flops / total / peak, last_loss=loss)
    return [runner.name, mode, f"{statistics.median(runner.times) * 1000:.1f}", f"{real / total:,.0f}",
            f"{flops / total / 1e12:.1f}", f"{flops / total / peak:.1%}", versus, f"{loss:.3f}"]


def train_body(window, config, budget, shapes, peak, rows, mode) -> str:
    args = window.args
    return (f"`{args.preset}` (d_model {config.d_model}, {config.n_encoder_layers}+{config.n_decoder_layers} "
            f"layers, one tied {config.tgt_vocab_size}-entry vocabulary), bf16 autocast, Adam "
            f"({'fused' if window.cuda else 'foreach'}), synthetic pairs (benchmarks/gpu_window.py), batches of "
            f"<= {budget} padded tokens per side; fixed shapes (rows, length): {shapes.shapes()}. "
            f"{args.steps} timed steps per row after {args.warmup} warm-up steps, "
            f"{'in rotating order; ' if mode == 'eager' else ''}measured bf16 matmul peak {peak / 1e12:.3g} TFLOP/s. "
            "Tokens/s count real (non-pad) source + target tokens; MFU their model FLOPs "
            "(clearformer.report.flops, the trainer's count) over the peak.\n\n"
            + markdown_table(["step", "mode", "median step (ms)", "real tokens/s", "model TFLOP/s", "MFU",
                              "vs torch.nn.Transformer", "last loss"], rows))


def stage_compiled(window: Window) -> None:
    """clearformer's step compiled for the fixed shapes: compile time per shape (the first step of each,
    noted as it finishes), then the steady state over the same batches."""
    args = window.args
    config = window.config(args.preset)
    budget = batch_budget(window, config)
    shapes = FixedShapes(budget, tuple(args.lengths))
    fixed = shape_batches(window, args.warmup + args.steps, shapes)
    peak = mfu.measure_matmul_peak(size=window.args.peak_size, device=window.device, dtype=window.dtype)
    model = clearformer_model(window, config)
    runner = Runner(window, "clearformer, fixed shapes + fused loss", model, TranslationLoss(model, 0.1, fused=True),
                    fixed, every_cell=True, compiled=args.compile_backend)
    seen, compile_seconds = set(), 0.0
    for index, (src, *_rest) in enumerate(runner.batches):
        if tuple(src.shape) in seen:
            continue
        seen.add(tuple(src.shape))
        window.sync()
        began = time.perf_counter()
        runner.step(index)
        window.sync()
        seconds = time.perf_counter() - began
        compile_seconds += seconds
        window.note("compiled", f"compiled step, first call of shape {tuple(src.shape)}: {seconds:.1f} s",
                    shape=list(src.shape), compile_s=seconds)
    for index in range(args.warmup):
        runner.step(index)
    for index in range(args.warmup, args.warmup + args.steps):
        runner.timed(index)
    row = throughput_row(window, runner, "compiled", peak, None, "compiled")
    window.note("compiled", f"compiling {len(seen)} shapes took {compile_seconds:.1f} s in all",
                compile_total_s=compile_seconds, shapes=len(seen))
    body = train_body(window, config, budget, shapes, peak, [row], "compiled")
    body += (f"\n\nCompiled with torch.compile(dynamic=False, backend={args.compile_backend!r}) for the fixed "
             f"shapes; the first step of each of the {len(seen)} shapes "
             f"compiled it in {compile_seconds:.1f} s in all (not in the step times above).")
    window.section(f"gpu_window_train_compiled_{window.device.type}",
                   f"Training step, compiled for fixed shapes ({window.device.type}, bf16, {args.preset}; GPU window)",
                   body)


# ----------------------------------------------------------------------------- decode


def stage_decode(window: Window) -> None:
    """Greedy and beam 4: eager growing cache, static cache (+ CUDA graph on a GPU), Transformers' generate."""
    from benchmarks.decode_speed import SIZE, hf_runner, make_batches, marian_model, source_lengths
    from clearformer.generate import DecodingOptions, beam_search, greedy_decode, pad_batch
    from clearformer.generate.layout import for_decoding

    args = window.args
    lengths, where = source_lengths(args.decode_sentences, 0)
    batches = make_batches(lengths, args.vocab, args.decode_batch, 0)
    torch.manual_seed(0)
    model = for_decoding(Transformer(preset("small", src_vocab_size=args.vocab, tgt_vocab_size=args.vocab,
                                            dropout=0.0, max_len=512, **SIZE)).eval().to(window.device))
    marian = marian_model(args.vocab).to(window.device)
    inputs = [pad_batch(b, model.config.pad_id, window.device) for b in batches]
    new = args.new_tokens
    rates, equal = {}, {}
    for beam in (1, 4):
        search = greedy_decode if beam == 1 else beam_search
        options = DecodingOptions(beam=beam, alpha=0.6, max_new=new, min_length=new, with_scores=False)
        static = "clearformer, static cache" + (" + CUDA graph" if window.cuda else " (eager)")
        runs = {"clearformer, growing cache (eager)": searcher(search, model, inputs, options.but(compile="off")),
                static: searcher(search, model, inputs, options.but(compile="graph")),
                "transformers MarianMTModel.generate": hf_runner(marian, batches, beam, new)}
        outputs = {name: run() for name, run in runs.items()}  # warm-up (records the graphs)
        names = [n for n in runs if n.startswith("clearformer")]
        same = sum(int(torch.equal(a.tokens, b.tokens)) for a, b in zip(outputs[names[0]], outputs[names[1]],
                                                                          strict=True))
        equal[beam] = f"{same}/{len(inputs)}"
        best = {name: math.inf for name in runs}
        for round_ in range(args.repeats):
            for name in list(runs)[round_ % len(runs):] + list(runs)[: round_ % len(runs)]:
                window.sync()
                began = time.perf_counter()
                runs[name]()
                window.sync()
                best[name] = min(best[name], time.perf_counter() - began)
        for name, seconds in best.items():
            rates[name, beam] = len(lengths) * new / seconds
            window.note("decode", f"{name}, {'greedy' if beam == 1 else f'beam {beam}'}: "
                        f"{rates[name, beam]:,.0f} tokens/s", system=name, beam=beam, tokens_per_s=rates[name, beam])
        window.note("decode", f"beam {beam}: static-cache batches with the eager path's tokens: {equal[beam]}",
                    beam=beam, equal_batches=equal[beam])
    decode_section(window, rates, equal, where, len(lengths))


def searcher(search, model, inputs: list, options):
    """A run of `search` over every batch of `inputs` with `options`; returns the `Decoded` of each."""
    return lambda: [search(model, src, options) for src in inputs]


def decode_section(window: Window, rates: dict, equal: dict, where: str, sentences: int) -> None:
    args = window.args
    rows = []
    for (name, beam), rate in rates.items():
        eager = rates["clearformer, growing cache (eager)", beam]
        hf = rates["transformers MarianMTModel.generate", beam]
        rows.append([name, "greedy" if beam == 1 else f"beam {beam}", f"{rate:,.0f}", f"{rate / eager:.2f}x",
                     f"{rate / hf:.2f}x"])
    body = (f"The `small` size (d_model 256, 3+3 layers) with random weights, vocabulary {args.vocab}, {sentences} "
            f"sentences ({where}) in batches of {args.decode_batch}, exactly {args.new_tokens} new tokens each "
            f"(<eos> suppressed until then), float32, best of {args.repeats} rounds in rotating order, one process. "
            f"Batches where the static cache gave the eager path's tokens: greedy {equal[1]}, beam 4 {equal[4]}.\n\n"
            + markdown_table(["system", "search", "tokens/s", "vs clearformer eager", "vs Transformers"], rows))
    window.section(f"gpu_window_decode_{window.device.type}",
                   f"Decoding: static cache and CUDA graph against eager and Transformers ({window.device.type}; "
                   f"GPU window)", body)


# ----------------------------------------------------------------------------- main


def merge(path: Path) -> None:
    """Put every section of a window's sections.md into BENCHMARKS.md (replacing one of the same name)."""
    text = path.read_text(encoding="utf-8")
    for match in re.finditer(r"<!-- begin (\S+) -->.*?<!-- end \1 -->", text, flags=re.S):
        put_section(match.group(1), match.group(0))
        print(f"merged {match.group(1)}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=[*STAGES, "all", "merge"])
    parser.add_argument("sections", nargs="?", type=Path, help="merge: the window's sections.md")
    parser.add_argument("--out", default="gpu-window", help="the folder the files go to ($OUT on the GPU machine)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: the code path in seconds on a CPU")
    parser.add_argument("--preset", default="base")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--sentences", type=int, default=20000, help="synthetic training pairs")
    parser.add_argument("--longest", type=int, default=128, help="longest synthetic sentence + 1")
    parser.add_argument("--batch-tokens", type=int, default=None, help="default: the GPU rule of clearformer train")
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128], help="fixed-shape lengths")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per training row")
    parser.add_argument("--profile-steps", type=int, default=20)
    parser.add_argument("--decode-sentences", type=int, default=256)
    parser.add_argument("--decode-batch", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compile-backend", default=None,
                        help="torch.compile's backend for the compiled stage (default inductor; with --tiny on a "
                             "CPU aot_eager: dynamo and autograd's graphs without inductor's minutes of C++ builds)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.preset, args.vocab, args.sentences, args.longest = "toy-translate", 300, 300, 32
        args.batch_tokens, args.lengths, args.warmup, args.steps = 256, [16, 32], 1, 2
        args.profile_steps, args.decode_sentences, args.decode_batch = 2, 2, 2
        args.new_tokens, args.repeats = 3, 1
    # The matmul peak's products: 2048 (a CPU's default) in bf16 take minutes on a CPU without bf16 units
    # (each stage measures it), where --tiny is meant to take seconds.
    args.peak_size = 256 if args.tiny else None
    if args.compile_backend is None:
        args.compile_backend = "aot_eager" if args.tiny and args.device == "cpu" else "inductor"
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.stage == "merge":
        merge(args.sections)
        return
    window = Window(args)
    for stage in STAGES if args.stage == "all" else (args.stage,):
        began = time.perf_counter()
        {"profile": stage_profile, "train": stage_train, "decode": stage_decode,
         "compiled": stage_compiled}[stage](window)
        window.note(stage, f"stage done in {time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
