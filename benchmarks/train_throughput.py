"""Training throughput: a clearformer preset (`small` by default, or `base`) against `torch.nn.Transformer`.

Both models get the same sizes (the preset's: `small` is d_model 256, 4 heads, 3+3 layers, d_ff 1024,
`base` the paper's d_model 512, 8 heads, 6+6 layers, d_ff 2048; dropout 0.1, post-norm,
ReLU, one tied source/target/output embedding with sinusoidal positions), the same token-count
batches of real en-fr-software sentences (SentencePiece vocabulary), the same label-smoothed loss,
Adam and clipping, in the same process. Steps alternate between the two in rounds, so a busy
machine slows both alike; the table reports the median step.

    python -m benchmarks.train_throughput                    # CPU, writes its BENCHMARKS.md section
    python -m benchmarks.train_throughput --preset base --steps 8      # the paper's base model
    python -m benchmarks.train_throughput --device cuda --bf16

Model FLOPs utilisation counts the matrix products a step needs for its real (non-pad) tokens,
forward and backward (x3): encoder weights per source token, decoder and output weights per
target token, and the attention products, against this machine's measured matmul peak (fp32, or
bf16 with --bf16).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python benchmarks/train_throughput.py` works too

from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer import mfu  # noqa: E402
from clearformer.batching import BatchStream, drop_long  # noqa: E402
from clearformer.config import preset  # noqa: E402
from clearformer.model.embedding import sinusoidal_table  # noqa: E402
from clearformer.model.transformer import Transformer  # noqa: E402
from clearformer.train.corpus import encode_pairs, read_pairs  # noqa: E402
from clearformer.train.loss import label_smoothed_loss  # noqa: E402
from clearformer.train.step import TranslationLoss, place_dropout  # noqa: E402


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


def model_flops(config, batch) -> float:
    """Training FLOPs (forward + backward) of the real tokens of one batch (clearformer.mfu)."""
    return mfu.translation_flops(config, batch.src, batch.tgt_out)


def make_step(network, parameters, optimizer, autocast):
    """One optimizer step of `network(src, tgt_in, tgt_out) -> (loss sum, nll sum, labels)`."""
    def step(batch):
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss, _, count = network(batch.src, batch.tgt_in, batch.tgt_out)
        (loss / count).backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        return float(loss.detach()) / count
    return step


class FullLogitsLoss(nn.Module):
    """The usual training loss of an nn.Transformer model: logits at every position, padding ignored."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, src, tgt_in, tgt_out):
        return label_smoothed_loss(self.model(src, tgt_in), tgt_out, self.model.config.pad_id, 0.1)


def matmul_peak(device: torch.device, dtype: torch.dtype) -> float:
    """Best FLOP/s of large matrix products in `dtype` (size 2048 on CPU, 8192 on a GPU), see `clearformer.mfu`."""
    return mfu.measure_matmul_peak(size=8192 if device.type == "cuda" else 2048, device=device, dtype=dtype)


