"""Translation quality after N minutes of GPU training: `base` on en-fr-software, test BLEU.

One `clearformer train` run (the same code as the command: bf16 autocast, fused Adam, `--compile` as given,
batches sized to the GPU by devices.gpu_batch_tokens) for `--minutes` of training time, with
validation loss every `--eval-every` steps outside the budget; the model with the best validation
loss then translates the test split with beam search (beam 4) and greedily, scored by sacrebleu
(BLEU and chrF, signatures included).

    python -m benchmarks.gpu_bleu --minutes 10          # on a GPU: writes its BENCHMARKS.md section
    python -m benchmarks.gpu_bleu --device cpu --preset small --minutes 1 --test-sentences 50 --no-write

The second line checks the code path on a CPU; its numbers mean nothing for the GPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python benchmarks/gpu_bleu.py` works too

from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer import devices  # noqa: E402
from clearformer.config import preset  # noqa: E402
from clearformer.evaluate import evaluate_model  # noqa: E402
from clearformer.generate import DecodingOptions  # noqa: E402
from clearformer.load import load_decoding_facts, load_model  # noqa: E402
from clearformer.train import TrainOptions, train  # noqa: E402
from clearformer.train.corpus import read_pairs  # noqa: E402
from clearformer.train.options import preset_defaults  # noqa: E402


def run_options(args, device: torch.device) -> TrainOptions:
    """The run's options: the preset's recipe, the GPU's batch size unless given, no BLEU inside the run."""
    defaults = preset_defaults(args.preset)
    batch_tokens = args.batch_tokens or defaults["batch_tokens"]
    if args.batch_tokens is None and device.type == "cuda":
        config = preset(args.preset, src_vocab_size=args.vocab_size, tgt_vocab_size=args.vocab_size)
        batch_tokens = devices.gpu_batch_tokens(config, devices.free_gpu_bytes(device))
    return TrainOptions.from_values(
        preset=args.preset, data_dir=args.data, run_dir=str(args.out), tokenizer="sentencepiece",
        vocab_size=args.vocab_size, batch_tokens=batch_tokens, warmup=args.warmup or defaults["warmup"], steps=None,
        minutes=args.minutes, patience=0, eval_every=args.eval_every, save_every=args.eval_every, bleu_sentences=0,
        keep=2, device=str(device), bf16=args.bf16, compile=args.compile)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="training time budget (validation not counted)")
    parser.add_argument("--preset", default="base")
    parser.add_argument("--data", default="data/en-fr-software")
    parser.add_argument("--out", type=Path, default=Path("runs/gpu-bleu"), help="run directory (replaced)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                        help="bf16 autocast (default: on CUDA only)")
    parser.add_argument("--compile", choices=["auto", "on", "off"], default="auto")
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="padded tokens per batch side (default: devices.gpu_batch_tokens on CUDA)")
    parser.add_argument("--warmup", type=int, default=None, help="warmup steps (default: the preset's)")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--eval-every", type=int, default=1000, help="validation loss every N steps")
    parser.add_argument("--test-sentences", type=int, default=0, help="0 = the whole test split")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    device = devices.resolve_device(args.device)
    args.bf16 = device.type == "cuda" if args.bf16 is None else args.bf16
    options = run_options(args, device)
    started = time.monotonic()
    result = train(options, progress=False, overwrite=True)
    model, tokenizer, meta = load_model(args.out, device=device)  # the best validation loss
    test = read_pairs((str(Path(args.data) / "test.tsv"),), skip_bad=True)
    test = test[: args.test_sentences] if args.test_sentences else test
    finals = {}
    for name, beam in ((f"beam {args.beam}", args.beam), ("greedy", 1)):
        finals[name], _ = evaluate_model(model, tokenizer, test, DecodingOptions(beam=beam, batch_size=64),
                                         facts=load_decoding_facts(args.out, tokenizer))
        print(name, finals[name].bleu_line, finals[name].chrf_line, sep="\n", flush=True)
    wall = (time.monotonic() - started) / 60
    rows = [[name, f"{e.bleu:.2f}", f"{e.chrf:.2f}", f"{e.ratio:.3f}"] for name, e in finals.items()]
    mfu = "n/a (a share over 100% is a measurement error)" if result.mfu is None else f"{result.mfu:.1%}"
    speed = (f"{result.tokens_per_second:,.0f} real tokens/s, MFU {mfu} of the measured "
             f"{'bf16' if args.bf16 else 'fp32'} matmul peak" if result.tokens_per_second else "no timed steps")
    body = (f"`{args.preset}` preset trained by `clearformer train` for {args.minutes:g} minutes of training time "
            f"on {args.data} ({args.vocab_size}-piece joint SentencePiece vocabulary, <= {options.recipe.batch_tokens} "
            f"padded tokens per batch side, warmup {options.recipe.warmup}, device {device}"
            f"{', bf16 autocast' if args.bf16 else ''}, --compile {args.compile}): {result.step} steps, {speed}; "
            f"stopped: {result.stopped_because}; the model of step {meta.get('step')} (validation loss "
            f"{meta.get('valid_loss') or float('nan'):.3f}, the best); {wall:.1f} minutes of wall time with "
            f"validation and the test decoding.\n\nTest split ({len(test)} sentences), translated by the "
            "best-validation model as `clearformer translate` does (placeholders exact, translate's length "
            "penalty and brevity defaults):\n\n"
            + markdown_table(["decoding", "BLEU", "chrF", "length ratio"], rows) + "\n\n"
            + "".join(f"- `{e.bleu_line}`\n" for e in finals.values()))
    print(body, flush=True)
    if not args.no_write:
        write_section(f"gpu_bleu_{args.preset}", f"Translation quality after {args.minutes:g} GPU minutes "
                      f"({args.preset}, en-fr-software)", body)


if __name__ == "__main__":
    main()
