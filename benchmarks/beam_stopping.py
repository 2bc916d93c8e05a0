"""Beam search's early-stopping rule and length penalty on a trained checkpoint: BLEU, chrF, length, time.

    python -m benchmarks.beam_stopping --checkpoint runs/quality        # writes its BENCHMARKS.md section
    python -m benchmarks.beam_stopping --checkpoint DIR --limit 300 --no-write

Translates the test split of the checkpoint's corpus with beam 4 under each early-stopping rule
("bound": stop a sentence once no surviving beam can beat its best finished translation at any
length it may still reach; "current": compare at the current length only, as Transformers does by
default) and each length-penalty alpha, and reports sacrebleu BLEU / chrF, the brevity penalty and
the hypothesis/reference length ratio, and the decoding time; greedy decoding is the first row.
"""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks.report import markdown_table, write_section
from clearformer.evaluate import evaluate_model, load_pairs
from clearformer.generate import DecodingOptions
from clearformer.load import load_decoding_facts, load_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, metavar="DIR")
    parser.add_argument("--data", default=None, help="corpus folder (default: the checkpoint's)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.6, 1.0])
    parser.add_argument("--rules", nargs="+", default=["current", "bound"], choices=["current", "bound"])
    parser.add_argument("--limit", type=int, default=0, help="first N sentences only (0 = all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--about", default="", help="how the checkpoint was trained (printed with the results)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from sacrebleu.metrics import BLEU

    model, tokenizer, meta = load_model(args.checkpoint)
    facts = load_decoding_facts(args.checkpoint, tokenizer)  # the run's length ratio, as `evaluate` decodes
    pairs, name = load_pairs(args.split, args.data, meta)
    if args.limit:
        pairs = pairs[: args.limit]
    references = [target for _, target in pairs]
    rows = []
    # Greedy decoding first, for the length it gives on the same model.
    start = time.perf_counter()
    result, _ = evaluate_model(model, tokenizer, pairs, DecodingOptions(), facts=facts)
    seconds = time.perf_counter() - start
    bleu = BLEU().corpus_score(result.hypotheses, [references])
    rows.append(["greedy", "—", f"{result.bleu:.2f}", f"{result.chrf:.2f}", f"{bleu.bp:.3f}",
                 f"{bleu.sys_len / bleu.ref_len:.3f}", f"{seconds:.1f}"])
    print(" | ".join(rows[-1]), flush=True)
    for alpha in args.alphas:
        for rule in args.rules:
            start = time.perf_counter()
            result, _ = evaluate_model(model, tokenizer, pairs, DecodingOptions(beam=args.beam, alpha=alpha, stop=rule),
                                       facts=facts)
            seconds = time.perf_counter() - start
            bleu = BLEU().corpus_score(result.hypotheses, [references])
            row = [f"{alpha:g}", rule, f"{result.bleu:.2f}", f"{result.chrf:.2f}", f"{bleu.bp:.3f}",
                   f"{bleu.sys_len / bleu.ref_len:.3f}", f"{seconds:.1f}"]
            print(" | ".join(row), flush=True)
            rows.append(row)
    table = markdown_table(["alpha", "early stop", "BLEU", "chrF", "BP", "hyp/ref length", "seconds"], rows)
    body = (f"{len(pairs)} sentences of {name}, beam {args.beam} (first row: greedy), checkpoint `{args.checkpoint}` "
            f"(step {meta.get('step', '?')}{'; ' + args.about if args.about else ''}). "
            f"Signature: `{result.signatures['bleu']}`.\n\n{table}\n")
    print(body)
    if not args.no_write:
        write_section("beam_stopping", "Beam search: early-stopping rule and length penalty", body)


if __name__ == "__main__":
    main()
