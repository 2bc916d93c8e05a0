"""clearformer's translation model <-> Hugging Face `MarianMTModel` (the opus-mt translators).

The two are the same architecture, the paper's post-norm Transformer, with four differences of
layout, each handled here:

* Positions: Marian's sinusoidal table puts every sine first and every cosine after
  (column i = sin(angle_i), column d/2 + i = cos(angle_i)); ours interleaves them
  (column 2i = sin, 2i+1 = cos). Permuting the d_model axis by P = [0, 2, 4, ..., 1, 3, 5, ...]
  maps one onto the other. Since LayerNorm, residual sums and every product are equivariant under
  a permutation of d_model applied consistently, the whole network is mapped by applying P to every
  weight axis that is indexed by d_model: embeddings, LayerNorms, each Linear's d_model side and
  the output projection. The attention-internal axes (heads x d_head) and d_ff are untouched.
* Names: q_proj/k_proj/v_proj/out_proj, fc1/fc2, three layer norms per decoder layer.
* The output bias: Marian's `final_logits_bias` is our OutputProjection's bias.
* Tokens: Marian's decoder starts from <pad>; a model of ours starts from <bos>, which an exported
  config names as `decoder_start_token_id`. MarianTokenizer appends </s> to every source: a model
  of ours is exported only if it was trained that way (its tokenizer's `source_eos=True`).

Placeholders: a run that masks them (tokenize/placeholders.py) has the reserved tokens ｟ph0｠... as
user-defined symbols of its SentencePiece model, so MarianTokenizer and CTranslate2's source.spm keep
each one a single piece. Neither masks nor restores, nor copies them by constraint: the export writes
`clearformer_placeholders.json` (the reserved tokens and the patterns) and says so in one line, and
`import marian` of such a folder restores the run's masking.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from clearformer.config import ModelConfig
from clearformer.errors import UserError
from clearformer.generate.facts import NO_FACTS
from clearformer.interop.hf import ConfigFields, read_config, read_weights, require, resolve_folder, take
from clearformer.languages import languages_from_name
from clearformer.limits import MAX_TOKENIZER_FILE_BYTES, check_model_size
from clearformer.model.build import build_model
from clearformer.model.embedding import sinusoidal_table
from clearformer.store.atomic import atomic_write_bytes, atomic_write_text
from clearformer.store.checkpoint import atomic_save_tensors, save_model
from clearformer.store.safeio import read_bytes, read_json_object
from clearformer.tokenize.files import read_vocabulary
from clearformer.tokenize.marianmt import MarianMTTokenizer
from clearformer.tokenize.placeholders import RESERVED_TOKENS, check_patterns

# Marian's activation_function -> ours, and back (Marian's "swish" is SiLU, x * sigmoid(x)).
FROM_MARIAN_ACTIVATION = {"relu": "relu", "swish": "silu", "silu": "silu", "gelu": "gelu",
                          "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
TO_MARIAN_ACTIVATION = {"relu": "relu", "silu": "swish", "gelu": "gelu", "gelu_tanh": "gelu_new"}
TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
PLACEHOLDER_FILE = "clearformer_placeholders.json"  # a masking run's reserved tokens, for whoever runs the export
LAYER_NORM_EPS = 1e-5  # Marian's nn.LayerNorm default

# (our sublayer, Marian's sublayer, d_model axes of its weight, d_model axes of its bias)
ATTENTION = [("w_q", "q_proj", (1,), ()), ("w_k", "k_proj", (1,), ()), ("w_v", "v_proj", (1,), ()),
             ("w_o", "out_proj", (0,), (0,))]
FEED_FORWARD = [("feed_forward.linear_1", "fc1", (1,), ()), ("feed_forward.linear_2", "fc2", (0,), (0,))]
ENCODER_NORMS = [("add_norm_1.norm", "self_attn_layer_norm"), ("add_norm_2.norm", "final_layer_norm")]
DECODER_NORMS = [("add_norm_1.norm", "self_attn_layer_norm"), ("add_norm_2.norm", "encoder_attn_layer_norm"),
                 ("add_norm_3.norm", "final_layer_norm")]


def halves_permutation(d_model: int) -> torch.Tensor:
    """P with marian_vector = our_vector[P]: our even (sine) columns first, then the odd (cosine) ones."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def marian_sinusoidal_table(length: int, d_model: int) -> torch.Tensor:
    """Marian's table, (length, d_model): sin(pos / 10000^(2i/d)) in column i, cos in column d/2 + i."""
    return sinusoidal_table(length, d_model)[:, halves_permutation(d_model)]


