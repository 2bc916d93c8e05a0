"""`clearformer import marian-bin MODEL.bin --vocab VOCAB.spm [--shortlist LEX.bin] [--decoder-config C.yml]`:
a Marian `.bin` of Firefox's SSRU family as a clearformer run (`import firefox` is this, on the package's files:
interop/firefox.py).

The model's YAML gives the config (interop/marian_bin_arch.py, the one table), its tensors the weights
(int8 dequantized: int8 / scale); the SentencePiece vocabulary gets its `<pad>` (interop/marian_bin_vocab.py),
whose row of `Wemb` is zero and whose output bias is PAD_BIAS, so it is never chosen, shortlist or not;
the lexical shortlist is read by tokenize/shortlist.py; the decoder config's max-length-factor becomes the
run's output limit (tokenize/facts.py).

Files of another model are refused where that can be seen (docs/firefox.md, "Another model's files"): a
vocabulary of another size or without </s> at 0, a shortlist over another number of source ids or with ids
out of range, a shortlist that does not list the vocabulary's numerals for themselves, and, last, a probe:
the model must translate a row of numerals (the pieces that stand in for placeholders) back to the same
numerals, without the shortlist and then with it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from clearformer.config import ModelConfig
from clearformer.errors import UserError
from clearformer.generate.facts import MAX_LENGTH_FACTOR, DecodingFacts
from clearformer.interop.marian_bin import INT8_ALPHA, MarianModel, parse_marian_yaml, read_marian_bin
from clearformer.interop.marian_bin_arch import config_from_yaml, layer_entries
from clearformer.interop.marian_bin_vocab import marian_spm_tokenizer
from clearformer.limits import MAX_JSON_FILE_BYTES, MAX_TOKENIZER_FILE_BYTES
from clearformer.model.build import build_model
from clearformer.store.atomic import atomic_write_bytes, atomic_write_text
from clearformer.store.checkpoint import save_model
from clearformer.store.safeio import read_bytes
from clearformer.tokenize.shortlist import LexicalShortlist, read_shortlist

PAD_BIAS = -1.0e4  # the added <pad>'s output bias: far below any real logit, finite (checkpoints refuse inf)
MARIAN_LENGTH_FACTOR = 3.0  # Marian's default --max-length-factor, for a model imported without its decoder config
LICENSE_FILE = "MODEL_LICENSE.txt"
PROVENANCE_FILE = "provenance.json"
ENGINE_TOKENIZER_FILE = "engine_tokenizer.json"  # the package's tokenizer.json, which its engine reads
PROBE = "1 2 3 4 5 6 7 8 9 10"  # numerals: what every translation model copies, and the placeholders' stand-ins
SELF_LISTED_NUMERALS = 0.95  # the share of numeral pieces a shortlist of this vocabulary lists for themselves
MPL_NOTICE = """The weights, vocabulary and shortlist in this folder are Mozilla's Firefox Translations
model {name}, from {source}.

This Source Code Form is subject to the terms of the Mozilla Public License, v. 2.0. If a copy of the
MPL was not distributed with this file, You can obtain one at https://mozilla.org/MPL/2.0/.

Copyright Mozilla Foundation and the Firefox Translations (Bergamot) contributors. clearformer converted
the int8 weights to float32 (dequantized: int8 / scale) and stored them as model.safetensors; the
vocabulary (tokenizer.model) has one control piece, <pad>, added at the end; shortlist.bin is the
original file, byte for byte.
"""


@dataclass(frozen=True)
class MarianBinFiles:
    """The files of one Marian model: the `.bin`, its vocabulary, and optionally its shortlist, decoder config and
    the engine's tokenizer.json (kept for `export --to marian-bin`)."""

    model: Path
    vocab: Path
    shortlist: Path | None = None
    decoder: Path | None = None
    engine_tokenizer: Path | None = None


@dataclass(frozen=True)
class Origin:
    """Where the files came from, for the notice and provenance.json: a name, a source, the package record
    (None for files named on the command line) and the languages it translates between (source, target), when
    the package says (serve's /languages and a template's header read them: languages.py)."""

    name: str
    source: str
    package: dict | None = None
    languages: tuple[str, str] | None = None


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
    except (TypeError, ValueError, OverflowError):
        factor = float("nan")
    if not 0 < factor <= MAX_LENGTH_FACTOR:  # NaN too
        raise UserError(f"{path}: max-length-factor {value!r} is not a number above 0 and at most "
                        f"{MAX_LENGTH_FACTOR:g}")
    return factor


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


# ----------------------------------------------------------------------------- another model's files


