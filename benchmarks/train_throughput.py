"""Training throughput: clearformer presets (`small` by default; `base`) against `torch.nn.Transformer`.

Both models get the same sizes (the preset's: `small` is d_model 256, 4 heads, 3+3 layers, d_ff 1024,
`base` the paper's d_model 512, 8 heads, 6+6 layers, d_ff 2048; dropout 0.1, post-norm,
ReLU, one tied source/target/output embedding with sinusoidal positions), the same token-count
batches of real en-fr-software sentences (SentencePiece vocabulary), the same label-smoothed loss,
Adam (fused kernels on a GPU, foreach on a CPU, as `clearformer train`) and clipping, in the same
process. Steps alternate between the models in rounds, so a busy machine slows all of them alike;
the table reports the median step.

    python -m benchmarks.train_throughput                    # CPU, writes its BENCHMARKS.md section
    python -m benchmarks.train_throughput --preset base --steps 8      # the paper's base model
    python -m benchmarks.train_throughput --device cuda      # GPU: small and base, bf16, compiled and eager
    python -m benchmarks.train_throughput --device cpu --compile on --preset toy-translate --steps 3 --no-write

`--compile on|both` runs each model's forward + loss through torch.compile as `clearformer train
--compile on` does (train/step.py); `both` puts compiled and eager rows in one table, so it shows
what compiling buys. On CUDA the defaults are `--preset small,base --bf16 --compile both` and the
batch size of `clearformer train` on that GPU (devices.gpu_batch_tokens).

Model FLOPs utilisation counts the matrix products a step needs for its real (non-pad) tokens,
forward and backward (x3): encoder weights per source token, decoder and output weights per
target token, and the attention products, against this machine's matmul peak measured in the
run, in the dtype the products run in (fp32, or bf16 with --bf16).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python benchmarks/train_throughput.py` works too

from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer import devices  # noqa: E402
from clearformer.config import preset  # noqa: E402
from clearformer.data.batching import BatchStream, drop_long  # noqa: E402
from clearformer.devices import CompiledOrEager  # noqa: E402
from clearformer.model.embedding import sinusoidal_table  # noqa: E402
from clearformer.model.transformer import Transformer  # noqa: E402
from clearformer.report.flops import FlopCount  # noqa: E402
from clearformer.train import mfu  # noqa: E402
from clearformer.train.corpus import encode_pairs, read_pairs  # noqa: E402
from clearformer.train.loss import label_smoothed_sums  # noqa: E402
from clearformer.train.step import TrainingForward, TranslationLoss  # noqa: E402


class TorchPeer(nn.Module):
    """torch.nn.Transformer with the same embedding, positions and tied output as clearformer's model."""

    def __init__(self, config) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.tgt_vocab_size, config.d_model, padding_idx=config.pad_id)
        nn.init.normal_(self.embedding.weight, std=config.d_model**-0.5)
        self.register_buffer("positions", sinusoidal_table(config.max_len, config.d_model), persistent=False)
        self.dropout = nn.Dropout(config.dropout)
        self.transformer = nn.Transformer(
            d_model=config.d_model, nhead=config.n_heads, num_encoder_layers=config.n_encoder_layers,
            num_decoder_layers=config.n_decoder_layers, dim_feedforward=config.d_ff, dropout=config.dropout,
            batch_first=True, norm_first=False)
        self.output = nn.Linear(config.d_model, config.tgt_vocab_size)
        self.output.weight = self.embedding.weight

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids) * math.sqrt(self.config.d_model) + self.positions[: ids.shape[1]]
        return self.dropout(x)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        pad = self.config.pad_id
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1], device=src.device)
        src_padding = src == pad
        hidden = self.transformer(self.embed(src), self.embed(tgt_in), tgt_mask=causal, tgt_is_causal=True,
                                  src_key_padding_mask=src_padding, memory_key_padding_mask=src_padding)
        return self.output(hidden)


def model_flops(count: FlopCount, config, batch) -> float:
    """Training FLOPs (forward + backward) of the real tokens of one batch (clearformer.report.flops, the count
    the trainer's MFU divides by)."""
    return count.batch(batch.src, batch.tgt_out, config.pad_id)


def make_step(forward, parameters, optimizer):
    """One optimizer step of `forward(src, tgt_in, tgt_out, labels) -> (loss sum, nll sum, labels)`;
    returns the loss per label as a device tensor (read after the timing)."""
    def step(batch, labels: int):
        optimizer.zero_grad(set_to_none=True)
        loss, _, _ = forward(batch.src, batch.tgt_in, batch.tgt_out, labels)
        (loss / labels).backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        return loss.detach() / labels
    return step


