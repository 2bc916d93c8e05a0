"""The Hugging Face peer of benchmarks/quality.py: an equal-size MarianMTModel trained for the same CPU minutes.

What it measures: the translation quality (sacrebleu BLEU and chrF, signatures included) that a
Hugging Face `MarianMTModel` of clearformer's `small` size (d_model 256, 4 heads, 3 + 3 layers,
d_ff 1024, ReLU, sinusoidal positions, post-norm, source/target/output embeddings tied as Marian
does) reaches on en-fr-software after `--minutes` of CPU training time, and how its validation
BLEU grows with those minutes. Everything around the model is clearformer's own, so that only the
model and its training step differ from the clearformer run:

  * the same splits (`read_pairs`, bad lines skipped) and the same vocabulary recipe: a joint
    SentencePiece model learned on the training sources + targets by `build_tokenizer`;
  * the same batching (`BatchStream`: length-bucketed batches of <= --batch-tokens padded tokens,
    shuffled with a seed) and the same maximum length (256 tokens, the `small` preset's max_len);
  * the paper's recipe in plain PyTorch: Adam(0.9, 0.98, 1e-9), lr = d_model^-0.5 * min(step^-0.5,
    step * warmup^-1.5), label smoothing 0.1, gradient norm clipped at 1.0, dropout 0.1 on the
    residual and embedding sums only (as clearformer's default);
  * the same scoring (`score_corpus`).

The clock counts the training loop only. Every `--every` minutes it stops while the model translates
the first `--curve-sentences` validation sentences greedily (the BLEU-vs-minutes curve) and
computes the validation loss; at the end the test split is translated with beam 4 (length penalty
0.6, batches of 32 sentences sorted by length) for the final BLEU and chrF.

Ids follow Marian's conventions on clearformer's vocabulary: the source is its pieces followed by
</s> (as MarianTokenizer encodes it), the decoder starts from <pad> (Marian's decoder_start_token_id)
and the labels are the target pieces followed by </s>.

    python -m benchmarks.quality_marian --minutes 25                  # the full run
    python -m benchmarks.quality_marian --minutes 1 --every 0.5 --test-sentences 100 \\
        --curve-sentences 50 --threads 1 --no-write                   # a smoke test

Writes its BENCHMARKS.md section ("quality_marian") and the curve as JSON
(benchmarks/quality_marian_curve.json) for quality.py to plot beside its own.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import deque
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.quality import plot_curves
from benchmarks.report import ROOT, markdown_table, write_section
from clearformer.data.batching import Batch, BatchStream, Example, collate, drop_long, make_batches
from clearformer.evaluate import score_corpus
from clearformer.train.corpus import build_tokenizer, read_pairs
from clearformer.train.options import Vocabulary
from clearformer.train.schedule import noam_lr

CURVE = ROOT / "benchmarks" / "quality_marian_curve.json"
SIZE = dict(d_model=256, heads=4, encoder_layers=3, decoder_layers=3, ffn=1024)
MAX_LEN = 256  # clearformer's `small` max_len: longer training pairs are skipped, longer test sources cut
LOG_EVERY = 50  # steps


def marian_model(vocab_size: int, pad_id: int, eos_id: int, dropout: float, seed: int):
    """A freshly initialised MarianMTModel of the `small` size (Marian's own initialisation)."""
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    config = MarianConfig(vocab_size=vocab_size, decoder_vocab_size=vocab_size, d_model=SIZE["d_model"],
                          encoder_layers=SIZE["encoder_layers"], decoder_layers=SIZE["decoder_layers"],
                          encoder_attention_heads=SIZE["heads"], decoder_attention_heads=SIZE["heads"],
                          encoder_ffn_dim=SIZE["ffn"], decoder_ffn_dim=SIZE["ffn"], activation_function="relu",
                          max_position_embeddings=512, scale_embedding=True, dropout=dropout,
                          attention_dropout=0.0, activation_dropout=0.0, pad_token_id=pad_id, eos_token_id=eos_id,
                          decoder_start_token_id=pad_id, forced_eos_token_id=None, bos_token_id=None)
    torch.manual_seed(seed)
    model = MarianMTModel(config)
    # Set explicitly so that no default of the installed transformers version (forced </s>, a
    # maximum length, banned tokens) changes the search; clearformer's decoders have none of them.
    model.generation_config = GenerationConfig(decoder_start_token_id=pad_id, eos_token_id=eos_id,
                                               pad_token_id=pad_id, forced_eos_token_id=None)
    return model


def marian_examples(tokenizer, pairs: list[tuple[str, str]]) -> list[Example]:
    """Source pieces + </s> (Marian's source format); target pieces (collate adds the start token and </s>)."""
    eos = (tokenizer.eos_id,)
    return [Example(tuple(tokenizer.encode(s)) + eos, tuple(tokenizer.encode(t))) for s, t in pairs]


def forward_loss(model, batch: Batch, smoothing: float) -> tuple[torch.Tensor, int]:
    """(summed label-smoothed cross-entropy over the non-pad labels, number of labels)."""
    pad = batch.pad_id
    # The decoder input starts with <pad> (Marian's start token), so its mask cannot be inferred from
    # the ids: it is given explicitly (ones up to each target's length).
    logits = model(input_ids=batch.src, attention_mask=(batch.src != pad).long(), decoder_input_ids=batch.tgt_in,
                   decoder_attention_mask=(batch.tgt_out != pad).long()).logits
    loss = F.cross_entropy(logits.flatten(0, 1).float(), batch.tgt_out.flatten(), ignore_index=pad,
                           label_smoothing=smoothing, reduction="sum")
    return loss, batch.target_tokens


@torch.no_grad()
def validation_loss(model, examples: list[Example], batch_tokens: int, pad_id: int, eos_id: int,
                    smoothing: float) -> float:
    """Label-smoothed loss per target token over the whole validation split (as clearformer reports it)."""
    model.eval()
    total, labels = 0.0, 0
    for indices in make_batches(examples, batch_tokens):
        batch = collate([examples[i] for i in indices], pad_id, pad_id, eos_id)
        loss, count = forward_loss(model, batch, smoothing)
        total, labels = total + float(loss), labels + count
    model.train()
    return total / max(labels, 1)


@torch.no_grad()
def translate(model, tokenizer, sources: list[str], beam: int, alpha: float, batch_size: int) -> list[str]:
    """Translations of `sources`, in batches of similar lengths (longest first), in the input order.

    Sources are cut to MAX_LEN - 1 pieces + </s>, as clearformer's evaluation cuts them to max_len;
    each batch may generate (its longest source) + 50 tokens, at most MAX_LEN.
    """
    pad, eos = tokenizer.pad_id, tokenizer.eos_id
    encoded = [tokenizer.encode(s)[: MAX_LEN - 1] + [eos] for s in sources]
    order = sorted(range(len(sources)), key=lambda i: -len(encoded[i]))
    outputs = [""] * len(sources)
    model.eval()
    for start in range(0, len(order), batch_size):
        chunk = order[start: start + batch_size]
        longest = max(len(encoded[i]) for i in chunk)
        ids = torch.full((len(chunk), longest), pad, dtype=torch.long)
        for row, i in enumerate(chunk):
            ids[row, : len(encoded[i])] = torch.tensor(encoded[i])
        # The limit counts source pieces without the </s> this script appends (clearformer's src_len + 50).
        new_tokens = min(longest - 1 + 50, MAX_LEN)
        out = model.generate(input_ids=ids, attention_mask=(ids != pad).long(), num_beams=beam, do_sample=False,
                             max_new_tokens=new_tokens, length_penalty=alpha if beam > 1 else 1.0)
        for row, i in enumerate(chunk):
            outputs[i] = tokenizer.decode(out[row].tolist())  # drops the <pad> start, </s> and padding
    model.train()
    return outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=25.0, help="training time budget")
    parser.add_argument("--every", type=float, default=2.5, help="minutes between points of the curve")
    parser.add_argument("--data", default="data/en-fr-software")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--batch-tokens", type=int, default=4096, help="padded tokens per batch (at most)")
    parser.add_argument("--warmup", type=int, default=1000, help="the issue's reference run used 1000")
    parser.add_argument("--lr-factor", type=float, default=1.0)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--clip", type=float, default=1.0, help="maximum gradient norm")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--curve-sentences", type=int, default=300)
    parser.add_argument("--test-sentences", type=int, default=0, help="0 = the whole test split")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6, help="length penalty of the final beam search")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--no-write", action="store_true", help="print only: no BENCHMARKS.md section, no JSON")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.monotonic()
    data = Path(args.data)
    train_pairs = read_pairs((str(data / "train.tsv"),), skip_bad=True)
    valid_pairs = read_pairs((str(data / "valid.tsv"),), skip_bad=True)
    test_pairs = read_pairs((str(data / "test.tsv"),), skip_bad=True)
    test_pairs = test_pairs[: args.test_sentences] if args.test_sentences else test_pairs
    curve_pairs = valid_pairs[: args.curve_sentences]

    # clearformer's own call, so the vocabulary is exactly the one `clearformer train` would learn.
    tokenizer = build_tokenizer(Vocabulary(tokenizer="sentencepiece", vocab_size=args.vocab_size), train_pairs,
                                args.seed)
    pad, eos = tokenizer.pad_id, tokenizer.eos_id
    limit = min(MAX_LEN, args.batch_tokens)
    train, dropped = drop_long(marian_examples(tokenizer, train_pairs), limit)
    valid, _ = drop_long(marian_examples(tokenizer, valid_pairs), limit)
    model = marian_model(len(tokenizer), pad, eos, args.dropout, args.seed)
    model.train()
    # The sinusoidal position tables are frozen parameters in Marian: count (and optimise) only trained ones.
    trainable = [p for p in model.parameters() if p.requires_grad]
    parameters = sum(p.numel() for p in trainable)
    print(f"MarianMTModel: {parameters:,} parameters, SentencePiece vocabulary of {len(tokenizer)}; "
          f"{len(train)} training pairs ({dropped} longer than {limit} tokens skipped), {len(valid)} validation "
          f"pairs; {torch.get_num_threads()} threads", flush=True)

    optimizer = torch.optim.Adam(trainable, lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    # The decoder input is <pad> y (Marian's start token), so <pad> goes where clearformer puts <bos>.
    stream = BatchStream(train, args.batch_tokens, args.seed, pad, pad, eos)
    d_model = model.config.d_model
    budget = args.minutes * 60
    marks: list[float] = []  # training minutes at which the curve gets a point (as quality.py's segments)
    while not marks or marks[-1] < args.minutes - 1e-9:
        marks.append(min(args.minutes, (marks[-1] if marks else 0.0) + args.every))
    points: list[dict] = []
    step, trained_s, total_tokens = 0, 0.0, 0
    window = {"loss": 0.0, "labels": 0, "tokens": 0, "seconds": 0.0}  # since the last log line
    recent: deque[tuple[float, int]] = deque(maxlen=LOG_EVERY)  # (summed loss, labels) of the last steps
    while trained_s < budget:
        began = time.monotonic()
        step += 1
        lr = noam_lr(step, d_model, args.warmup, args.lr_factor)
        for group in optimizer.param_groups:
            group["lr"] = lr
        batch = stream.next()
        optimizer.zero_grad(set_to_none=True)
        loss, labels = forward_loss(model, batch, args.label_smoothing)
        (loss / labels).backward()
        torch.nn.utils.clip_grad_norm_(trainable, args.clip if args.clip > 0 else float("inf"))
        optimizer.step()
        seconds = time.monotonic() - began
        trained_s += seconds
        # Tokens as clearformer counts them: source and target pieces plus the target's </s>; the </s>
        # Marian appends to each source is not counted, so that both systems' tokens/s mean the same.
        tokens = batch.real_tokens - batch.src.shape[0]
        total_tokens += tokens
        recent.append((float(loss.detach()), labels))
        window["loss"] += recent[-1][0]
        window["labels"] += labels
        window["tokens"] += tokens
        window["seconds"] += seconds
        if step % LOG_EVERY == 0:
            print(f"step {step}: loss {window['loss'] / window['labels']:.3f}, lr {lr:.2e}, "
                  f"{window['tokens'] / window['seconds']:,.0f} tokens/s, {trained_s / 60:.2f} min", flush=True)
            window = dict.fromkeys(window, 0)
        if trained_s >= marks[len(points)] * 60 or trained_s >= budget:
            last_loss = sum(loss for loss, _ in recent) / sum(count for _, count in recent)
            # Outside the clock: the evaluation does not count as training time.
            hypotheses = translate(model, tokenizer, [s for s, _ in curve_pairs], beam=1, alpha=1.0,
                                   batch_size=64)
            bleu = score_corpus(hypotheses, [t for _, t in curve_pairs]).bleu
            valid_loss = validation_loss(model, valid, args.batch_tokens, pad, eos, args.label_smoothing)
            points.append({"minutes": marks[len(points)], "step": step, "train_loss": last_loss,
                           "valid_loss": valid_loss, "bleu": bleu, "trained_s": round(trained_s, 1)})
            print(f"{points[-1]['minutes']:g} min: step {step}, train loss {last_loss:.3f}, valid loss "
                  f"{valid_loss:.3f}, greedy BLEU {bleu:.2f} ({len(curve_pairs)} validation sentences)", flush=True)
    tokens_per_s = total_tokens / trained_s

    final = score_corpus(translate(model, tokenizer, [s for s, _ in test_pairs], beam=args.beam, alpha=args.alpha,
                                   batch_size=32), [t for _, t in test_pairs], [s for s, _ in test_pairs])
    wall = (time.monotonic() - started) / 60
    print(f"trained {step} steps in {trained_s / 60:.1f} min, {tokens_per_s:,.0f} tokens/s; "
          f"{wall:.1f} min of wall time in all")
    print(final.bleu_line, final.chrf_line, final.summary(), sep="\n")
    if args.no_write:
        return

    settings = {"minutes": args.minutes, "vocab_size": len(tokenizer), "batch_tokens": args.batch_tokens,
                "warmup": args.warmup, "lr_factor": args.lr_factor, "label_smoothing": args.label_smoothing,
                "dropout": args.dropout, "clip": args.clip, "seed": args.seed, "threads": torch.get_num_threads(),
                "parameters": parameters, "curve_sentences": len(curve_pairs), "test_sentences": len(test_pairs),
                "beam": args.beam, "alpha": args.alpha}
    CURVE.write_text(json.dumps({"system": "Hugging Face MarianMTModel", "settings": settings, "points": points,
                                 "steps": step, "tokens_per_s": tokens_per_s, "test_bleu": final.bleu,
                                 "test_chrf": final.chrf}, indent=1) + "\n", encoding="utf-8")
    rows = [[f"{p['minutes']:g}", p["step"], f"{p['train_loss']:.3f}", f"{p['valid_loss']:.3f}", f"{p['bleu']:.2f}"]
            for p in points]
    body = (f"A Hugging Face `MarianMTModel` of the `small` size (d_model {SIZE['d_model']}, {SIZE['heads']} heads, "
            f"{SIZE['encoder_layers']} + {SIZE['decoder_layers']} layers, d_ff {SIZE['ffn']}, ReLU, embeddings tied "
            f"as Marian ties them; {parameters:,} trained parameters) trained for {args.minutes:g} minutes of "
            f"training time on en-fr-software with clearformer's data, vocabulary ({len(tokenizer)}-piece joint "
            f"SentencePiece) and batching (<= {args.batch_tokens} padded tokens per batch) and the paper's recipe in "
            f"plain PyTorch (Adam 0.9/0.98/1e-9, warmup {args.warmup}, label smoothing {args.label_smoothing}, dropout "
            f"{args.dropout}, gradient clipping {args.clip}); {torch.get_num_threads()} threads; {step} steps, "
            f"{tokens_per_s:,.0f} training tokens/s (source + target); {wall:.0f} minutes of wall time with the "
            f"evaluations.\n\n"
            f"Final test BLEU / chrF (`generate`, beam {args.beam}, length_penalty {args.alpha} - Hugging Face's "
            f"score / length^{args.alpha}, not the GNMT penalty clearformer uses; {len(test_pairs)} test sentences):"
            f"\n\n- `{final.bleu_line}`\n- `{final.chrf_line}`\n"
            + "".join(f"- {line}\n" for line in final.summary().splitlines()) + "\n"
            f"BLEU against training minutes (greedy, first {len(curve_pairs)} validation sentences; points in "
            f"`benchmarks/{CURVE.name}`; train loss = mean of the last <= {LOG_EVERY} steps):\n\n"
            + markdown_table(["minutes", "step", "train loss", "valid loss (smoothed)", "valid BLEU"], rows))
    plot_curves()  # quality.py's figure, now with both curves
    write_section("quality_marian", f"Translation quality: the Hugging Face MarianMTModel peer, "
                  f"{args.minutes:g} CPU minutes", body)


if __name__ == "__main__":
    main()
