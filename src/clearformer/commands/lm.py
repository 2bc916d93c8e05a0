"""`clearformer lm train | generate | explain`: the decoder-only language model.

    clearformer lm train                        # the World English Bible, built from its package
    clearformer lm generate "In the beginning" --temperature 0.8 --top-p 0.95 --seed 1
    clearformer lm explain "The dog ran"
    clearformer lm explain "The dog ran" --html dog.html   # the same steps as an interactive page
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from clearformer.commands import options, views
from clearformer.config import VARIANTS, MLAConfig, preset, variant_overrides
from clearformer.data import lm as lm_data
from clearformer.data.lm import prompt_ids
from clearformer.errors import UserError
from clearformer.explain.interventions import add_ablate_argument, interventions_from_args
from clearformer.explain.lm import explain_text, focus
from clearformer.explain.render import render, to_json
from clearformer.generate.layout import for_decoding
from clearformer.generate.sampling import SamplingOptions, generate
from clearformer.interop.gpt2 import import_gpt2
from clearformer.limits import MAX_NEW_TOKENS, check_model_size, require_utf8
from clearformer.load import load_model
from clearformer.model.lm import LanguageModel
from clearformer.options import check_value
from clearformer.store.lock import owned_output
from clearformer.store.runs import runs_root
from clearformer.train import resume_options, train
from clearformer.train.lm import LMOptions

DEFAULT_RUN = "runs/lm"


def lm_run(path: str) -> str:
    """The LM's default place, `runs/lm`, follows $CLEARFORMER_RUNS as every run folder does (store/runs.py)."""
    return str(runs_root() / "lm") if path == DEFAULT_RUN else path


def register(subparsers) -> None:
    parser = subparsers.add_parser("lm", help="decoder-only language model: train, generate, explain")
    commands = parser.add_subparsers(dest="lm_command", metavar="{train,generate,explain,import}")
    def show_help(args) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=show_help)

    train = commands.add_parser("train", help="train a GPT-style language model on a text corpus")
    # The run's options (train/lm.py LMOptions: the recipe, and the loop and hardware `train` has too).
    LMOptions.add_arguments(train)
    # --save-every defaults to --eval-every, and --minutes alone lifts the default step count.
    train.set_defaults(save_every=None, steps=None)
    # What the model is made of (read once, when the run starts).
    train.add_argument("--attention", choices=VARIANTS, default="mha",
                       help="attention variant (default mha)")
    train.add_argument("--kv-heads", type=int, help="key/value heads for gqa (default n_heads/4, at least 2)")
    train.add_argument("--positional", choices=["rope", "sinusoidal", "learned"], help="override the preset")
    for name in ("kv-lora-rank", "q-lora-rank", "qk-nope-head-dim", "qk-rope-head-dim", "v-head-dim"):
        train.add_argument(f"--{name}", type=int, help="MLA size (default: DeepSeek-V2's proportions)")
    train.add_argument("--tokenizer", choices=["sentencepiece", "words"], default="sentencepiece")
    train.add_argument("--vocab-size", type=int, default=4000, help="tokenizer vocabulary (default 4000)")
    options.add_threads(train)
    train.add_argument("--resume", action="store_true", help="continue the run in --out (SIGKILL-safe)")
    train.add_argument("--overwrite", action="store_true",
                       help="--out holds a run: delete its files (model, checkpoints, metrics) and start afresh")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.set_defaults(func=run_train)

    gen = commands.add_parser("generate", help="continue a prompt with a trained language model")
    gen.add_argument("prompt")
    options.add_checkpoint(gen, DEFAULT_RUN, model_alias=True)
    gen.add_argument("--max-new-tokens", type=int, default=80, metavar="N", help="tokens to generate (default 80)")
    SamplingOptions.add_arguments(gen)
    gen.set_defaults(temperature=0.8, top_p=0.95, seed=0)  # the command's defaults: a little sharper than p
    gen.add_argument("--stop-at-eos", action="store_true", help="stop at the end of the first line")
    options.add_device(gen)
    options.add_threads(gen)
    gen.add_argument("--mla-path", choices=["absorbed", "naive"], default="absorbed",
                     help="MLA models: decode in latent space (absorbed) or up-project keys/values (naive)")
    add_ablate_argument(gen)
    gen.set_defaults(func=run_generate)

    explain = commands.add_parser("explain", help="causal mask, per-head weights and next-token distribution")
    explain.add_argument("text")
    options.add_checkpoint(explain, DEFAULT_RUN, model_alias=True)
    explain.add_argument("--layer", default="0", help="layer index, or 'all' (default 0)")
    explain.add_argument("--head", type=int, help="only this head")
    explain.add_argument("--top", type=int, default=10, help="next tokens to list (default 10)")
    explain.add_argument("--max-new-tokens", type=int, default=3,
                         help="tokens generated (greedy, as lm generate --greedy) and explained (default 3)")
    explain.add_argument("--mla-path", choices=["absorbed", "naive"], default="naive",
                         help="MLA models: show the up-projected keys/values (naive, default) or the absorbed path")
    explain.add_argument("--decimals", type=int, default=2)
    explain.add_argument("--format", choices=["text", "json"], default="text")
    explain.add_argument("--full", action="store_true",
                         help="every recorded step (embeddings, Q/K/V, MLA latents, norms, FFN, logits)")
    views.add_view_options(explain)
    explain.set_defaults(func=run_explain)

    imported = commands.add_parser("import", help="read a pretrained model (GPT-2) into a clearformer run")
    imported.add_argument("format", choices=["gpt2"])
    imported.add_argument("source", metavar="SRC", help="a GPT2LMHeadModel folder (save_pretrained), or a Hub "
                                                        "model written hf:OWNER/NAME (e.g. hf:openai-community/gpt2)")
    imported.add_argument("--out", required=True, metavar="RUN", help="the run directory to write")
    imported.add_argument("--overwrite", action="store_true", help="RUN holds a clearformer run: replace it")
    imported.set_defaults(func=run_import)


