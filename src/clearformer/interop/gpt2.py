"""Hugging Face `GPT2LMHeadModel` -> clearformer's decoder-only language model.

GPT-2 is the LanguageModel of model/lm.py with these switches: learned positions, pre-norm with a
final LayerNorm, GELU in its tanh form ("gelu_new"), no embedding scale, the output tied to the token
embedding (no output bias: ours is set to zero). Its weights differ only in layout:

* Conv1D stores y = x W + b with W (in, out): an nn.Linear weight is W transposed.
* c_attn holds W_Q, W_K and W_V side by side, (d_model, 3 d_model): split in three.
"""

from __future__ import annotations

from pathlib import Path

import torch

from clearformer.config import ModelConfig
from clearformer.errors import UserError
from clearformer.generate.facts import NO_FACTS
from clearformer.interop.hf import ConfigFields, read_config, read_weights, resolve_folder, take
from clearformer.limits import MAX_TOKENIZER_FILE_BYTES, check_model_size
from clearformer.model.build import build_model
from clearformer.store.checkpoint import save_model
from clearformer.store.safeio import decode_utf8, read_bytes
from clearformer.tokenize.bytebpe import ByteLevelBPETokenizer

FROM_GPT2_ACTIVATION = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
                        "gelu": "gelu", "relu": "relu", "silu": "silu", "swish": "silu"}


def imported_config(fields: ConfigFields, tied: bool, end_of_text: int) -> ModelConfig:
    if fields.data.get("model_type") not in (None, "gpt2"):
        raise UserError(f"{fields.path}: field 'model_type' = {fields.data.get('model_type')!r}, not 'gpt2'")
    for name, wanted, default in (("scale_attn_weights", True, True), ("scale_attn_by_inverse_layer_idx", False, False),
                                  ("add_cross_attention", False, False)):
        fields.expect(name, wanted, default)
    activation = fields.str("activation_function", "gelu_new")
    if activation not in FROM_GPT2_ACTIVATION:
        raise UserError(f"{fields.path}: field 'activation_function' = {activation!r} is not supported")
    d_model, heads = fields.int("n_embd"), fields.int("n_head")
    if d_model % heads:
        raise UserError(f"{fields.path}: field 'n_embd' = {d_model} is not divisible by n_head = {heads}")
    return ModelConfig(
        src_vocab_size=0, tgt_vocab_size=fields.int("vocab_size"), d_model=d_model, n_heads=heads,
        n_encoder_layers=0, n_decoder_layers=fields.int("n_layer"),
        d_ff=fields.int("n_inner", 4 * d_model), dropout=min(fields.float("resid_pdrop", 0.1), 0.9),
        max_len=fields.int("n_positions", 1024), positional="learned", norm_first=True, scale_embedding=False,
        tie_embeddings="decoder" if tied else "none", bias=True, activation=FROM_GPT2_ACTIVATION[activation],
        layer_norm_eps=fields.float("layer_norm_epsilon", 1e-5), pad_id=end_of_text)


def imported_state(tensors: dict, config: ModelConfig, where: Path) -> dict[str, torch.Tensor]:
    """Our LanguageModel's state dict from GPT-2's tensors (Conv1D transposed, c_attn split)."""
    d, ff, vocab = config.d_model, config.d_ff, config.tgt_vocab_size
    prefix = "transformer." if "transformer.wte.weight" in tensors else ""

    def get(name: str, shape: tuple) -> torch.Tensor:
        return take(tensors, prefix + name, shape, where)

    token = get("wte.weight", (vocab, d))
    state = {"embed.tokens.weight": token, "embed.positions.weight": get("wpe.weight", (config.max_len, d)),
             "decoder.final_norm.weight": get("ln_f.weight", (d,)), "decoder.final_norm.bias": get("ln_f.bias", (d,)),
             "output.linear.weight": token if config.tie_embeddings != "none"
             else take(tensors, "lm_head.weight", (vocab, d), where),
             "output.linear.bias": torch.zeros(vocab)}
    for i in range(config.n_decoder_layers):
        ours, theirs = f"decoder.layers.{i}", f"h.{i}"
        qkv_weight = get(f"{theirs}.attn.c_attn.weight", (d, 3 * d)).t()  # Conv1D (in, out) -> Linear (out, in)
        qkv_bias = get(f"{theirs}.attn.c_attn.bias", (3 * d,))
        for part, name in enumerate(("w_q", "w_k", "w_v")):
            state[f"{ours}.self_attention.{name}.weight"] = qkv_weight[part * d:(part + 1) * d].contiguous()
            state[f"{ours}.self_attention.{name}.bias"] = qkv_bias[part * d:(part + 1) * d].contiguous()
        for our_name, their_name, shape in (("self_attention.w_o", "attn.c_proj", (d, d)),
                                            ("feed_forward.linear_1", "mlp.c_fc", (d, ff)),
                                            ("feed_forward.linear_2", "mlp.c_proj", (ff, d))):
            state[f"{ours}.{our_name}.weight"] = get(f"{theirs}.{their_name}.weight", shape).t().contiguous()
            state[f"{ours}.{our_name}.bias"] = get(f"{theirs}.{their_name}.bias", (shape[1],))
        for our_norm, their_norm in (("add_norm_1.norm", "ln_1"), ("add_norm_3.norm", "ln_2")):
            state[f"{ours}.{our_norm}.weight"] = get(f"{theirs}.{their_norm}.weight", (d,))
            state[f"{ours}.{our_norm}.bias"] = get(f"{theirs}.{their_norm}.bias", (d,))
    return state


def gpt2_tokenizer(folder: Path):
    files = {}
    for name in ("vocab.json", "merges.txt"):
        files[name] = read_bytes(folder / name, MAX_TOKENIZER_FILE_BYTES,
                                 missing="missing (GPT-2's tokenizer is vocab.json + merges.txt)")
    decode_utf8(files["merges.txt"], str(folder / "merges.txt"))  # names the file and line of a bad byte
    return ByteLevelBPETokenizer(files["vocab.json"], files["merges.txt"])


def load_gpt2(source: str):
    """(our LanguageModel in eval mode, tokenizer) from a GPT-2 folder or Hub name."""
    folder = resolve_folder(source, ["*.json", "merges.txt", "*.safetensors"])
    fields = ConfigFields(read_config(folder), folder / "config.json")
    tokenizer = gpt2_tokenizer(folder)
    # The sizes, before a tensor is read or a module built (the tying is decided from the weights below).
    check_model_size(imported_config(fields, True, tokenizer.eos_id), str(fields.path))
    tensors = read_weights(folder)
    tied = fields.bool("tie_word_embeddings", True) or "lm_head.weight" not in tensors
    config = imported_config(fields, tied, tokenizer.eos_id)
    if len(tokenizer) != config.tgt_vocab_size:
        raise UserError(f"{folder / 'vocab.json'}: {len(tokenizer)} tokens, but config.json says "
                        f"vocab_size={config.tgt_vocab_size}")
    model = build_model(config)
    model.load_state_dict(imported_state(tensors, config, folder / "model.safetensors"), strict=True)
    return model.eval(), tokenizer


def import_gpt2(source: str, out: Path) -> Path:
    """`clearformer lm import gpt2 SOURCE --out RUN`: a run directory `lm generate` and `lm explain` read."""
    model, tokenizer = load_gpt2(source)
    meta = {"kind": "lm", "imported_from": str(source), "format": "gpt2", "tokenizer": tokenizer.kind}
    return save_model(out, model, tokenizer, meta, NO_FACTS)  # a language model: no translation's facts