def layer_names(n_encoder: int, n_decoder: int) -> list[tuple[str, str, tuple[int, ...]]]:
    """(our name, Marian's name, d_model axes) for every tensor of the layers, weights and biases."""
    names = []

    def linear(ours: str, theirs: str, weight_axes: tuple, bias_axes: tuple) -> None:
        names.append((f"{ours}.weight", f"{theirs}.weight", weight_axes))
        names.append((f"{ours}.bias", f"{theirs}.bias", bias_axes))

    stacks = [("encoder", n_encoder, [("self_attention", "self_attn")], ENCODER_NORMS),
              ("decoder", n_decoder, [("self_attention", "self_attn"), ("cross_attention", "encoder_attn")],
               DECODER_NORMS)]
    for stack, depth, attentions, norms in stacks:
        for i in range(depth):
            ours, theirs = f"{stack}.layers.{i}", f"model.{stack}.layers.{i}"
            for our_attention, their_attention in attentions:
                for our_proj, their_proj, w_axes, b_axes in ATTENTION:
                    linear(f"{ours}.{our_attention}.{our_proj}", f"{theirs}.{their_attention}.{their_proj}",
                           w_axes, b_axes)
            for our_ffn, their_ffn, w_axes, b_axes in FEED_FORWARD:
                linear(f"{ours}.{our_ffn}", f"{theirs}.{their_ffn}", w_axes, b_axes)
            for our_norm, their_norm in norms:
                linear(f"{ours}.{our_norm}", f"{theirs}.{their_norm}", (0,), (0,))
    return names


def permuted(tensor: torch.Tensor, axes: tuple[int, ...], order: torch.Tensor) -> torch.Tensor:
    for axis in axes:
        tensor = tensor.index_select(axis, order)
    return tensor.contiguous()


# ----------------------------------------------------------------------------- export: ours -> Marian


def check_exportable(config: ModelConfig, tokenizer) -> None:
    """A one-line error naming the first option MarianMTModel cannot express."""
    problems = [
        (config.architecture != "transformer",
         f"architecture={config.architecture!r}: the GRU baseline has no Marian equivalent"),
        (not config.scale_attention, "scale_attention=False: Marian always divides scores by sqrt(d_k)"),
        (config.n_encoder_layers == 0, "n_encoder_layers=0: a decoder-only language model is not a translator"),
        (config.norm_first, "norm_first=True (pre-norm): Marian is post-norm only"),
        (not config.bias, "bias=False: Marian's projections all have biases"),
        (config.positional != "sinusoidal", f"positional={config.positional!r}: Marian has sinusoidal positions only"),
        (config.position_timescales != "paper", f"position_timescales={config.position_timescales!r}: "
                                                "MarianMTModel's sinusoid has the paper's timescales"),
        (config.attention != "mha" or config.kv_heads != config.n_heads,
         "attention: Marian has plain multi-head attention only (no GQA/MQA/MLA)"),
        (config.activation not in TO_MARIAN_ACTIVATION, f"activation={config.activation!r} has no Marian equivalent"),
        (config.d_model % 2 != 0, f"d_model={config.d_model}: the sinusoidal halves need an even width"),
        (abs(config.layer_norm_eps - LAYER_NORM_EPS) > 1e-12,
         f"layer_norm_eps={config.layer_norm_eps}: Marian's LayerNorm uses {LAYER_NORM_EPS}"),
        (config.src_vocab_size != config.tgt_vocab_size,
         "src_vocab_size != tgt_vocab_size: Marian's export needs one shared vocabulary"),
        (tokenizer.kind not in ("sentencepiece", "marian"),
         f"tokenizer kind {tokenizer.kind!r}: MarianTokenizer reads SentencePiece models (train with "
         f"--tokenizer sentencepiece)"),
        (not tokenizer.source_eos, "source_eos=False: MarianTokenizer appends </s> to every source, and this "
                                   "model was trained without it (train with --source-eos)"),
    ]
    for failed, reason in problems:
        if failed:
            raise UserError(f"cannot export to Marian: {reason}")