def run_import(args) -> int:
    with owned_output(Path(args.out), args.overwrite, "lm import gpt2"):
        out = import_gpt2(args.source, Path(args.out))
    print(f"imported {args.source} into {out}; try: clearformer lm explain \"The dog ran\" --model {out}")
    return 0


# ----------------------------------------------------------------------------- train


def build_config(args, vocab_size: int):
    if not args.preset.startswith("lm-"):
        raise UserError(f"--preset {args.preset}: choose lm-tiny, lm-small or lm-base")
    base = preset(args.preset, tgt_vocab_size=vocab_size)
    overrides = variant_overrides(args.attention, base.d_model, base.n_heads, args.kv_heads)
    if args.positional:
        overrides["positional"] = args.positional
    mla_sizes = {field.name: getattr(args, field.name) for field in dataclasses.fields(MLAConfig)
                 if getattr(args, field.name) is not None}
    if args.attention == "mla" and args.positional not in (None, "rope"):
        mla_sizes.setdefault("qk_rope_head_dim", 0)  # MLA's decoupled RoPE key exists only with RoPE
    for name in mla_sizes:
        if args.attention != "mla":
            raise UserError(f"--{name.replace('_', '-')} applies only to --attention mla")
    if mla_sizes:
        overrides["mla"] = dataclasses.replace(overrides["mla"], **mla_sizes)
    if args.kv_heads is not None and args.attention != "gqa":
        raise UserError("--kv-heads applies only to --attention gqa")
    config = preset(args.preset, tgt_vocab_size=vocab_size, **overrides)
    check_model_size(config, f"--preset {args.preset}")  # before allocating (clearformer.limits)
    return config