def load_batches(args, device):
    from clearformer.tokenize.subword import SentencePieceTokenizer

    pairs = read_pairs((args.corpus,), skip_bad=True)
    pairs = pairs[:: max(1, len(pairs) // args.sentences)][: args.sentences]
    tokenizer = SentencePieceTokenizer.train([s for pair in pairs for s in pair], vocab_size=args.vocab,
                                             threads=torch.get_num_threads())
    examples, _ = drop_long(encode_pairs(tokenizer, pairs), min(256, args.batch_tokens))
    stream = BatchStream(examples, args.batch_tokens, seed=1, pad_id=tokenizer.pad_id,
                         bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id)
    return tokenizer, [b.to(device) for b in stream.take(args.warmup + args.steps)]


RUNNERS = {
    # name: (model class, dropout on attention weights and FFN hidden layer, loss)
    "clearformer (its training step)": (Transformer, 0.0, "packed"),
    "clearformer, nn.Transformer's dropout placement": (Transformer, 0.1, "packed"),
    "torch.nn.Transformer": (TorchPeer, None, "full"),
}


def build_runners(config, device, autocast):
    runners = {}
    for name, (build, extra_dropout, loss) in RUNNERS.items():
        torch.manual_seed(0)
        model = build(config).to(device).train()
        if extra_dropout is not None:
            place_dropout(model, extra_dropout, extra_dropout)
        network = TranslationLoss(model, 0.1) if loss == "packed" else FullLogitsLoss(model)
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, betas=(0.9, 0.98), eps=1e-9)
        runners[name] = (model, make_step(network, list(model.parameters()), optimizer, autocast))
    return runners


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small", choices=["toy-translate", "small", "base", "big"],
                        help="model size (default small; MFU's goal on CPU is >= 60%% at base)")
    parser.add_argument("--corpus", default="data/en-fr-software/train.tsv")
    parser.add_argument("--sentences", type=int, default=20000, help="corpus sentences to batch from")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--batch-tokens", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=24, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    tokenizer, batches = load_batches(args, device)
    config = preset(args.preset, src_vocab_size=len(tokenizer), tgt_vocab_size=len(tokenizer),
                    tie_embeddings="all", pad_id=tokenizer.pad_id)
    autocast = contextlib.nullcontext
    if args.bf16:
        autocast = lambda: torch.autocast(device.type, dtype=torch.bfloat16)  # noqa: E731
    runners = build_runners(config, device, autocast)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    peak_dtype = torch.bfloat16 if args.bf16 else torch.float32
    peaks = [matmul_peak(device, peak_dtype)]
    for _, step in runners.values():
        for batch in batches[: args.warmup]:
            step(batch)
    times = {name: [] for name in runners}
    losses = {name: [] for name in runners}
    timed = batches[args.warmup:]
    names = list(runners)
    # Every batch goes through every model back to back (in rotating order), so a busy machine
    # slows all of them alike.
    for index, batch in enumerate(timed):
        for name in names[index % len(names):] + names[: index % len(names)]:
            sync()
            began = time.perf_counter()
            losses[name].append(runners[name][1](batch))
            sync()
            times[name].append(time.perf_counter() - began)
    peaks.append(matmul_peak(device, peak_dtype))
    peak = max(peaks)
    real = [int((b.src != tokenizer.pad_id).sum() + (b.tgt_out != tokenizer.pad_id).sum()) for b in timed]
    flops = sum(model_flops(config, b) for b in timed)
    peer = "torch.nn.Transformer"
    rows = []
    for name, (model, _) in runners.items():
        total = sum(times[name])
        paired = statistics.median(p / t for p, t in zip(times[peer], times[name], strict=True))
        rows.append([name, f"{sum(p.numel() for p in model.parameters()):,}",
                     f"{statistics.median(times[name]) * 1000:.0f}", f"{sum(real) / total:,.0f}",
                     f"{flops / total / 1e9:.1f}", f"{flops / total / peak:.1%}",
                     f"{sum(times[peer]) / total:.2f}x (median pair {paired:.2f}x)",
                     f"{losses[name][-1]:.3f}"])
    padding = 1 - sum(real) / sum(b.src.numel() + b.tgt_out.numel() for b in timed)
    setting = f"device {device}" + (", bf16 autocast" if args.bf16 else "")
    setting += f", {torch.get_num_threads()} threads"
    c = config
    body = (f"`{args.preset}` preset (d_model {c.d_model}, {c.n_heads} heads, {c.n_encoder_layers}+"
            f"{c.n_decoder_layers} layers, d_ff {c.d_ff}, dropout {c.dropout:g}, one tied "
            f"{len(tokenizer)}-piece SentencePiece vocabulary), {len(timed)} timed steps per model on the "
            f"same {args.corpus} batches of <= {args.batch_tokens} padded tokens per side ({padding:.0%} "
            f"padding), "
            f"{setting}. Measured {str(peak_dtype)[6:]} matmul peak: {peak / 1e9:,.1f} GFLOP/s. "
            f"Tokens/s count real source + target tokens; MFU counts the model FLOPs of those tokens.\n\n"
            + markdown_table(["model", "parameters", "median step (ms)", "real tokens/s", "model GFLOP/s",
                              "MFU", "speed vs torch.nn.Transformer", "last loss"], rows)
            + "\n\nclearformer's training step (`train/step.py`) projects to the vocabulary only at target "
              "positions that hold a label, and puts dropout where the paper does (sublayer outputs and "
              "embedding sums; attention-weight and feed-forward dropout are options, off by default). "
              "torch.nn.Transformer also drops attention weights and feed-forward activations; the second "
              "row gives clearformer that same dropout, so it compares the implementations alone.")
    print(body)
    if not args.no_write:
        kind = device.type + (", bf16" if args.bf16 else "")
        name = "train_throughput" + ("" if kind == "cpu" else "_" + kind.replace(", ", "_"))
        if args.preset != "small":  # `small` keeps its section's old name
            name += f"_{args.preset}"
        write_section(name, f"Training throughput vs torch.nn.Transformer ({kind}, {args.preset})", body)


if __name__ == "__main__":
    main()
