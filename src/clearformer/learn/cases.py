"""The cases each exercise is checked on: the seeds' examples, then random ones.

Random cases cover several shapes, padding masks and (for attention) a query whose every key is
blocked. The expected values come from clearformer's own modules (`learn/reference.py`). Cases are
built from fixed seeds, so a report names the same case every time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from clearformer.config import preset
from clearformer.explain.examples import I_LOVE_YOU_VOCAB, INDIA_X, OUTPUT_LOGITS, run_example
from clearformer.learn import reference
from clearformer.model.transformer import Transformer


@dataclass
class Case:
    name: str
    args: tuple
    expected: object                     # a tensor, a tuple of tensors, or a list of ids
    outputs: tuple[str, ...] = ()        # names of the parts of a tuple result
    info: dict = field(default_factory=dict)
    order: tuple[int, ...] | None = None  # which part to compare first (attention: the weights, then the output)


def _rand(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def seed_qkv(example: str) -> tuple[torch.Tensor, ...]:
    """Q, K, V (batch 1, head 1, tokens, d_k) of a seed example, as clearformer's modules compute them."""
    recorder = run_example(example)[1]
    return tuple(recorder.get(f"self_attention.{name}") for name in "QKV")


# ----------------------------------------------------------------------------- positional encoding


def positional_encoding_cases() -> list[Case]:
    sizes = [("seed 003: 5 positions x d_model 6", 5, 6), ("seed 002: 3 x 4", 3, 4), ("1 x 2", 1, 2),
             ("10 x 8", 10, 8), ("50 x 16", 50, 16), ("3 x 128", 3, 128)]
    return [Case(name, (n, d), reference.positional_encoding(n, d)) for name, n, d in sizes]


# ----------------------------------------------------------------------------- attention


def _attention_case(name: str, q, k, v, mask=None) -> Case:
    return Case(name, (q, k, v, mask), reference.attention(q, k, v, mask), ("output", "weights"),
                info={"mask": mask, "q": q, "k": k}, order=(1, 0))


def attention_cases() -> list[Case]:
    cases = [_attention_case("seed 002: 'I love you'", *seed_qkv("i-love-you")),
             _attention_case("seed 001: 'India is great'", *seed_qkv("india-is-great"))]
    cases.append(_attention_case("random (2, 3, 5, 8), no mask", _rand(1, 2, 3, 5, 8), _rand(2, 2, 3, 5, 8),
                                 _rand(3, 2, 3, 5, 8)))
    cases.append(_attention_case("random (1, 2, 4, 16), d_v 8, causal mask (4, 4)", _rand(4, 1, 2, 4, 16),
                                 _rand(5, 1, 2, 4, 16), _rand(6, 1, 2, 4, 8), reference.causal(4)))
    lengths = torch.tensor([6, 4])
    padding = (torch.arange(6)[None, :] < lengths[:, None])[:, None, None, :]   # (batch, 1, 1, k_len)
    cases.append(_attention_case("random (2, 2, 6, 4), padding mask (second sentence: 4 real keys)",
                                 _rand(7, 2, 2, 6, 4), _rand(8, 2, 2, 6, 4), _rand(9, 2, 2, 6, 4), padding))
    cases.append(_attention_case("cross-attention: 3 queries, 7 keys, padding mask", _rand(10, 2, 4, 3, 8),
                                 _rand(11, 2, 4, 7, 8), _rand(12, 2, 4, 7, 8),
                                 (torch.arange(7)[None, :] < torch.tensor([[7], [5]]))[:, None, None, :]))
    full = torch.ones(1, 1, 3, 4, dtype=torch.bool)
    full[0, 0, 1] = False                  # query 1 may attend to nothing
    edge = _attention_case("a fully masked row (query 1 has no key to attend to)", _rand(13, 1, 1, 3, 4),
                           _rand(14, 1, 1, 4, 4), _rand(15, 1, 1, 4, 4), full)
    # The Transformer's masks never block every key of a query (a padded source keeps its real tokens
    # and <eos>, the causal mask keeps the diagonal): this row is compared as a note (learn/check.py).
    edge.info["rows_with_a_key"] = full.any(dim=-1)
    cases.append(edge)
    return cases