def run_train(args) -> int:
    options.apply_threads(args.threads)
    given = LMOptions.given(args)
    args.out = given["run_dir"] = lm_run(given["run_dir"])
    if given["save_every"] is None:
        given["save_every"] = given["eval_every"]
    if args.resume:
        changed = {name: given[name] for name in ("steps", "minutes", "device", "corpus") if given[name]}
        run_options = resume_options(Path(args.out), "lm", **changed)
    else:
        if given["steps"] is None and given["minutes"] is None:
            given["steps"] = 1000  # about 4.5 passes over en-web
        run_options = LMOptions.from_values(**given).check()
        if not run_options.corpus:
            run_options.corpus = str(lm_data.default_corpus())
        if args.vocab_size <= 0:
            raise UserError(f"--vocab-size must be positive, not {args.vocab_size}")
        build_config(args, 16)  # option mistakes (MLA sizes, --kv-heads) before reading the corpus

    def fresh():
        import torch

        train_lines, valid_lines = lm_data.load_corpus(Path(run_options.corpus))
        print(f"corpus {run_options.corpus}: {len(train_lines):,} training and {len(valid_lines):,} validation "
              f"lines; training a {args.tokenizer} tokenizer ({args.vocab_size} tokens)", flush=True)
        tokenizer = lm_data.train_tokenizer(train_lines, args.vocab_size, args.tokenizer)
        config = build_config(args, len(tokenizer))
        torch.manual_seed(run_options.loop.seed)
        return tokenizer, LanguageModel(config), train_lines, valid_lines

    result = train(run_options, resume=args.resume, progress=not args.quiet, overwrite=args.overwrite, fresh=fresh)
    valid = f", validation loss {result.valid_loss:.4f}" if result.valid_loss is not None else ""
    print(f"saved {result.run_dir} (step {result.step}{valid}); try: "
          f"clearformer lm generate \"In the beginning\" --checkpoint {result.run_dir}")
    return 0


# ----------------------------------------------------------------------------- generate


def load_lm(directory: str, device: str = "cpu"):
    model, tokenizer, meta = load_model(directory, options.device(device))
    if model.config.n_encoder_layers != 0:
        raise UserError(f"{directory}: a translation model, not a language model (use clearformer translate)")
    return for_decoding(model), tokenizer, meta  # its decoding layout, once, here (generate/layout.py)


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
    settings = SamplingOptions.from_args(args)
    check_value("--max-new-tokens", args.max_new_tokens, at_least=1, at_most=MAX_NEW_TOKENS)
    require_utf8("the prompt", args.prompt)
    options.apply_threads(args.threads)
    model, tokenizer, _ = load_lm(lm_run(args.checkpoint), args.device)
    model.set_mla_path(args.mla_path == "absorbed")
    ids = prompt_ids(tokenizer, args.prompt)
    with interventions_from_args(model, args):  # what-if: --ablate NAME
        new = generate(model, ids, args.max_new_tokens, settings,
                       stop_id=tokenizer.eos_id if args.stop_at_eos else None)
    print(decode_lines(tokenizer, ids[1:] + new))
    if len(ids) + len(new) >= model.config.max_len:
        print(f"(stopped at the model's context of {model.config.max_len} tokens)", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------- explain


def run_explain(args) -> int:
    views.check_views(args)
    require_utf8("the text", args.text)
    check_value("--max-new-tokens", args.max_new_tokens, at_least=0, at_most=MAX_NEW_TOKENS)
    model, tokenizer, _ = load_lm(lm_run(args.checkpoint))
    if not 0 <= args.decimals <= 12:
        raise UserError("--decimals must be between 0 and 12")
    layers = model.config.n_decoder_layers
    if args.layer == "all":
        layer = None
    elif args.layer.isdigit() and int(args.layer) < layers:
        layer = int(args.layer)
    else:
        raise UserError(f"--layer {args.layer}: choose 'all' or a layer from 0 to {layers - 1}")
    if args.head is not None and not 0 <= args.head < model.config.n_heads:
        raise UserError(f"--head {args.head}: choose a head from 0 to {model.config.n_heads - 1}")
    model.set_mla_path(args.mla_path == "absorbed")
    walk = explain_text(model, tokenizer, args.text, args.max_new_tokens, args.top)
    if args.format == "json":
        sys.stdout.write(to_json(walk))
    else:
        shown = walk if args.full else focus(walk, model.config.attention)
        sys.stdout.write(render(shown, args.decimals, layer, args.head, color=sys.stdout.isatty()))
    views.write_views(walk, args)
    return 0
