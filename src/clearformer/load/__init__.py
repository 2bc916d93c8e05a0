"""A whole run folder read back: its config.json, its tokenizer and its weights, as a model ready to run.

    load_model(DIR) -> (model in eval mode, tokenizer, meta)    every command that opens a checkpoint
    load_decoding_facts(DIR, tokenizer) -> DecodingFacts        what decoding reads besides (generate/facts.py)

Above model/ (it builds the model, model/build.py) and tokenize/ (it reads the tokenizer); the files
themselves are store/checkpoint.py's, on the ground floor. Nothing is unpickled: weights come from
safetensors, everything else from JSON, and every way a folder can be wrong is a `UserError` naming the file.
"""

from __future__ import annotations

from pathlib import Path

import torch

from clearformer.config import ConfigError, ModelConfig
from clearformer.errors import UserError
from clearformer.generate.facts import DecodingFacts
from clearformer.limits import check_model_size
from clearformer.model.build import build_model
from clearformer.model.ssru import recurrence_names
from clearformer.store.checkpoint import CONFIG_FILE, META_FILE, WEIGHTS_FILE, load_weights_into, read_weights
from clearformer.store.safeio import read_json
from clearformer.tokenize import load_tokenizer


def read_config(directory: Path) -> ModelConfig:
    """A checkpoint's config.json (of this format: config.FORMAT_VERSION), or a UserError naming it."""
    config_path = Path(directory) / CONFIG_FILE
    if not config_path.exists():
        raise UserError(f"{config_path}: missing (not a clearformer checkpoint?)")
    try:
        return ModelConfig.load(config_path)
    except ConfigError as error:
        message = str(error)
        raise UserError(message if message.startswith(str(config_path)) else f"{config_path}: {message}") from None


def load_config_and_tokenizer(directory: str | Path):
    """(config, tokenizer) of a checkpoint directory."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"{directory}: no such checkpoint directory")
    return read_config(directory), load_tokenizer(directory)


def read_run_weights(path: Path) -> dict[str, torch.Tensor]:
    """A run's weights file by today's tensor names (a run imported when the SSRU sat in the decoder layer's
    self-attention slot still loads: model/ssru.py)."""
    return recurrence_names(read_weights(path))


def load_model(directory: str | Path, device: str | torch.device = "cpu"):
    """(model in eval mode, tokenizer, meta dict) from a checkpoint directory."""
    directory = Path(directory)
    config, tokenizer = load_config_and_tokenizer(directory)
    check_model_size(config, str(directory / CONFIG_FILE))  # before anything is allocated (clearformer.limits)
    model = build_model(config)
    load_weights_into(model, read_run_weights(directory / WEIGHTS_FILE), directory / WEIGHTS_FILE)
    if len(tokenizer) != config.tgt_vocab_size:
        raise UserError(f"{directory}: tokenizer has {len(tokenizer)} tokens but config.json says "
                        f"tgt_vocab_size={config.tgt_vocab_size}")
    meta = {}
    if (directory / META_FILE).exists():
        meta = read_json(directory / META_FILE)
    return model.to(device).eval(), tokenizer, meta


def load_decoding_facts(directory: str | Path, tokenizer) -> DecodingFacts:
    """The run folder's decoding facts (decoding.json; an earlier release's folder: from its tokenizer.json, the
    folder left as it is), the shortlist checked against `tokenizer`'s vocabulary."""
    return DecodingFacts.read(directory, len(tokenizer))