# ----------------------------------------------------------------------------- causal mask


def causal_mask_cases() -> list[Case]:
    sizes = [("seed 002: <START> Je t' aime (4)", 4), ("seed 004: 6 tokens", 6), ("size 1", 1), ("size 2", 2),
             ("size 10", 10)]
    return [Case(name, (size,), reference.causal(size)) for name, size in sizes]


# ----------------------------------------------------------------------------- layer norm


def layer_norm_cases() -> list[Case]:
    x = torch.tensor([INDIA_X], dtype=torch.float64)
    cases = [("seed 001: X of 'India is great', gamma 1, beta 0", x, torch.ones(4, dtype=torch.float64),
              torch.zeros(4, dtype=torch.float64), 1e-5),
             ("random (2, 5, 8), random gamma and beta", _rand(20, 2, 5, 8), _rand(21, 8), _rand(22, 8), 1e-5),
             ("random (1, 1, 16)", _rand(23, 1, 1, 16), _rand(24, 16), _rand(25, 16), 1e-5),
             ("small variance, eps 1e-3", 0.01 * _rand(26, 1, 3, 6), torch.ones(6, dtype=torch.float64),
              torch.zeros(6, dtype=torch.float64), 1e-3),
             # a variance near eps: where an eps other than the one given (1e-6, 1e-12) shows
             ("variance near eps (1e-5)", 0.003 * _rand(29, 2, 3, 8), _rand(24, 8), _rand(25, 8), 1e-5),
             ("a constant row (variance 0)", torch.full((1, 2, 4), 3.0, dtype=torch.float64), _rand(27, 4),
              _rand(28, 4), 1e-5)]
    return [Case(name, (x, g, b, eps), reference.layer_norm(x, g, b, eps), info={"eps": eps})
            for name, x, g, b, eps in cases]


# ----------------------------------------------------------------------------- heads


def heads_cases() -> list[Case]:
    shapes = [("seed 001: (1, 3, 4), 2 heads", torch.tensor([INDIA_X], dtype=torch.float64), 2),
              ("(1, 3, 4), 1 head", _rand(30, 1, 3, 4), 1), ("(2, 5, 8), 4 heads", _rand(31, 2, 5, 8), 4),
              ("(3, 7, 12), 3 heads", _rand(32, 3, 7, 12), 3)]
    cases = []
    for name, x, heads in shapes:
        split = reference.split_heads(x, heads)
        # merge_heads is given what it meets in a model: an attention output (weights @ v), laid out
        # (batch, heads, seq, d_head) in memory, not split's own transposed view of x.
        attended = reference.attention(split, split, split)[0].contiguous()
        cases.append(Case(name, (x, heads), (split, reference.merge_heads(attended)),
                          ("split_heads(x, n_heads)", "merge_heads(attention output)"),
                          info={"split": split, "heads": attended}))
    return cases


# ----------------------------------------------------------------------------- greedy decoding


def _tiny_model(seed: int, eos_bias: float) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(preset("toy-translate", src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2,
                               d_ff=32, max_len=32)).double().eval()
    with torch.no_grad():
        model.output.linear.bias[3] += eos_bias       # id 3 is <eos>
    return model


class PrefixError(ValueError):
    """A greedy loop asked for the scores after a prefix that is not <bos> followed by token ids."""