class FullLogitsLoss(nn.Module):
    """The usual training loss of an nn.Transformer model: logits at every position, padding ignored."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, src, tgt_in, tgt_out, labels: int):
        loss, nll = label_smoothed_sums(self.model(src, tgt_in), tgt_out, self.model.config.pad_id, 0.1)
        return loss, nll, labels


def load_batches(args, device):
    """The tokenizer and the batches, on `device`, each with its label count (counted on the host)."""
    from clearformer.tokenize.subword import SentencePieceTokenizer

    pairs = read_pairs((args.corpus,), skip_bad=True)
    pairs = pairs[:: max(1, len(pairs) // args.sentences)][: args.sentences]
    tokenizer = SentencePieceTokenizer.train([s for pair in pairs for s in pair], vocab_size=args.vocab,
                                             threads=torch.get_num_threads())
    examples, _ = drop_long(encode_pairs(tokenizer, pairs), min(256, args.batch_tokens))
    stream = BatchStream(examples, args.batch_tokens, seed=1, pad_id=tokenizer.pad_id,
                         bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
    return tokenizer, [(b.to(device), b.target_tokens) for b in stream.take(args.warmup + args.steps)]


MODELS = {
    # name: (model class, dropout on attention weights and FFN hidden layer, loss)
    "clearformer (its training step)": (Transformer, 0.0, "packed"),
    "clearformer, nn.Transformer's dropout placement": (Transformer, 0.1, "packed"),
    "torch.nn.Transformer": (TorchPeer, None, "full"),
}
PEER = "torch.nn.Transformer"


def build_runners(config, device, dtype, modes: list[str]) -> dict:
    """{(model name, "eager" | "compiled"): (model, step, compiled forward or None)}."""
    runners = {}
    for mode in modes:
        for name, (build, extra_dropout, loss) in MODELS.items():
            torch.manual_seed(0)
            built = config if extra_dropout is None else dataclasses.replace(  # dropout: the config's
                config, attention_dropout=extra_dropout, ffn_dropout=extra_dropout)
            model = build(built).to(device).train()
            network = TranslationLoss(model, 0.1) if loss == "packed" else FullLogitsLoss(model)
            forward = TrainingForward(network, device.type, dtype)
            compiled = CompiledOrEager(forward, "train_throughput", "training") if mode == "compiled" else None
            optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, betas=(0.9, 0.98), eps=1e-9,
                                         **devices.optimizer_implementation(device))
            runners[name, mode] = (model, make_step(compiled or forward, list(model.parameters()), optimizer),
                                   compiled)
    return runners


def time_runners(runners: dict, batches: list, warmup: int, sync) -> tuple[dict, dict]:
    """Warm every runner up (compiling the compiled ones), then time every batch through every
    runner back to back in rotating order, so a busy machine slows all of them alike."""
    for _, step, _ in runners.values():
        for batch, labels in batches[:warmup]:
            step(batch, labels)
    sync()
    times = {key: [] for key in runners}
    losses = {key: [] for key in runners}
    keys = list(runners)
    for index, (batch, labels) in enumerate(batches[warmup:]):
        for key in keys[index % len(keys):] + keys[: index % len(keys)]:
            sync()
            began = time.perf_counter()
            losses[key].append(runners[key][1](batch, labels))
            sync()
            times[key].append(time.perf_counter() - began)
    return times, {key: [float(v) for v in values] for key, values in losses.items()}


def measure_preset(name: str, args, device, dtype, tokenizer, batches, modes: list[str]) -> str:
    """Time the models of one preset; returns the BENCHMARKS.md section body."""
    config = preset(name, src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer),
                    tie_embeddings="all", pad_id=tokenizer.pad_id)
    runners = build_runners(config, device, dtype, modes)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    peak_dtype = dtype or torch.float32
    peaks = [mfu.measure_matmul_peak(device=device, dtype=peak_dtype)]
    times, losses = time_runners(runners, batches, args.warmup, sync)
    peaks.append(mfu.measure_matmul_peak(device=device, dtype=peak_dtype))
    peak = max(peaks)
    timed = [batch for batch, _ in batches[args.warmup:]]
    real = [int((b.src != tokenizer.pad_id).sum() + (b.tgt_out != tokenizer.pad_id).sum()) for b in timed]
    count = FlopCount.of(Transformer(config))
    flops = sum(model_flops(count, config, b) for b in timed)
    rows, fallbacks = [], []
    for (model_name, mode), (model, _, compiled) in runners.items():
        total, peer = sum(times[model_name, mode]), times[PEER, mode]
        paired = statistics.median(p / t for p, t in zip(peer, times[model_name, mode], strict=True))
        eager = times.get((model_name, "eager"))
        gain = f"{sum(eager) / total:.2f}x" if mode == "compiled" and eager else ""
        if compiled is not None and compiled.failed:
            fallbacks.append(f"{model_name}: torch.compile failed ({compiled.failed}); its compiled row ran eagerly")
        rows.append([model_name, mode, f"{sum(p.numel() for p in model.parameters()):,}",
                     f"{statistics.median(times[model_name, mode]) * 1000:.0f}", f"{sum(real) / total:,.0f}",
                     f"{flops / total / 1e9:.1f}", f"{flops / total / peak:.1%}",
                     f"{sum(peer) / total:.2f}x (median pair {paired:.2f}x)", gain,
                     f"{losses[model_name, mode][-1]:.3f}"])
    padding = 1 - sum(real) / sum(b.src.numel() + b.tgt_out.numel() for b in timed)
    setting = f"device {device}" + (", bf16 autocast" if dtype else "")
    setting += f", {torch.get_num_threads()} threads" + (", Adam fused" if device.type == "cuda" else ", Adam foreach")
    c = config
    return (f"`{name}` preset (d_model {c.d_model}, {c.n_heads} heads, {c.n_encoder_layers}+"
            f"{c.n_decoder_layers} layers, d_ff {c.d_ff}, dropout {c.dropout:g}, one tied "
            f"{len(tokenizer)}-piece SentencePiece vocabulary), {len(timed)} timed steps per model on the "
            f"same {args.corpus} batches of <= {args.batch_tokens} padded tokens per side ({padding:.0%} "
            f"padding), {setting}. Measured {str(peak_dtype)[6:]} matmul peak (the best of two measurements "
            f"in this run): {peak / 1e9:,.1f} GFLOP/s. Tokens/s count real source + target tokens; MFU counts "
            f"the model FLOPs of those tokens. `compiled`: forward + loss through torch.compile "
            f"(train/step.py), after {args.warmup} warmup steps that compile it; `vs eager`: the same model's "
            f"eager time over its compiled time; `speed vs torch.nn.Transformer` compares within a mode.\n\n"
            + markdown_table(["model", "mode", "parameters", "median step (ms)", "real tokens/s", "model GFLOP/s",
                              "MFU", "speed vs torch.nn.Transformer", "vs eager", "last loss"], rows)
            + "".join(f"\n\n{line}" for line in fallbacks)
            + "\n\nclearformer's training step (`train/step.py`) projects to the vocabulary only at target "
              "positions that hold a label, and puts dropout where the paper does (sublayer outputs and "
              "embedding sums; attention-weight and feed-forward dropout are options, off by default). "
              "torch.nn.Transformer also drops attention weights and feed-forward activations; the second "
              "row gives clearformer that same dropout, so it compares the implementations alone.")


def section_name(device, bf16: bool, name: str, compile_mode: str) -> tuple[str, str]:
    """(section name, title) in BENCHMARKS.md: the CPU eager run of `small` keeps its old name."""
    kind = device.type + (", bf16" if bf16 else "")
    section = "train_throughput" + ("" if kind == "cpu" else "_" + kind.replace(", ", "_"))
    if name != "small":  # `small` keeps its section's old name
        section += f"_{name}"
    if device.type != "cuda" and compile_mode != "off":
        section += f"_compile_{compile_mode}"
    compiled = {"off": "", "on": ", compiled", "both": ", compiled and eager"}[compile_mode]
    return section, f"Training throughput vs torch.nn.Transformer ({kind}, {name}{compiled})"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default=None,
                        help="model size(s), comma-separated (default small on a CPU, small,base on CUDA; "
                             "MFU's goal on CPU is >= 60%% at base)")
    parser.add_argument("--corpus", default="data/en-fr-software/train.tsv")
    parser.add_argument("--sentences", type=int, default=20000, help="corpus sentences to batch from")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="padded tokens per batch side (default 2048 on a CPU; on CUDA the GPU rule of "
                             "`clearformer train`, devices.gpu_batch_tokens, for the largest preset)")
    parser.add_argument("--steps", type=int, default=24, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 2; 4 compiled)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                        help="bf16 autocast (default: on CUDA only)")
    parser.add_argument("--compile", choices=["off", "on", "both"], default=None,
                        help="torch.compile the forward + loss: off, on, or both (compiled and eager rows; "
                             "default both on CUDA, off on a CPU)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = devices.resolve_device(args.device)
    cuda = device.type == "cuda"
    names = (args.preset or ("small,base" if cuda else "small")).split(",")
    args.bf16 = cuda if args.bf16 is None else args.bf16
    args.compile = args.compile or ("both" if cuda else "off")
    modes = {"off": ["eager"], "on": ["compiled"], "both": ["eager", "compiled"]}[args.compile]
    args.warmup = args.warmup if args.warmup is not None else (4 if "compiled" in modes else 2)
    if args.batch_tokens is None:
        largest = preset(names[-1], src_vocab_size=args.vocab, tgt_vocab_size=args.vocab)
        args.batch_tokens = devices.gpu_batch_tokens(largest, devices.free_gpu_bytes(device)) if cuda else 2048
    if cuda:
        torch.set_float32_matmul_precision("high")  # as `clearformer train` on CUDA
    dtype = devices.autocast_dtype(device, args.bf16)
    tokenizer, batches = load_batches(args, device)
    for name in names:
        body = measure_preset(name, args, device, dtype, tokenizer, batches, modes)
        print(body, flush=True)
        if not args.no_write:
            write_section(*section_name(device, args.bf16, name, args.compile), body)


if __name__ == "__main__":
    main()
