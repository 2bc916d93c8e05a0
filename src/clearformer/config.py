"""The config of every model clearformer builds (its architecture only), and its named presets.

A `ModelConfig` is plain data: it round-trips through JSON (`to_dict` / `from_dict`), which is
how checkpoints store it (`config.json`), so a checkpoint never needs pickled Python objects.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from clearformer.errors import UserError
from clearformer.options import fits
from clearformer.store.atomic import atomic_write_text
from clearformer.store.safeio import read_json_object


class ConfigError(UserError, ValueError):
    """A config that cannot describe a working model (the message says which field and why)."""


ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")  # built by model/layers.py's FeedForward
ATTENTIONS = ("mha", "mla", "ssru")  # the decoder self-attention modules (or alternative) model/variants.py builds
POSITION_LAYOUTS = ("interleaved", "halves")  # the sinusoid's columns: the paper's, or Marian's
POSITION_TIMESCALES = ("paper", "tensor2tensor")  # the sinusoid's frequencies: the paper's, or Marian's C++ engine's
# The fields the GRU baseline (architecture "rnn", model/rnn.py) reads; every other field is the
# Transformer's own (heads, d_ff, positions, norms, activation, attention variant) and must stay at its default.
RNN_FIELDS = ("src_vocab_size", "tgt_vocab_size", "d_model", "n_encoder_layers", "n_decoder_layers", "dropout",
              "max_len", "pad_id", "tie_embeddings", "architecture")
# The architectures model/build.py builds (the first is the default), each with the fields it reads (None: all).
ARCHITECTURES = {"transformer": None, "rnn": RNN_FIELDS}


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


@dataclass
class MLAConfig:
    """The sizes of Multi-Head Latent Attention (DeepSeek-V2, model/latent.py), read only when
    ModelConfig.attention == "mla".

        kv_lora_rank: d_c, the width of the cached key/value latent c_KV.
        qk_nope_head_dim: each head's position-free query/key part (up-projected from the latent).
        v_head_dim: each head's value width.
        qk_rope_head_dim: d_h^R, the decoupled rotary key shared by all heads (0 = none; needs
            positional="rope" when > 0).
        q_lora_rank: the query compression's width (0 = queries straight from d_model).
    """

    kv_lora_rank: int
    qk_nope_head_dim: int
    v_head_dim: int
    qk_rope_head_dim: int = 0
    q_lora_rank: int = 0

    def __post_init__(self) -> None:
        _need(self.kv_lora_rank > 0, f"attention='mla' needs kv_lora_rank > 0 (the latent c_KV), "
                                     f"not {self.kv_lora_rank}")
        _need(self.qk_nope_head_dim > 0,
              f"attention='mla' needs qk_nope_head_dim > 0, not {self.qk_nope_head_dim}")
        _need(self.v_head_dim > 0, f"attention='mla' needs v_head_dim > 0, not {self.v_head_dim}")
        _need(self.q_lora_rank >= 0,
              f"q_lora_rank must be >= 0 (0 = no query compression), not {self.q_lora_rank}")
        _need(self.qk_rope_head_dim >= 0 and self.qk_rope_head_dim % 2 == 0,
              f"qk_rope_head_dim must be even and >= 0, not {self.qk_rope_head_dim}")

    @classmethod
    def from_dict(cls, data) -> MLAConfig:
        if not isinstance(data, dict):
            raise ConfigError(f"config field mla must be an object or null, not {json.dumps(data, default=str)[:40]}")
        return cls(**_checked_fields(cls, data, "mla."))


@dataclass
class ModelConfig:
    """The architecture of a clearformer model: every size and switch, nothing about data or decoding.

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
        dropout: dropout on sublayer outputs and embeddings (the paper's, section 5.4).
        attention_dropout, ffn_dropout: dropout on the attention weights and on the feed-forward hidden
            layer (later tensor2tensor additions; off by default: on a CPU drawing their masks costs
            about as much as the products they follow). The one place dropout is set: each module
            reads its rate from here when it is built.
        activation: "relu" (the paper), "gelu", "gelu_tanh" (GPT-2's tanh approximation) or "silu"
            (x * sigmoid(x), Marian's "swish").
        scale_attention: the paper's 1/sqrt(d_k) on attention scores (off only for `clearformer claims 2`).
        rope_base: the base of RoPE's angles (positional="rope", MLA's rotary key).
        position_layout: the sinusoid's columns: "interleaved" (the paper: sin in even columns, cos in
            odd) or "halves" (Marian: every sine first, then every cosine; the same numbers permuted).
        position_timescales: the sinusoid's frequencies: "paper" (column pair i turns at 1 / 10000^(2i/d))
            or "tensor2tensor" (1 / 10000^(i/(d/2 - 1)): from 1 down to exactly 1/10000, the formula
            Marian's C++ engine and Firefox's students use; Hugging Face's MarianMT uses the paper's). Close
            at small positions, they part by a few hundredths of a radian by position 20: enough to change
            a translation (docs/firefox.md, "Token for token").
        zero_start: the decoder's input at position 0 is a zero vector (plus its position) instead of
            the <bos> embedding (Marian); the start token's id is then never looked up.

    Variants
        attention: the decoder's self-attention: "mha" (including GQA/MQA through n_kv_heads),
            "mla" (its sizes in `mla`, an `MLAConfig`), or its recurrent alternative "ssru" (model/ssru.py).
        architecture: "transformer", or "rnn": the GRU baseline (model/rnn.py), which reads only
            RNN_FIELDS.

    How sources are tokenized (`source_eos`) and the length ratio measured on the training data
    live with the tokenizer (tokenize/facts.py).
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
    attention_dropout: float = 0.0
    ffn_dropout: float = 0.0
    max_len: int = 256
    positional: str = "sinusoidal"
    norm_first: bool = False
    scale_embedding: bool = True
    tie_embeddings: str = "none"
    bias: bool = True
    activation: str = "relu"
    layer_norm_eps: float = 1e-5
    pad_id: int = 0
    scale_attention: bool = True
    rope_base: float = 10000.0
    attention: str = "mha"
    mla: MLAConfig | None = None
    architecture: str = "transformer"
    position_layout: str = "interleaved"
    position_timescales: str = "paper"
    zero_start: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.mla, dict):
            self.mla = MLAConfig.from_dict(self.mla)
        self.validate()

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    def validate(self) -> None:
        need = _need
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
        need(self.attention in ATTENTIONS, f"attention must be {', '.join(ATTENTIONS)}, not {self.attention!r}")
        need(self.position_layout in POSITION_LAYOUTS,
             f"position_layout must be {' or '.join(POSITION_LAYOUTS)}, not {self.position_layout!r}")
        need(self.position_timescales in POSITION_TIMESCALES,
             f"position_timescales must be {' or '.join(POSITION_TIMESCALES)}, not {self.position_timescales!r}")
        need(self.attention != "ssru" or self.n_kv_heads is None,
             "n_kv_heads does not apply to attention='ssru' (the SSRU has no heads)")
        for name, rate in (("dropout", self.dropout), ("attention_dropout", self.attention_dropout),
                           ("ffn_dropout", self.ffn_dropout)):
            need(0.0 <= rate < 1.0, f"{name} must be in [0, 1), not {rate}")
        need(self.max_len > 0, "max_len must be positive")
        need(self.positional != "rope" or self.head_dim % 2 == 0, "rope needs an even head dimension")
        need(self.architecture in ARCHITECTURES,
             f"architecture must be {' or '.join(ARCHITECTURES)}, not {self.architecture!r}")
        self._validate_fields_read()
        self._validate_mla()

    def _validate_fields_read(self) -> None:
        """An architecture that reads only some fields (ARCHITECTURES) leaves the others at their defaults."""
        reads = ARCHITECTURES[self.architecture]
        if reads is None:
            return
        defaults = ModelConfig()
        for name in (f.name for f in dataclasses.fields(self)):
            _need(name in reads or getattr(self, name) == getattr(defaults, name),
                  f"{name} does not apply to architecture={self.architecture!r} (it reads "
                  f"{', '.join(n for n in reads if n != 'architecture')})")

    def _validate_mla(self) -> None:
        """MLA's sizes are given exactly when attention='mla', and fit the positions and heads."""
        if self.attention != "mla":
            _need(self.mla is None, f"mla sizes given but attention={self.attention!r} (set attention='mla')")
            return
        _need(self.mla is not None, "attention='mla' needs its sizes (mla: kv_lora_rank, qk_nope_head_dim, "
                                    "v_head_dim, ...)")
        rope = self.mla.qk_rope_head_dim
        _need(self.positional != "rope" or rope > 0,
              "attention='mla' with positional='rope' needs qk_rope_head_dim > 0 (the decoupled RoPE key)")
        _need(self.positional == "rope" or rope == 0,
              f"qk_rope_head_dim={rope} is MLA's decoupled RoPE key: it needs positional='rope' (or set it to 0)")
        _need(self.n_kv_heads is None or self.n_kv_heads == self.n_heads,
              "n_kv_heads does not apply to attention='mla' (all heads' keys and values come from one latent)")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        """A config from its JSON object as `to_dict` writes it."""
        fields = _checked_fields(cls, data)
        if fields.get("mla") is not None:
            fields["mla"] = MLAConfig.from_dict(fields["mla"])
        return cls(**fields)

    def save(self, path: str | Path) -> None:
        """config.json: the format version first, then the fields."""
        data = {"format_version": FORMAT_VERSION, **self.to_dict()}
        atomic_write_text(Path(path), json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        """The config of a config.json of this format (`check_format_version`), or a one-line ConfigError."""
        try:
            data = read_json_object(path)  # bounded in size and nesting depth (store/safeio.py)
        except UserError as error:
            raise ConfigError(f"not a readable JSON config ({error})") from None
        return cls.from_dict(check_format_version(data, path))


# The format of a run folder, written in its config.json as "format_version" by every save and checked by
# every load (the step checkpoints' config.json included). Format 1 came with the first release; the
# folders written before it (no format_version) are refused in one line naming their format, 0, rather
# than converted: no release ever wrote them (docs/reliability.md, "Formats").
FORMAT_VERSION = 1


def check_format_version(data: dict, path: str | Path) -> dict:
    """A config.json object's fields without "format_version", or a ConfigError naming the format found."""
    version = data.get("format_version")
    if version is None:
        raise ConfigError(f"{path}: a run of format 0 (written before clearformer 0.1.0, without format_version); "
                          f"this release reads format {FORMAT_VERSION}: train it again (--overwrite)")
    if version != FORMAT_VERSION:
        raise ConfigError(f"{path}: format_version {json.dumps(version, default=str)[:20]}, but this clearformer "
                          f"reads format {FORMAT_VERSION} (written by another release?)")
    return {name: value for name, value in data.items() if name != "format_version"}


def _checked_fields(cls, data: dict, prefix: str = "") -> dict:
    """`data`'s fields for dataclass `cls`: a ConfigError naming the first unknown or mistyped one."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown config field(s): {', '.join(prefix + name for name in unknown)}")
    for known_field in dataclasses.fields(cls):
        name, annotation = known_field.name, str(known_field.type)
        if name in data and not fits(data[name], annotation):  # options.py's one reading of an annotation
            shown = json.dumps(data[name], default=str)[:40]
            raise ConfigError(f"config field {prefix}{name} must be {annotation}, not {shown}")
    return dict(data)


VARIANTS = ("mha", "gqa", "mqa", "mla")  # (and "ssru", which `attention_variant` names but no preset builds)


def attention_variant(config: ModelConfig) -> str:
    """Which member of the attention family a config builds: mha, gqa, mqa, mla, or the SSRU."""
    if config.attention in ("mla", "ssru"):
        return config.attention
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
        return dict(attention="mla", n_kv_heads=None, mla=MLAConfig(kv_lora_rank=4 * head, qk_nope_head_dim=head,
                                                                    v_head_dim=head, qk_rope_head_dim=rope))
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