def marian_config(config: ModelConfig, tokenizer) -> dict:
    """The config.json of the MarianMTModel that computes what `config` does."""
    share = config.tie_embeddings == "all"
    return {
        "architectures": ["MarianMTModel"], "model_type": "marian",
        "vocab_size": config.src_vocab_size, "decoder_vocab_size": config.tgt_vocab_size,
        "d_model": config.d_model, "encoder_layers": config.n_encoder_layers,
        "decoder_layers": config.n_decoder_layers, "encoder_attention_heads": config.n_heads,
        "decoder_attention_heads": config.n_heads, "encoder_ffn_dim": config.d_ff, "decoder_ffn_dim": config.d_ff,
        "activation_function": TO_MARIAN_ACTIVATION[config.activation],
        "max_position_embeddings": config.max_len, "scale_embedding": config.scale_embedding,
        "dropout": config.dropout, "attention_dropout": config.dropout, "activation_dropout": 0.0,
        "share_encoder_decoder_embeddings": share, "tie_word_embeddings": config.tie_embeddings != "none",
        "pad_token_id": tokenizer.pad_id, "eos_token_id": tokenizer.eos_id,
        "decoder_start_token_id": tokenizer.bos_id, "forced_eos_token_id": None, "bos_token_id": None,
        "use_cache": True, "is_encoder_decoder": True,
    }


def marian_tensors(model) -> dict[str, torch.Tensor]:
    """Our translation model's weights under Marian's names, d_model axes permuted to its layout."""
    config = model.config
    state = model.state_dict()
    order = halves_permutation(config.d_model)
    tensors = {theirs: permuted(state[ours], axes, order)
               for ours, theirs, axes in layer_names(config.n_encoder_layers, config.n_decoder_layers)}
    source = permuted(state["src_embed.tokens.weight"], (1,), order)
    target = permuted(state["tgt_embed.tokens.weight"], (1,), order)
    if config.tie_embeddings == "all":
        tensors["model.shared.weight"] = source
    else:
        tensors["model.encoder.embed_tokens.weight"] = source
        tensors["model.decoder.embed_tokens.weight"] = target
    if config.tie_embeddings == "none":
        tensors["lm_head.weight"] = permuted(state["output.linear.weight"], (1,), order)
    tensors["final_logits_bias"] = state["output.linear.bias"][None].clone()
    return tensors


def tokenizer_files(tokenizer, max_len: int) -> dict[str, bytes]:
    """source.spm, target.spm, vocab.json and tokenizer_config.json for MarianTokenizer."""
    if tokenizer.kind == "marian":
        source, target, vocab = tokenizer.files["source"], tokenizer.files["target"], tokenizer.vocab
        specials = tokenizer.specials
    else:  # our joint SentencePiece model serves both sides; its pieces are the vocabulary
        source = target = tokenizer.model_proto
        vocab = {tokenizer.id_to_token(i): i for i in range(len(tokenizer))}
        if len(vocab) != len(tokenizer):
            raise UserError("cannot export to Marian: the SentencePiece model lists a piece twice")
        specials = {"pad": tokenizer.id_to_token(tokenizer.pad_id), "unk": tokenizer.id_to_token(tokenizer.unk_id),
                    "eos": tokenizer.id_to_token(tokenizer.eos_id)}
    settings = {"tokenizer_class": "MarianTokenizer", "eos_token": specials["eos"], "unk_token": specials["unk"],
                "pad_token": specials["pad"], "model_max_length": max_len, "separate_vocabs": False,
                "source_lang": None, "target_lang": None}
    return {"source.spm": source, "target.spm": target,
            "vocab.json": json.dumps(vocab, ensure_ascii=False, indent=1).encode("utf-8"),
            "tokenizer_config.json": json.dumps(settings, indent=1).encode("utf-8")}


