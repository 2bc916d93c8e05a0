"""The architecture of Marian's `.bin` students (Firefox Translations' SSRU family), in ONE table.

Each row ties a key of the model's own YAML (`special:model.yml`) to the ModelConfig field it is and,
through `layer_entries`, the fields to Marian's tensor names. The table drives all four uses:

    config_from_yaml    import: check every key (a model of another family is refused, naming the key)
                        and build the ModelConfig
    model_yaml          export: the YAML written into an exported `.bin`
    uncarried_field     export: the first config field the engine cannot carry, named
    layer_entries       import and export: our tensor name <-> Marian's, with its shape

What the rows say: a shared embedding `Wemb` for source, target and output (tie_embeddings="all") times
sqrt(d_model), Marian's sinusoid (position_layout="halves", position_timescales="tensor2tensor"), no layer
norm on the embeddings; post-norm encoder layers (epsilon 1e-6), biases everywhere, ReLU feed-forward,
no final norm; decoder layers whose autoregressive sublayer is the SSRU (autoregressive_layer="ssru",
model/ssru.py), then cross-attention, then the feed-forward network, each followed by residual + layer
norm; the decoder starts from a zero vector (zero_start); the output is h Wemb^T + b. Every piece is a
config choice of clearformer's own model: nothing here computes a layer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from clearformer.config import ModelConfig
from clearformer.errors import UserError
from clearformer.limits import check_model_size

SIZE = object()  # a row whose YAML value is the config field's whole number (dim-emb <-> d_model, ...)
LAYER_NORM_EPS = 1e-6  # Marian's layer norm
MAX_LEN = 512  # the positions an imported run's sinusoid is built for
WHOLE_NUMBER = re.compile(r"[0-9]{1,9}")  # a YAML size: at most 999,999,999 (check_model_size bounds the model)


@dataclass(frozen=True)
class Row:
    """One fact of the architecture: the YAML key and the value it has in this family (SIZE: the field's
    number; None: no key, Marian's transformer has no other way), the ModelConfig field and its value
    (None: no field, clearformer's model has no other way), and what the engine does (an export's refusal)."""

    key: str | None
    yaml: object
    field: str | None = None
    value: object = None
    engine: str = ""


ARCHITECTURE = (
    Row("type", "transformer", "architecture", "transformer", "the engine runs the Transformer"),
    Row("dec-cell", "ssru", "autoregressive_layer", "ssru", "the engine's decoder layers read their earlier outputs "
                                                            "by the SSRU"),
    Row("dec-depth", SIZE, "n_decoder_layers"),
    Row("enc-depth", SIZE, "n_encoder_layers"),
    Row("dim-emb", SIZE, "d_model"),
    Row("dim-vocabs", SIZE),  # [vocab, vocab]: one shared vocabulary; the run has one id more (<pad>)
    Row("transformer-decoder-autoreg", "rnn"),
    Row("transformer-dim-ffn", SIZE, "d_ff"),
    Row("transformer-ffn-activation", "relu", "activation", "relu", "the engine's feed-forward network is ReLU's"),
    Row("transformer-ffn-depth", "2"),
    Row("transformer-heads", SIZE, "n_heads"),
    Row("transformer-postprocess", "dan", "norm_first", False, "the engine is post-norm"),
    Row("transformer-postprocess-emb", "d"),  # dropout only: no layer norm on the embeddings
    Row("transformer-postprocess-top", ""),  # no final layer norm
    Row("transformer-preprocess", ""),
    Row("transformer-tied-layers", []),
    Row("transformer-train-position-embeddings", "false", "positional", "sinusoidal", "the engine adds a sinusoid"),
    Row("tied-embeddings-all", "true", "tie_embeddings", "all", "the engine has one Wemb"),
    Row("output-omit-bias", "false", "bias", True, "the engine's projections all have biases"),
    Row("right-left", "false"),
    Row(None, None, "position_layout", "halves", "the engine's sinusoid puts every sine first (halves)"),
    Row(None, None, "position_timescales", "tensor2tensor", "the engine's sinusoid turns at tensor2tensor's rates"),
    Row(None, None, "scale_embedding", True, "the engine scales the embeddings by sqrt(d_model)"),
    Row(None, None, "zero_start", True, "the engine starts decoding from a zero vector"),
    Row(None, None, "layer_norm_eps", LAYER_NORM_EPS, f"the engine's layer norm adds {LAYER_NORM_EPS}"),
)


def _size(config: dict, key: str, where: str) -> int:
    """A size field of the YAML as a positive whole number, or one line naming it."""
    value = config.get(key)
    if not isinstance(value, str) or not WHOLE_NUMBER.fullmatch(value) or int(value) == 0:
        raise UserError(f"{where}: special:model.yml field {key!r} = {value!r} is not a whole number from 1 to "
                        f"999,999,999")
    return int(value)


def _vocabulary(config: dict, where: str) -> int:
    """dim-vocabs: two equal sizes (one shared vocabulary), or one line."""
    vocabs = config.get("dim-vocabs")
    if not isinstance(vocabs, list) or len(vocabs) != 2 or vocabs[0] != vocabs[1]:
        raise UserError(f"{where}: special:model.yml dim-vocabs = {vocabs!r}: one shared vocabulary expected "
                        f"(two equal sizes)")
    return _size({"dim-vocabs": vocabs[0]}, "dim-vocabs", where)


def config_from_yaml(config: dict, where: str) -> ModelConfig:
    """Our ModelConfig for a `.bin` of this family (its parsed `special:model.yml`), or a one-line error naming
    the first key that differs (another architecture) or that is not a number where one is needed."""
    for row in ARCHITECTURE:
        if row.key is not None and row.yaml is not SIZE and config.get(row.key) != row.yaml:
            raise UserError(f"{where}: special:model.yml field {row.key!r} = {config.get(row.key)!r}; clearformer "
                            f"reads {row.yaml!r} (Firefox's SSRU students)")
    fields = {row.field: _size(config, row.key, where) for row in ARCHITECTURE if row.yaml is SIZE and row.field}
    fields.update({row.field: row.value for row in ARCHITECTURE if row.yaml is not SIZE and row.field})
    vocab = _vocabulary(config, where) + 1  # + the <pad> control piece (interop/marian_bin_vocab.py)
    if fields["d_model"] % fields["n_heads"] or fields["d_model"] % 2:
        raise UserError(f"{where}: dim-emb {fields['d_model']} must be even and divisible by transformer-heads "
                        f"{fields['n_heads']}")
    model = ModelConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, dropout=0.0, max_len=MAX_LEN, pad_id=vocab - 1,
                        **fields)
    check_model_size(model, f"{where}: special:model.yml")
    return model


def _yaml_value(value) -> str:
    if value == "":
        return ' ""'
    if isinstance(value, list):
        return " []" if not value else "".join(f"\n  - {item}" for item in value)
    return f" {value}"


def model_yaml(config: ModelConfig) -> str:
    """The `special:model.yml` of an exported `.bin` (after `check_exportable`)."""
    lines = []
    for row in ARCHITECTURE:
        if row.key == "dim-vocabs":
            value = [config.tgt_vocab_size - 1] * 2  # without the run's <pad>
        elif row.yaml is SIZE:
            value = getattr(config, row.field)
        elif row.key is not None:
            value = row.yaml
        else:
            continue
        lines.append(f"{row.key}:{_yaml_value(value)}")
    return "\n".join(lines) + "\n"


def uncarried_field(config: ModelConfig) -> str | None:
    """The first config field Firefox's engine cannot carry, with why ("zero_start=False: the engine starts
    ..."), or None when it carries them all."""
    for row in ARCHITECTURE:
        if row.field is None or row.yaml is SIZE:
            continue
        value = getattr(config, row.field)
        differs = abs(value - row.value) > 1e-12 if isinstance(row.value, float) else value != row.value
        if differs:
            return f"{row.field}={value!r}: {row.engine}"
    if config.src_vocab_size != config.tgt_vocab_size:
        return "src_vocab_size != tgt_vocab_size: the engine has one vocabulary"
    return None


# ----------------------------------------------------------------------------- the tensors

# (our sublayer, Marian's): the four projections of an attention; Marian's names end in W{q,k,v,o} / b{q,k,v,o}.
ATTENTIONS = {"encoder": (("self_attention", "self"),), "decoder": (("cross_attention", "context"),)}
# (our norm, Marian's): the layer norm after each sublayer.
NORMS = {"encoder": (("add_norm_1", "self_Wo_ln"), ("add_norm_2", "ffn_ffn_ln")),
         "decoder": (("add_norm_1", "rnn_ffn_ln"), ("add_norm_2", "context_Wo_ln"), ("add_norm_3", "ffn_ffn_ln"))}


def layer_entries(config: ModelConfig) -> list[tuple[str, str, str, int, int]]:
    """(our name, Marian's name, kind "W"/"b", d_in, d_out) for every tensor of the layers (a "b" row's d_in
    is 0: a vector of d_out)."""
    d, ff = config.d_model, config.d_ff
    entries = []
    for stack, depth in (("encoder", config.n_encoder_layers), ("decoder", config.n_decoder_layers)):
        for i in range(depth):
            ours, theirs = f"{stack}.layers.{i}", f"{stack}_l{i + 1}"
            if stack == "decoder":  # the SSRU: x W (no bias) and the forget gate x W_f + b_f
                entries += [(f"{ours}.recurrence.w.weight", f"{theirs}_rnn_W", "W", d, d),
                            (f"{ours}.recurrence.w_f.weight", f"{theirs}_rnn_Wf", "W", d, d),
                            (f"{ours}.recurrence.w_f.bias", f"{theirs}_rnn_bf", "b", 0, d)]
            for our_part, their_part in ATTENTIONS[stack]:
                for p in "qkvo":
                    entries += [(f"{ours}.{our_part}.w_{p}.weight", f"{theirs}_{their_part}_W{p}", "W", d, d),
                                (f"{ours}.{our_part}.w_{p}.bias", f"{theirs}_{their_part}_b{p}", "b", 0, d)]
            entries += [(f"{ours}.feed_forward.linear_1.weight", f"{theirs}_ffn_W1", "W", d, ff),
                        (f"{ours}.feed_forward.linear_1.bias", f"{theirs}_ffn_b1", "b", 0, ff),
                        (f"{ours}.feed_forward.linear_2.weight", f"{theirs}_ffn_W2", "W", ff, d),
                        (f"{ours}.feed_forward.linear_2.bias", f"{theirs}_ffn_b2", "b", 0, d)]
            for our_norm, their_norm in NORMS[stack]:
                entries += [(f"{ours}.{our_norm}.norm.weight", f"{theirs}_{their_norm}_scale", "b", 0, d),
                            (f"{ours}.{our_norm}.norm.bias", f"{theirs}_{their_norm}_bias", "b", 0, d)]
    return entries
