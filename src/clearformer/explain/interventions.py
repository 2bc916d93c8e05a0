"""What-if experiments: names for the changes `trace.Intervention` makes to a forward pass, checked
against a model, and the `--ablate` option of `translate`, `explain` and `lm generate`.

The grammar of a name (docs/whatif.md), where STACK is `encoder` or `decoder` (a language model has
only a decoder), L a layer, H a head and N an Add & Norm of the layer (1, 2 or 3):

    STACK.positions                                   drop the positional encoding added to the stack's input
    STACK.layers.L.self_attention.head.H              switch head H off: its attention weights become 0, so its
    decoder.layers.L.cross_attention.head.H             output is 0 before the concatenation (the same as zeroing
                                                      its columns of W^O)
    STACK.layers.L.(self|cross)_attention.head.H.uniform   replace head H's attention weights by uniform ones
                                                      over the keys it may attend to (the mask still holds)
    STACK.layers.L.add_norm_N.residual                drop the residual connection: Norm(Sublayer(x))
                                                      instead of Norm(x + Sublayer(x)) (pre-norm: no "x +")

The model's weights are never changed: each intervention is a hook (`trace.Hooks`) that replaces the tensor
recorded under a name while it flows: `<attention>.weights`, `<positions>.PE`, `<add_norm>.skip`.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from torch import nn

from clearformer.errors import UserError
from clearformer.limits import shorten
from clearformer.model.attention import MultiHeadAttention
from clearformer.model.embedding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from clearformer.model.latent import MultiHeadLatentAttention
from clearformer.model.layers import AddNorm
from clearformer.record.points import hook_points, summarize
from clearformer.record.trace import Hook, Hooks, Intervention, Interventions

# the embedding module of a stack's input -> the stack it feeds (a language model's `embed` feeds its decoder)
POSITION_OWNERS = {"src_embed": "encoder", "tgt_embed": "decoder", "embed": "decoder"}
MAX_LISTED = 12  # patterns shown in an error before "..."


def model_hooks(model: nn.Module, hooks: dict[str, Hook | list[Hook]]) -> Hooks:
    """`with model_hooks(model, {name: hook}):` - `trace.Hooks` whose names are checked against the model's
    points (record/points.py `hook_points`: listed, nothing run) at once: an unknown name is a
    `trace.UnknownHookPoint` listing the nearest (as TransformerLens)."""
    return Hooks(hooks, points=hook_points(model))


def valid_interventions(model: nn.Module) -> dict[str, Intervention]:
    """Every intervention `model` allows, by name, in the model's order."""
    found: dict[str, Intervention] = {}
    for module in model.modules():
        where = module.trace_name  # every module of a built model is named (trace.name_modules)
        if isinstance(module, (MultiHeadAttention, MultiHeadLatentAttention)):
            absorbed = isinstance(module, MultiHeadLatentAttention) and module.absorb  # weights in latent space
            recorded = module.absorbed.trace_name if absorbed else where
            for head in range(module.n_heads):
                name = f"{where}.head.{head}"
                found[name] = Intervention(name, recorded, "weights", "zero_head", head)
                found[f"{name}.uniform"] = Intervention(f"{name}.uniform", recorded, "weights", "uniform_head", head)
        elif isinstance(module, AddNorm):
            found[f"{where}.residual"] = Intervention(f"{where}.residual", where, "skip", "zero")
        elif isinstance(module, (SinusoidalPositionalEncoding, LearnedPositionalEmbedding)):
            owner = POSITION_OWNERS.get(where.split(".")[0], where.split(".")[0])
            found[f"{owner}.positions"] = Intervention(f"{owner}.positions", where, "PE", "zero")
    return found


def parse_interventions(model: nn.Module, names: Iterable[str]) -> list[Intervention]:
    """The interventions named (each once, in the order given); an unknown name is a UserError that says
    which names the model has."""
    valid = valid_interventions(model)
    chosen: list[Intervention] = []
    for raw in names:
        name = raw.strip()
        if name not in valid:
            close = difflib.get_close_matches(name, list(valid), n=3)
            shown = " or ".join([", ".join(close[:-1]), close[-1]] if len(close) > 1 else close)
            hint = f" (did you mean {shown}?)" if close else ""
            patterns = summarize(valid)
            listed = ", ".join(patterns[:MAX_LISTED]) + (", ..." if len(patterns) > MAX_LISTED else "")
            raise UserError(f"--ablate {shorten(repr(name))} is not a part of this model{hint}; "
                            f"valid: {listed or 'none'}")
        if valid[name] not in chosen:
            chosen.append(valid[name])
    return chosen


def add_ablate_argument(parser) -> None:
    """--ablate NAME (repeatable), for translate, explain and lm generate."""
    parser.add_argument("--ablate", action="append", default=[], metavar="NAME",
                        help="what-if: change the model while it runs (repeatable): "
                             "decoder.layers.0.cross_attention.head.2 switches that head off, ...head.2.uniform "
                             "gives it uniform attention weights, encoder.positions drops the positional "
                             "encoding, encoder.layers.1.add_norm_1.residual drops that residual connection "
                             "(docs/whatif.md); the weights on disk are never changed")


def interventions_from_args(model: nn.Module, args) -> Interventions:
    """The context (`with ...:`) that applies `args.ablate` to `model`'s forward passes (none: a no-op)."""
    return Interventions(parse_interventions(model, getattr(args, "ablate", None) or []))
