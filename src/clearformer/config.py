"""One config object for every model clearformer builds, and its named presets.

A `ModelConfig` is plain data: it round-trips through JSON (`to_dict` / `from_dict`), which is
how checkpoints store it (`config.json`), so a checkpoint never needs pickled Python objects.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from clearformer.atomic import atomic_write_text
from clearformer.errors import UserError
from clearformer.safeio import read_json


class ConfigError(UserError, ValueError):
    """A config that cannot describe a working model (the message says which field and why)."""


ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")  # built by model/layers.py's FeedForward
ARCHITECTURES = ("transformer", "rnn")
# The fields the GRU baseline (architecture "rnn", model/rnn.py) reads; every other field is the
# Transformer's own (heads, d_ff, positions, norms, activation, attention variant) and stays at its default.
RNN_FIELDS = ("src_vocab_size", "tgt_vocab_size", "d_model", "n_encoder_layers", "n_decoder_layers", "dropout",
              "max_len", "pad_id", "tie_embeddings", "source_eos", "architecture", "length_ratio", "extra")


@dataclass
class ModelConfig:
    """Every size and switch of a clearformer model.

    Sizes
        src_vocab_size / tgt_vocab_size: number of token ids on each side (0 for a decoder-only LM's
            source side).
        d_model: width of every residual stream vector.
        n_heads: attention heads; each head works in d_model / n_heads dimensions.
        n_kv_heads: key/value heads (None = n_heads: plain multi-head attention; 1 = multi-query;
            in between = grouped-query attention).
        n_encoder_layers / n_decoder_layers: depth of each stack (0 encoder layers = decoder-only).
        d_ff: hidden width of the position-wise feed-forward network.
        max_len: longest sequence the model accepts (positions 0 .. max_len-1).

    Switches (paper defaults first)
        positional: "sinusoidal" (the paper), "learned" (BERT/GPT style), "rope" or "none".
        norm_first: False = post-norm Add & Norm as in the paper; True = pre-norm.
        scale_embedding: multiply token embeddings by sqrt(d_model) (the paper does; the seeds' toy
            walkthroughs do not).
        tie_embeddings: "none", "decoder" (target embedding = output projection) or "all"
            (source, target and output share one matrix; needs one joint vocabulary).
        bias: biases on the attention projections.
        dropout: dropout on sublayer outputs, embeddings and attention weights.
        activation: "relu" (the paper), "gelu", "gelu_tanh" (GPT-2's tanh approximation) or "silu"
            (x * sigmoid(x), Marian's "swish").
        attention: "mha" (including GQA/MQA through n_kv_heads) or "mla".
        source_eos: append <eos> to every source sentence before encoding (Marian and fairseq do:
            it marks where the source ends; without it greedy translations of a `small` model ran
            1.16x too long, with it 0.97x: BENCHMARKS.md, "Translation length"). On by default.
            Training, translate, evaluate and explain all read sources through
            `tokenize.encode_source`, which honours it; a config.json written before the field
            existed loads with False, as that model was trained.

    Measured on the training data
        length_ratio: target tokens per source token over the training pairs (sources' <eos> not
            counted), written by `clearformer train`; decoding penalises ending much shorter
            (`generate/brevity.py`). 0 = not measured (imported models, runs from before the
            field): no penalty.
    """

    src_vocab_size: int = 10
    tgt_vocab_size: int = 10
    d_model: int = 4
    n_heads: int = 1
    n_kv_heads: int | None = None
    n_encoder_layers: int = 1
    n_decoder_layers: int = 1
    d_ff: int = 8
    dropout: float = 0.0
    max_len: int = 256
    positional: str = "sinusoidal"
    norm_first: bool = False
    scale_embedding: bool = True
    tie_embeddings: str = "none"
    bias: bool = True
    activation: str = "relu"
    layer_norm_eps: float = 1e-5
    pad_id: int = 0
    attention: str = "mha"
    # Multi-Head Latent Attention (DeepSeek-V2) sizes; used only when attention == "mla".
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    rope_base: float = 10000.0
    source_eos: bool = True
    scale_attention: bool = True
    architecture: str = "transformer"
    length_ratio: float = 0.0
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    def validate(self) -> None:
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise ConfigError(message)

        need(self.d_model > 0 and self.n_heads > 0, "d_model and n_heads must be positive")
        need(self.d_model % self.n_heads == 0,
             f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        need(self.n_heads % self.kv_heads == 0,
             f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.kv_heads}")
        need(self.kv_heads >= 1, "n_kv_heads must be at least 1")
        need(self.positional in ("sinusoidal", "learned", "rope", "none"),
             f"positional must be sinusoidal, learned, rope or none, not {self.positional!r}")
        need(self.tie_embeddings in ("none", "decoder", "all"),
             f"tie_embeddings must be none, decoder or all, not {self.tie_embeddings!r}")
        need(self.tie_embeddings != "all" or self.n_encoder_layers == 0
             or self.src_vocab_size == self.tgt_vocab_size,
             "tie_embeddings='all' needs one joint vocabulary (src_vocab_size == tgt_vocab_size)")
        need(self.activation in ACTIVATIONS,
             f"activation must be {', '.join(ACTIVATIONS[:-1])} or {ACTIVATIONS[-1]}, not {self.activation!r}")
        need(self.attention in ("mha", "mla"), f"attention must be mha or mla, not {self.attention!r}")
        need(0.0 <= self.dropout < 1.0, f"dropout must be in [0, 1), not {self.dropout}")
        need(self.max_len > 0, "max_len must be positive")
        need(self.length_ratio >= 0, f"length_ratio must be >= 0 (0 = not measured), not {self.length_ratio}")
        need(self.positional != "rope" or self.head_dim % 2 == 0, "rope needs an even head dimension")
        need(self.architecture in ARCHITECTURES,
             f"architecture must be {' or '.join(ARCHITECTURES)}, not {self.architecture!r}")
        if self.architecture == "rnn":
            need(self.n_encoder_layers >= 1 and self.n_decoder_layers >= 1,
                 "architecture='rnn' needs at least one encoder and one decoder layer")
            need(self.d_model % 2 == 0, f"architecture='rnn' needs an even d_model (the bidirectional encoder's "
                                        f"two halves), not {self.d_model}")
        if self.attention == "mla":
            self._validate_mla(need)

    def _validate_mla(self, need) -> None:
        """MLA's sizes must describe a latent, keys, values and a RoPE part that fit together."""
        need(self.kv_lora_rank > 0, f"attention='mla' needs kv_lora_rank > 0 (the latent c_KV), "
                                    f"not {self.kv_lora_rank}")
        need(self.qk_nope_head_dim > 0,
             f"attention='mla' needs qk_nope_head_dim > 0, not {self.qk_nope_head_dim}")
        need(self.v_head_dim > 0, f"attention='mla' needs v_head_dim > 0, not {self.v_head_dim}")
        need(self.q_lora_rank >= 0,
             f"q_lora_rank must be >= 0 (0 = no query compression), not {self.q_lora_rank}")
        need(self.qk_rope_head_dim >= 0 and self.qk_rope_head_dim % 2 == 0,
             f"qk_rope_head_dim must be even and >= 0, not {self.qk_rope_head_dim}")
        need(self.positional != "rope" or self.qk_rope_head_dim > 0,
             "attention='mla' with positional='rope' needs qk_rope_head_dim > 0 (the decoupled RoPE key)")
        need(self.positional == "rope" or self.qk_rope_head_dim == 0,
             f"qk_rope_head_dim={self.qk_rope_head_dim} is MLA's decoupled RoPE key: "
             f"it needs positional='rope' (or set it to 0)")
        need(self.n_kv_heads is None or self.n_kv_heads == self.n_heads,
             "n_kv_heads does not apply to attention='mla' (all heads' keys and values come from one latent)")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        data = {"source_eos": False, **data}  # configs from before the field: trained without it
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config field(s): {', '.join(unknown)}")
        for known_field in dataclasses.fields(cls):
            name, annotation = known_field.name, str(known_field.type)
            if name in data and not _has_type(data[name], annotation):
                shown = json.dumps(data[name], default=str)[:40]
                raise ConfigError(f"config field {name} must be {annotation}, not {shown}")
        return cls(**data)

    def save(self, path: str | Path) -> None:
        atomic_write_text(Path(path), json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        try:
            data = read_json(path)
        except UserError as error:
            raise ConfigError(f"not a readable JSON config ({error})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: a config must be a JSON object")
        return cls.from_dict(data)


JSON_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,), "None": (type(None),),
              "dict": (dict,)}


def _has_type(value, annotation: str) -> bool:
    """Whether a JSON value fits a field annotated e.g. "int | None" (a bool is not an int here)."""
    for name in annotation.replace(" ", "").split("|"):
        allowed = JSON_TYPES.get(name.split("[")[0])
        if allowed is None:
            return True  # an annotation this check does not know: left to validate()
        if isinstance(value, allowed) and (bool in allowed or not isinstance(value, bool)):
            return True
    return False


VARIANTS = ("mha", "gqa", "mqa", "mla")


def attention_variant(config: ModelConfig) -> str:
    """Which member of the attention family a config builds: mha, gqa, mqa or mla."""
    if config.attention == "mla":
        return "mla"
    if config.kv_heads == config.n_heads:
        return "mha"
    return "mqa" if config.kv_heads == 1 else "gqa"


def variant_overrides(variant: str, d_model: int, n_heads: int, kv_heads: int | None = None) -> dict:
    """Config fields selecting `variant`, sized with DeepSeek-V2's proportions for MLA.

    GQA defaults to n_heads / 4 key/value heads (at least 2). MLA uses the paper's ratios:
    d_c = 4 d_h, d_h^R = d_h / 2, d_nope = d_v = d_h, no query compression (the paper's
    d_c' = 12 d_h would be wider than d_model at these sizes).
    """
    head = d_model // n_heads
    if variant == "mha":
        return dict(attention="mha", n_kv_heads=None)
    if variant == "mqa":
        return dict(attention="mha", n_kv_heads=1)
    if variant == "gqa":
        groups = kv_heads or max(2, n_heads // 4)
        return dict(attention="mha", n_kv_heads=groups)
    if variant == "mla":
        rope = max(2, head // 2 - head // 2 % 2)  # d_h / 2, rounded down to an even size
        return dict(attention="mla", n_kv_heads=None, kv_lora_rank=4 * head, q_lora_rank=0,
                    qk_nope_head_dim=head, qk_rope_head_dim=rope, v_head_dim=head)
    raise ValueError(f"unknown attention variant {variant!r}; choose one of {', '.join(VARIANTS)}")


LM_DEFAULTS = dict(src_vocab_size=0, n_encoder_layers=0, positional="rope", norm_first=True,
                   activation="gelu", tie_embeddings="decoder", scale_embedding=False, dropout=0.0)

# The paper's sizes (Table 3) and the seeds' toy size. Vocabulary sizes are filled in by the caller.
PRESETS: dict[str, dict] = {
    "toy": dict(d_model=4, n_heads=1, n_encoder_layers=1, n_decoder_layers=1, d_ff=8,
                dropout=0.0, scale_embedding=False),
    "toy-translate": dict(d_model=64, n_heads=4, n_encoder_layers=2, n_decoder_layers=2, d_ff=128,
                          dropout=0.0, max_len=64),
    "small": dict(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024, dropout=0.1),
    "base": dict(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6, d_ff=2048, dropout=0.1),
    "big": dict(d_model=1024, n_heads=16, n_encoder_layers=6, n_decoder_layers=6, d_ff=4096, dropout=0.3),
    # Decoder-only language models (GPT style: pre-norm, GELU, RoPE, output tied to the embedding).
    **{name: dict(LM_DEFAULTS, **sizes) for name, sizes in {
        "lm-tiny": dict(d_model=64, n_heads=4, n_decoder_layers=2, d_ff=256, max_len=128),
        "lm-small": dict(d_model=256, n_heads=8, n_decoder_layers=4, d_ff=1024, max_len=256),
        "lm-base": dict(d_model=512, n_heads=8, n_decoder_layers=6, d_ff=2048, max_len=512),
    }.items()},
}


def preset(name: str, **overrides) -> ModelConfig:
    """Build the config of a named preset; keyword arguments override any field."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    return ModelConfig(**{**PRESETS[name], **overrides})