def check_shortlist_fits(tokenizer, shortlist: LexicalShortlist, path: Path) -> None:
    """A shortlist built over this vocabulary lists each numeral piece among its own translations (numbers are
    copied); one built over another vocabulary of the same size lists other pieces under those ids."""
    numerals = [i for i in range(shortlist.vocab_size) if tokenizer.id_to_token(i).lstrip("▁").isdigit()]
    listed = sum(i in shortlist.lists[shortlist.offsets[i]: shortlist.offsets[i + 1]] for i in numerals)
    if numerals and listed < SELF_LISTED_NUMERALS * len(numerals):
        raise UserError(f"{path}: lists only {listed:,} of the vocabulary's {len(numerals):,} numeral pieces for "
                        f"themselves: a shortlist built over another vocabulary (another model's?)")


def check_probe(model, tokenizer, facts: DecodingFacts, path: Path, what: str) -> None:
    """The model translates a row of numerals back to the same numerals (no constraint copies them for it), with
    the shortlist when `what` is "shortlist" (else without): else `path` is another model's file."""
    from clearformer.generate import DecodingOptions, translate

    options = DecodingOptions(placeholders="free", shortlist="on" if what == "shortlist" else "off")
    output = translate(model, tokenizer, [PROBE], options, facts=facts)[0]
    if re.findall(r"\d+", output) != PROBE.split():
        raise UserError(f"{path}: the model translates {PROBE!r} as {output[:60]!r} with this {what}: another "
                        f"model's {what}?")


def check_files_belong(model, tokenizer, facts: DecodingFacts, files: MarianBinFiles) -> None:
    """The vocabulary first (the probe without the shortlist: the model reads and writes through it alone), then
    the shortlist against that vocabulary and through the probe."""
    check_probe(model, tokenizer, facts, files.vocab, "vocabulary")
    if facts.shortlist is not None:
        check_shortlist_fits(tokenizer, facts.shortlist, files.shortlist)
        check_probe(model, tokenizer, facts, files.shortlist, "shortlist")


# ----------------------------------------------------------------------------- import


def load_marian_bin(files: MarianBinFiles):
    """(our Transformer in eval mode, its tokenizer, its decoding facts) from a Marian `.bin`, its vocabulary,
    shortlist and decoder config, every file checked against the model. The facts are the engine's, whole: its
    length factor and its shortlist (generate/facts.py)."""
    marian = read_marian_bin(files.model)
    config = config_from_yaml(marian.config, marian.path)
    vocab_size = config.tgt_vocab_size - 1
    tokenizer = marian_spm_tokenizer(Path(files.vocab), vocab_size)
    shortlist = None if files.shortlist is None else read_shortlist(files.shortlist, vocab_size)
    facts = DecodingFacts(max_length_factor=decoder_length_factor(files.decoder), shortlist=shortlist)
    state = marian_bin_state(marian, config)
    model = build_model(config)
    model.load_state_dict(state, strict=False)
    missing = {n for n, _ in model.named_parameters()} - set(state)
    if missing:
        raise UserError(f"{files.model}: no tensor for {sorted(missing)[0]}")
    model.eval()
    check_files_belong(model, tokenizer, facts, files)
    return model, tokenizer, facts


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def provenance(files: MarianBinFiles, package: dict | None) -> dict:
    """Where the weights came from: each source file with its SHA-256, and the package's version."""
    named = {"model": files.model, "vocab": files.vocab, "shortlist": files.shortlist, "decoder": files.decoder}
    record = {"format": "marian-bin", "files": {kind: {"path": str(path), "sha256": sha256(path)}
                                                for kind, path in named.items() if path is not None}}
    if package is not None:
        record["package"] = package
    return record


def import_marian_bin(files: MarianBinFiles, out: Path, origin: Origin | None = None) -> Path:
    """Write the run folder: weights, config, tokenizer, shortlist, notice, provenance (and the engine's
    tokenizer.json when given)."""
    model, tokenizer, facts = load_marian_bin(files)
    origin = origin or Origin(Path(files.model).name, str(files.model))
    meta = {"kind": "translation", "imported_from": str(files.model), "format": "marian-bin",
            "tokenizer": tokenizer.kind}
    if origin.languages is not None:
        meta["languages"] = dict(zip(("source", "target"), origin.languages, strict=True))
    save_model(out, model, tokenizer, meta, facts)
    atomic_write_text(out / LICENSE_FILE, MPL_NOTICE.format(name=origin.name, source=origin.source))
    atomic_write_text(out / PROVENANCE_FILE, json.dumps(provenance(files, origin.package), indent=2) + "\n")
    if files.engine_tokenizer is not None and files.engine_tokenizer.exists():
        atomic_write_bytes(out / ENGINE_TOKENIZER_FILE,
                           read_bytes(files.engine_tokenizer, MAX_TOKENIZER_FILE_BYTES * 4, missing="missing"))
    return out
