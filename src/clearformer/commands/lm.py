"""`clearformer lm train | generate | explain`: the decoder-only language model.

    clearformer lm train                        # the World English Bible, built from its package
    clearformer lm generate "In the beginning" --temperature 0.8 --top-p 0.95 --seed 1
    clearformer lm explain "The dog ran"
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from clearformer.errors import UserError

DEFAULT_RUN = "runs/lm"


def register(subparsers) -> None:
    parser = subparsers.add_parser("lm", help="decoder-only language model: train, generate, explain")
    commands = parser.add_subparsers(dest="lm_command", metavar="{train,generate,explain}")
    def show_help(args) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=show_help)

    train = commands.add_parser("train", help="train a GPT-style language model on a text corpus")
    train.add_argument("--corpus", help="a text file (one passage per line) or a directory with train.txt "
                                        "and valid.txt (default: data/en-web, the World English Bible, "
                                        "built from its package if missing)")
    train.add_argument("--out", default=DEFAULT_RUN, help=f"checkpoint directory (default {DEFAULT_RUN})")
    train.add_argument("--preset", default="lm-small", help="lm-tiny, lm-small (default) or lm-base")
    train.add_argument("--attention", choices=["mha", "gqa", "mqa", "mla"], default="mha",
                       help="attention variant (default mha)")
    train.add_argument("--kv-heads", type=int, help="key/value heads for gqa (default n_heads/4, at least 2)")
    train.add_argument("--positional", choices=["rope", "sinusoidal", "learned"], help="override the preset")
    for name in ("kv-lora-rank", "q-lora-rank", "qk-nope-head-dim", "qk-rope-head-dim", "v-head-dim"):
        train.add_argument(f"--{name}", type=int, help="MLA size (default: DeepSeek-V2's proportions)")
    train.add_argument("--tokenizer", choices=["sentencepiece", "words"], default="sentencepiece")
    train.add_argument("--vocab-size", type=int, default=4000, help="tokenizer vocabulary (default 4000)")
    train.add_argument("--steps", type=int, default=1000,
                       help="optimizer steps (default 1000: about 4.5 passes over en-web)")
    train.add_argument("--minutes", type=float, default=0.0,
                       help="stop after this much training time (0 = off)")
    train.add_argument("--batch-size", type=int, default=32)
    train.add_argument("--block-size", type=int, default=128, help="tokens per training window (default 128)")
    train.add_argument("--lr", type=float, default=2e-3)
    train.add_argument("--eval-every", type=int, default=250)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    train.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, mps ...")
    train.add_argument("--resume", action="store_true", help="continue the run in --out")
    train.set_defaults(func=run_train)

    gen = commands.add_parser("generate", help="continue a prompt with a trained language model")
    gen.add_argument("prompt")
    gen.add_argument("--model", default=DEFAULT_RUN, help=f"checkpoint directory (default {DEFAULT_RUN})")
    gen.add_argument("--max-new-tokens", type=int, default=80)
    gen.add_argument("--temperature", type=float, default=0.8)
    gen.add_argument("--top-k", type=int, default=0, help="keep the k most probable tokens (0 = off)")
    gen.add_argument("--top-p", type=float, default=0.95,
                     help="nucleus: keep tokens up to this mass (1 = off)")
    gen.add_argument("--greedy", action="store_true", help="always the most probable token")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--stop-at-eos", action="store_true", help="stop at the end of the first line")
    gen.add_argument("--device", default="cpu")
    gen.add_argument("--mla-path", choices=["absorbed", "naive"], default="absorbed",
                     help="MLA models: decode in latent space (absorbed) or up-project keys/values (naive)")
    gen.set_defaults(func=run_generate)

    explain = commands.add_parser("explain", help="causal mask, per-head weights and next-token distribution")
    explain.add_argument("text")
    explain.add_argument("--model", default=DEFAULT_RUN, help=f"checkpoint directory (default {DEFAULT_RUN})")
    explain.add_argument("--layer", default="0", help="layer index, or 'all' (default 0)")
    explain.add_argument("--head", type=int, help="only this head")
    explain.add_argument("--top", type=int, default=10, help="next tokens to list (default 10)")
    explain.add_argument("--decimals", type=int, default=2)
    explain.add_argument("--format", choices=["text", "json"], default="text")
    explain.add_argument("--full", action="store_true",
                         help="every recorded step (embeddings, Q/K/V, MLA latents, norms, FFN, logits)")
    explain.set_defaults(func=run_explain)


# ----------------------------------------------------------------------------- train


def build_config(args, vocab_size: int):
    from clearformer.config import preset, variant_overrides

    if not args.preset.startswith("lm-"):
        raise UserError(f"--preset {args.preset}: choose lm-tiny, lm-small or lm-base")
    base = preset(args.preset, tgt_vocab_size=vocab_size)
    overrides = variant_overrides(args.attention, base.d_model, base.n_heads, args.kv_heads)
    if args.positional:
        overrides["positional"] = args.positional
        if args.attention == "mla" and args.positional != "rope":
            overrides["qk_rope_head_dim"] = 0  # MLA's decoupled RoPE key exists only with RoPE
    for field in ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
        if getattr(args, field) is not None:
            if args.attention != "mla":
                raise UserError(f"--{field.replace('_', '-')} applies only to --attention mla")
            overrides[field] = getattr(args, field)
    if args.kv_heads is not None and args.attention != "gqa":
        raise UserError("--kv-heads applies only to --attention gqa")
    return preset(args.preset, tgt_vocab_size=vocab_size, **overrides)


def run_train(args) -> int:
    import torch

    from clearformer.checkpoint import load_model
    from clearformer.config import attention_variant
    from clearformer.lm import data as lm_data
    from clearformer.lm.training import LMTrainSettings, train_lm
    from clearformer.model.lm import LanguageModel

    for name in ("steps", "batch_size", "block_size", "vocab_size", "eval_every"):
        if getattr(args, name) <= 0:
            raise UserError(f"--{name.replace('_', '-')} must be positive, not {getattr(args, name)}")
    if args.lr <= 0:
        raise UserError(f"--lr must be positive, not {args.lr}")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    corpus = Path(args.corpus) if args.corpus else lm_data.default_corpus()
    train_lines, valid_lines = lm_data.load_corpus(corpus)
    out = Path(args.out)
    if args.resume:
        model, tokenizer, _ = load_model(out, device)
        model.train()
        print(f"resuming {out} ({model.config.attention}, {model.num_parameters():,} parameters)")
    else:
        print(f"corpus {corpus}: {len(train_lines):,} training and {len(valid_lines):,} validation lines; "
              f"training a {args.tokenizer} tokenizer ({args.vocab_size} tokens)")
        tokenizer = lm_data.train_tokenizer(train_lines, args.vocab_size, args.tokenizer)
        config = build_config(args, len(tokenizer))
        torch.manual_seed(args.seed)
        model = LanguageModel(config).to(device)
    streams = lm_data.build_streams(tokenizer, train_lines, valid_lines)
    settings = LMTrainSettings(steps=args.steps, max_minutes=args.minutes, batch_size=args.batch_size,
                               block_size=args.block_size, lr=args.lr, eval_every=args.eval_every,
                               seed=args.seed)
    meta = {"kind": "lm", "corpus": str(corpus), "corpus_words": streams.words, "tokenizer": tokenizer.kind,
            "variant": attention_variant(model.config)}
    summary = train_lm(model, tokenizer, streams.train, streams.valid, settings, out, meta, args.resume,
                       log=lambda line: print(line, flush=True))
    if "average_tokens_per_second" in summary:
        print(f"trained at {summary['average_tokens_per_second']:,.0f} tokens/s on average "
              f"(MFU {100 * summary['average_mfu']:.1f}%)")
    print(f"saved {out} (step {summary['step']}, validation loss {summary['val_loss']:.4f}); try: "
          f"clearformer lm generate \"In the beginning\" --model {out}")
    return 0


# ----------------------------------------------------------------------------- generate


def pick_device(name: str):
    """A torch device that exists here, or a one-line error."""
    import torch

    try:
        device = torch.device(name)
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError) as error:
        raise UserError(f"--device {name}: not available here ({str(error).splitlines()[0]})") from None
    return device


def load_lm(directory: str, device: str = "cpu"):
    from clearformer.checkpoint import load_model

    model, tokenizer, meta = load_model(directory, pick_device(device))
    if model.config.n_encoder_layers != 0:
        raise UserError(f"{directory}: a translation model, not a language model (use clearformer translate)")
    return model, tokenizer, meta


def decode_lines(tokenizer, ids: list[int]) -> str:
    """Token ids -> text, with each <eos> (a line end in training) as a newline."""
    lines, current = [], []
    for index in ids:
        if index == tokenizer.eos_id:
            lines.append(tokenizer.decode(current))
            current = []
        else:
            current.append(index)
    lines.append(tokenizer.decode(current))
    return "\n".join(lines).rstrip("\n")


def run_generate(args) -> int:
    from clearformer.generate.sampling import SamplingSettings, generate
    from clearformer.lm.data import prompt_ids

    settings = SamplingSettings(args.temperature, args.top_k, args.top_p, args.greedy, args.seed)
    settings.check()
    if args.max_new_tokens <= 0:
        raise UserError(f"--max-new-tokens must be positive, not {args.max_new_tokens}")
    model, tokenizer, _ = load_lm(args.model, args.device)
    model.set_mla_path(args.mla_path == "absorbed")
    ids = prompt_ids(tokenizer, args.prompt)
    new = generate(model, ids, args.max_new_tokens, settings,
                   stop_id=tokenizer.eos_id if args.stop_at_eos else None)
    print(decode_lines(tokenizer, ids[1:] + new))
    if len(ids) + len(new) >= model.config.max_len:
        print(f"(stopped at the model's context of {model.config.max_len} tokens)", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------- explain


def run_explain(args) -> int:
    from clearformer.lm.data import prompt_ids
    from clearformer.lm.explain import explain_data, jsonable, render

    model, tokenizer, _ = load_lm(args.model)
    ids = prompt_ids(tokenizer, args.text)
    if len(ids) > model.config.max_len:
        raise UserError(f"the text is {len(ids)} tokens; the model's context is {model.config.max_len}")
    if args.top <= 0:
        raise UserError(f"--top must be positive, not {args.top}")
    layers = model.config.n_decoder_layers
    if args.layer == "all":
        layer = None
    elif args.layer.isdigit() and int(args.layer) < layers:
        layer = int(args.layer)
    else:
        raise UserError(f"--layer {args.layer}: choose 'all' or a layer from 0 to {layers - 1}")
    if args.head is not None and not 0 <= args.head < model.config.n_heads:
        raise UserError(f"--head {args.head}: choose a head from 0 to {model.config.n_heads - 1}")
    if args.full:
        from clearformer.lm.explain import full_walkthrough

        print(full_walkthrough(model, tokenizer, ids, layer, args.head, args.decimals, args.top))
        return 0
    data = explain_data(model, tokenizer, ids, args.top)
    if args.format == "json":
        sys.stdout.write(json.dumps(jsonable(data), indent=1) + "\n")
    else:
        print(render(data, layer, args.head, args.decimals))
    return 0
