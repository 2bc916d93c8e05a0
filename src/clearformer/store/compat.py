"""Run folders written by earlier releases: the one place their config.json and saved options are converted.

Before the config held the architecture only, config.json was one flat object that also carried

    source_eos     whether sources got <eos> appended (now the tokenizer's: tokenize/facts.py);
                   absent in configs older than the field, whose models were trained without it
    length_ratio   target tokens per source token, measured on the training data (now the tokenizer's)
    extra          an empty dict, never read
    kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
                   MLA's sizes, zeros unless attention == "mla" (now ModelConfig.mla, an MLAConfig)

and a run's saved TrainOptions could hold `overrides["source_eos"]` (now TrainOptions.source_eos).
`upgrade_config_dict` turns such an object into the current one plus the tokenization facts it
carried; `read_config_file` reads any config.json through it, and checkpoint.py hands the facts to
the tokenizer of the same folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from clearformer.config import ConfigError, ModelConfig, read_json_object

LEGACY_MLA_FIELDS = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
LEGACY_FIELDS = ("source_eos", "length_ratio", "extra") + LEGACY_MLA_FIELDS


@dataclass
class ConfigFile:
    """A config.json read: the config, and the tokenization facts an earlier release kept in it
    ({} for a config of this release, whose tokenizer.json holds them)."""

    config: ModelConfig
    tokenizer_facts: dict = field(default_factory=dict)


def upgrade_config_dict(data: dict) -> tuple[dict, dict]:
    """(the config object of this release, {"source_eos": ..., "length_ratio": ...} or {}) for a
    config.json object of any release; one of this release passes through unchanged."""
    if not any(name in data for name in LEGACY_FIELDS):
        return dict(data), {}
    data = dict(data)
    source_eos = data.pop("source_eos", False)  # older than the field: trained without it
    length_ratio = data.pop("length_ratio", 0.0)  # 0 = not measured
    if not isinstance(source_eos, bool):
        raise ConfigError(f"config field source_eos must be bool, not {json.dumps(source_eos, default=str)[:40]}")
    if isinstance(length_ratio, bool) or not isinstance(length_ratio, (int, float)) or length_ratio < 0:
        raise ConfigError(f"config field length_ratio must be a number >= 0, not "
                          f"{json.dumps(length_ratio, default=str)[:40]}")
    data.pop("extra", None)
    sizes = {name: data.pop(name) for name in LEGACY_MLA_FIELDS if name in data}
    if data.get("attention") == "mla" and "mla" not in data:
        data["mla"] = sizes
    return data, {"source_eos": source_eos, "length_ratio": float(length_ratio)}


def read_config_file(path: str | Path) -> ConfigFile:
    """A config.json of this release or an earlier one; a one-line ConfigError for anything else."""
    current, facts = upgrade_config_dict(read_json_object(path))
    try:
        return ConfigFile(ModelConfig.from_dict(current), facts)
    except TypeError as error:  # a required MLA size missing from an older flat config
        raise ConfigError(f"{path}: incomplete config ({error})") from None


def upgrade_train_options(data: dict) -> dict:
    """A run's saved TrainOptions object with `overrides["source_eos"]` moved to its own option."""
    overrides = data.get("overrides")
    if not isinstance(overrides, dict) or "source_eos" not in overrides:
        return data
    overrides = dict(overrides)
    return {**data, "overrides": overrides, "source_eos": bool(overrides.pop("source_eos"))}