def _next_token_logits(model: Transformer, src: torch.Tensor, bos_id: int = 2):
    def next_token_logits(prefix: list[int]) -> torch.Tensor:
        """The model's scores for the token after `prefix` (<bos> first): (vocab,)."""
        if isinstance(prefix, torch.Tensor):
            prefix = prefix.tolist()
        if not isinstance(prefix, (list, tuple)):
            raise PrefixError(f"next_token_logits takes a list of token ids, got {type(prefix).__name__}")
        odd = next((t for t in prefix if not isinstance(t, int)), None)
        if odd is not None or any(isinstance(t, bool) for t in prefix):
            raise PrefixError(f"next_token_logits takes a list of int token ids; the prefix holds a "
                              f"{type(odd).__name__}")
        if not prefix or prefix[0] != bos_id:
            raise PrefixError(f"next_token_logits({list(prefix)[:8]}): the prefix must start with bos_id = {bos_id}")
        if not all(0 <= t < model.config.tgt_vocab_size for t in prefix):
            raise PrefixError(f"next_token_logits: ids must be in 0..{model.config.tgt_vocab_size - 1}")
        with torch.no_grad():
            return model(src, torch.tensor([list(prefix)]))[0, -1].clone()
    return next_token_logits


def greedy_cases() -> list[Case]:
    src = torch.tensor([[5, 6, 7, 3]])
    cases = []
    model = _tiny_model(0, 50.0)
    cases.append(("<eos> comes first", model, 6))
    for bias in (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0):   # the first bias whose translation ends in <eos> midway
        model = _tiny_model(1, bias)
        ids = reference.greedy(model, src, 8)
        if 3 in ids[2:]:
            cases.append((f"a random model that stops at <eos> after {len(ids)} tokens", model, 8))
            break
    cases.append(("a random model that never says <eos>: runs to the limit of 5", _tiny_model(2, -50.0), 5))
    cases.append(("the same, limit 1", _tiny_model(2, -50.0), 1))
    return [Case(name, (_next_token_logits(model, src), 2, 3, limit), reference.greedy(model, src, limit),
                 info={"limit": limit}) for name, model, limit in cases]


# ----------------------------------------------------------------------------- label smoothing


def smoothing_cases() -> list[Case]:
    logits = torch.tensor([[OUTPUT_LOGITS]], dtype=torch.float64)
    label = torch.tensor([[I_LOVE_YOU_VOCAB.index("Je")]])
    labels = torch.tensor([[4, 7, 1, 0, 0], [5, 5, 9, 2, 0]])    # 0 = <pad>
    cases = [("seed 002: first position, label 'Je', eps 0.1", logits, label, 0, 0.1),
             ("random (2, 5, 12), padded labels, eps 0.1", _rand(40, 2, 5, 12), labels, 0, 0.1),
             ("the same, eps 0 (plain cross-entropy)", _rand(40, 2, 5, 12), labels, 0, 0.0),
             ("random (1, 3, 50), eps 0.2, pad id 1", _rand(41, 1, 3, 50), torch.tensor([[7, 1, 1]]), 1, 0.2)]
    return [Case(name, (lg, lb, pad, eps), reference.smoothed_loss(lg, lb, pad, eps),
                 info={"pad_id": pad, "smoothing": eps}) for name, lg, lb, pad, eps in cases]


# ----------------------------------------------------------------------------- beam step


def beam_cases() -> list[Case]:
    seed = torch.log_softmax(torch.tensor([OUTPUT_LOGITS], dtype=torch.float64), dim=-1)
    specs = [("seed 002: the first step (one beam: <START>), beam size 4", seed, torch.zeros(1, dtype=torch.float64),
              4)]
    for seed_number, (beams, vocab, size) in enumerate([(2, 10, 2), (4, 10, 4), (3, 50, 3)]):
        log_probs = torch.log_softmax(_rand(50 + seed_number, beams, vocab), dim=-1)
        scores = -torch.rand(beams, generator=torch.Generator().manual_seed(60 + seed_number),
                             dtype=torch.float64) * 3
        specs.append((f"{beams} beams, vocabulary {vocab}, beam size {size}", log_probs, scores, size))
    return [Case(name, (lp, sc, size), reference.beam_step(lp, sc, size), ("scores", "beams", "tokens"),
                 info={"log_probs": lp, "beam_scores": sc}) for name, lp, sc, size in specs]