def export_marian(model, tokenizer, out: Path, beam: int = 4) -> Path:
    """Write a folder that MarianMTModel.from_pretrained and MarianTokenizer.from_pretrained load as is."""
    check_exportable(model.config, tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    config = marian_config(model.config, tokenizer)
    atomic_write_text(out / "config.json", json.dumps(config, indent=1) + "\n")
    # Decoding settings: beam 4, no forced </s> at the length limit and no banned tokens (clearformer has
    # neither); Transformers' length penalty divides by length**alpha (see generation_config below).
    generation = {k: config[k] for k in ("pad_token_id", "eos_token_id", "decoder_start_token_id")}
    generation.update(num_beams=beam, max_length=model.config.max_len, forced_eos_token_id=None)
    atomic_write_text(out / "generation_config.json", json.dumps(generation, indent=1) + "\n")
    atomic_save_tensors(out / "model.safetensors", marian_tensors(model), metadata={"format": "pt"})
    for name, data in tokenizer_files(tokenizer, model.config.max_len).items():
        atomic_write_bytes(out / name, data)
    if tokenizer.mask_placeholders and tokenizer.stand_ins is None:  # stand-ins: the vocabulary is the model's own
        atomic_write_text(out / PLACEHOLDER_FILE, json.dumps(placeholder_record(tokenizer), ensure_ascii=False,
                                                             indent=1) + "\n")
    return out


def placeholder_record(tokenizer) -> dict:
    """What a user of the exported model must do with placeholders (clearformer_placeholders.json)."""
    return {"mask_placeholders": True, "reserved_tokens": list(RESERVED_TOKENS),
            "placeholder_patterns": list(tokenizer.placeholder_patterns),
            "how": "before translating, replace the i-th placeholder of a sentence (clearformer's "
                   "tokenize/placeholders.py find(), plus placeholder_patterns) by reserved_tokens[i]; after, "
                   "replace each reserved token by the text it stands for"}


def masking_note(tokenizer) -> str | None:
    """The one line `export` prints for a run that masks placeholders (None for one that does not)."""
    if not tokenizer.mask_placeholders or tokenizer.stand_ins is not None:
        return None
    return (f"note: this model reads placeholders masked as {RESERVED_TOKENS[0]}, {RESERVED_TOKENS[1]}, ...; the "
            f"exported model does not mask, restore or constrain them: do it yourself ({PLACEHOLDER_FILE})")


# ----------------------------------------------------------------------------- import: Marian -> ours


def imported_config(fields: ConfigFields) -> ModelConfig:
    """Our ModelConfig for a Marian config.json (tying decided later, from the weights)."""
    for ours, theirs in (("n_heads", "attention_heads"), ("d_ff", "ffn_dim")):
        if fields.data.get(f"encoder_{theirs}") != fields.data.get(f"decoder_{theirs}"):
            raise UserError(f"{fields.path}: encoder_{theirs} != decoder_{theirs}: clearformer's {ours} is one value")
    vocab = fields.int("vocab_size")
    if fields.data.get("decoder_vocab_size") not in (None, vocab):
        raise UserError(f"{fields.path}: field 'decoder_vocab_size' differs from vocab_size: separate target "
                        f"vocabularies are not supported")
    for name in ("normalize_before", "normalize_embedding", "add_final_layer_norm"):
        fields.expect(name, False, default=False)
    activation = fields.str("activation_function", "gelu")
    if activation not in FROM_MARIAN_ACTIVATION:
        raise UserError(f"{fields.path}: field 'activation_function' = {activation!r} is not supported "
                        f"({', '.join(FROM_MARIAN_ACTIVATION)})")
    d_model = fields.int("d_model")
    heads = fields.int("encoder_attention_heads")
    if d_model % heads or d_model % 2:
        raise UserError(f"{fields.path}: field 'd_model' = {d_model} must be even and divisible by the heads ({heads})")
    return ModelConfig(
        src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, n_heads=heads,
        n_encoder_layers=fields.int("encoder_layers"), n_decoder_layers=fields.int("decoder_layers"),
        d_ff=fields.int("encoder_ffn_dim"), dropout=min(fields.float("dropout", 0.1), 0.9),
        max_len=fields.int("max_position_embeddings", 1024), positional="sinusoidal", norm_first=False,
        scale_embedding=fields.bool("scale_embedding", False), bias=True,
        activation=FROM_MARIAN_ACTIVATION[activation], layer_norm_eps=LAYER_NORM_EPS,
        pad_id=fields.int("pad_token_id", minimum=0))


def embeddings(tensors: dict, shape: tuple, where: Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(source, target, output) matrices in Marian's layout, whichever of them the file stores tied."""
    shared = tensors.get("model.shared.weight")

    def first(*names: str, fallback=None) -> torch.Tensor:
        for name in names:
            if name in tensors:
                return take(tensors, name, shape, where)
        if fallback is None:
            raise UserError(f"{where}: tensor {names[0]!r} is missing (and no model.shared.weight)")
        return fallback

    shared = take(tensors, "model.shared.weight", shape, where) if shared is not None else None
    source = first("model.encoder.embed_tokens.weight", fallback=shared)
    target = first("model.decoder.embed_tokens.weight", fallback=shared)
    return source, target, first("lm_head.weight", fallback=target)


def check_positions(tensors: dict, config: ModelConfig, where: Path) -> None:
    """Older saves store the sinusoidal tables: they must be Marian's (else the model is not one we map)."""
    expected = marian_sinusoidal_table(config.max_len, config.d_model)
    for stack in ("encoder", "decoder"):
        name = f"model.{stack}.embed_positions.weight"
        if name in tensors:
            table = take(tensors, name, tuple(expected.shape), where)
            if not torch.allclose(table, expected, atol=1e-4):
                raise UserError(f"{where}: tensor {name!r} is not Marian's sinusoidal table")


def imported_state(tensors: dict, config: ModelConfig, where: Path) -> tuple[ModelConfig, dict]:
    """(config with its tying decided, our state dict) from Marian's tensors."""
    inverse = torch.argsort(halves_permutation(config.d_model))
    vocab, d = config.tgt_vocab_size, config.d_model
    state = {}
    for ours, theirs, axes in layer_names(config.n_encoder_layers, config.n_decoder_layers):
        shape = expected_shape(ours, config)
        state[ours] = permuted(take(tensors, theirs, shape, where), axes, inverse)
    source, target, output = (permuted(t, (1,), inverse) for t in embeddings(tensors, (vocab, d), where))
    bias = take(tensors, "final_logits_bias", (1, vocab), where)[0] if "final_logits_bias" in tensors \
        else torch.zeros(vocab)
    if torch.equal(target, output):
        tie = "all" if torch.equal(source, target) else "decoder"
    else:
        tie = "none"
    state.update({"src_embed.tokens.weight": source, "tgt_embed.tokens.weight": target,
                  "output.linear.weight": output, "output.linear.bias": bias})
    check_positions(tensors, config, where)
    return dataclasses.replace(config, tie_embeddings=tie), state


def expected_shape(name: str, config: ModelConfig) -> tuple[int, ...]:
    d, ff = config.d_model, config.d_ff
    if ".feed_forward.linear_1." in name:
        return (ff, d) if name.endswith("weight") else (ff,)
    if ".feed_forward.linear_2." in name:
        return (d, ff) if name.endswith("weight") else (d,)
    return (d, d) if name.endswith("weight") and ".norm." not in name else (d,)


def marianmt_tokenizer(folder: Path, fields: ConfigFields, vocab_size: int):
    """Our MarianMTTokenizer from the folder's source.spm, target.spm, vocab.json (+ tokenizer_config)."""
    files = {}
    for name in TOKENIZER_FILES:
        files[name] = read_bytes(folder / name, MAX_TOKENIZER_FILE_BYTES,
                                 missing="missing (a Marian folder has source.spm, target.spm and vocab.json)")
    settings = read_json_object(folder / "tokenizer_config.json") if (folder / "tokenizer_config.json").exists() else {}
    if settings.get("separate_vocabs"):
        raise UserError(f"{folder / 'tokenizer_config.json'}: separate_vocabs=true is not supported")
    vocab = read_vocabulary(files["vocab.json"], str(folder / "vocab.json"))
    if len(vocab) != vocab_size:
        raise UserError(f"{folder / 'vocab.json'}: {len(vocab)} tokens, but config.json says vocab_size={vocab_size}")
    itos = sorted(vocab, key=vocab.__getitem__)
    names = {key: special_name(settings.get(f"{key}_token"), default)
             for key, default in (("pad", "<pad>"), ("unk", "<unk>"), ("eos", "</s>"))}
    # MarianTokenizer appends </s> to every source: the model was trained so. A vocabulary not made for
    # placeholders (opus-mt's): numerals stand in for the reserved tokens, and decoding copies them exactly
    # (tokenize/standins.py; docs/adapt.md); one clearformer exported masks as the original run did.
    facts = {"source_eos": True, **placeholder_record_facts(folder, vocab)}
    tokenizer = MarianMTTokenizer(files["source.spm"], files["target.spm"], vocab, **names,
                                  start=itos[fields.int("decoder_start_token_id", minimum=0)], facts=facts,
                                  mask_by_stand_ins=True)
    for field, value in (("pad_token_id", tokenizer.pad_id), ("eos_token_id", tokenizer.eos_id)):
        if fields.data.get(field) not in (None, value):
            raise UserError(f"{fields.path}: field {field!r} = {fields.data.get(field)} but vocab.json gives {value}")
    return tokenizer


def placeholder_record_facts(folder: Path, vocab: dict[str, int]) -> dict:
    """A folder clearformer exported from a masking run: the facts the imported run masks by, as the original did
    ({} for any other folder); a one-line error naming the record for a wrong one."""
    path = folder / PLACEHOLDER_FILE
    if not path.exists():
        return {}
    record = read_json_object(path)
    masking, patterns = record.get("mask_placeholders", False), record.get("placeholder_patterns", [])
    try:
        if not isinstance(masking, bool):
            raise ValueError(f"mask_placeholders must be true or false, not {masking!r}")
        if not isinstance(patterns, list):
            raise ValueError(f"placeholder_patterns must be a list of regular expressions, not {patterns!r}")
        check_patterns(patterns)
    except ValueError as error:
        raise UserError(f"{path}: {error}") from None
    if record.get("reserved_tokens") != list(RESERVED_TOKENS):
        raise UserError(f"{path}: reserved_tokens differ from this clearformer's ({RESERVED_TOKENS[0]}, ...)")
    missing = [t for t in RESERVED_TOKENS if t not in vocab]
    if masking and missing:
        raise UserError(f"{path}: the vocabulary lacks the reserved token(s) {missing[:3]}")
    return {"mask_placeholders": masking, "placeholder_patterns": patterns}


def special_name(value, default: str) -> str:
    if isinstance(value, dict):  # an AddedToken serialised as {"content": ...}
        value = value.get("content")
    return value if isinstance(value, str) else default


def load_marian(source: str):
    """(our Transformer in eval mode, tokenizer, folder) from a Marian folder or Hub name."""
    folder = resolve_folder(source, ["*.json", "*.spm", "*.safetensors"])
    fields = ConfigFields(read_config(folder), folder / "config.json")
    if fields.data.get("model_type") not in (None, "marian"):
        raise UserError(f"{fields.path}: field 'model_type' = {fields.data.get('model_type')!r}, not 'marian'")
    config = imported_config(fields)
    check_model_size(config, str(fields.path))  # before a tensor is read or a module built
    tokenizer = marianmt_tokenizer(folder, fields, config.tgt_vocab_size)
    weights_path = folder / "model.safetensors"
    config, state = imported_state(read_weights(folder), config, weights_path)
    model = build_model(config)
    model.load_state_dict(state, strict=True)
    return model.eval(), tokenizer, folder


def import_marian(source: str, out: Path) -> Path:
    """`clearformer import marian SOURCE --out RUN`: a run directory translate/explain/serve/evaluate read."""
    model, tokenizer, folder = load_marian(source)
    meta = {"kind": "translation", "imported_from": str(source), "format": "marian", "tokenizer": tokenizer.kind}
    languages = languages_from_name(str(source)) or languages_from_name(str(folder))  # opus-mt-en-de: en, de
    if languages is not None:
        meta["languages"] = languages.as_record()
    # decoding as the paper's (no brevity rule: no ratio measured here; the paper's length limit; no shortlist)
    return save_model(out, model, tokenizer, meta, NO_FACTS)


def hf_model(folder: Path):
    """MarianMTModel.from_pretrained(folder) in eval mode (needs transformers)."""
    transformers = require("transformers", "loading a Marian model")
    return transformers.MarianMTModel.from_pretrained(str(folder)).eval()
