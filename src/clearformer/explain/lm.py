"""`clearformer lm explain`: what a language model computes while it continues a text, read from the recorder.

The text is continued by `lm generate`'s own function (`generate.sampling.generate`, greedy) under a
recorder: one pass over the prompt fills the key/value cache (for "The dog ran", as the seed's 6x6
"life is short eat dessert first" example shows: the causal mask, each head's scores and
attention weights, the distribution over the next token), then each generation step feeds only
the newest token. For MLA layers the records add the latent c_KV, the decoupled RoPE key and the
up-projected keys and values (naive path) or the absorbed queries (absorbed path). The result is a
`Walkthrough`, printed by the same renderer as `clearformer explain`, drawn by the same page and plots
(`lm explain --html/--plots`) and sent by the same server (`clearformer serve` on a language model).
"""

from __future__ import annotations

import torch

from clearformer.data.lm import prompt_ids
from clearformer.errors import UserError
from clearformer.explain.walkthrough import Matrix, Step, Walkthrough, build_walkthrough
from clearformer.generate.sampling import SamplingOptions, generate
from clearformer.model.cache import kv_cache_bytes_per_token
from clearformer.record.trace import Record, Recorder

# What the terminal shows by default (--full shows every step).
FOCUS = ("token_ids", "mask", "scaled", "weights", "probabilities", "chosen", "kv_cache.per_token")
MLA_FOCUS = ("latent", "K_rope", "K_nope", "self_attention.V", "Q_absorbed")
MODEL_CALL_STARTS = "embed.token_ids"  # the first record of every pass through the model
LEARNED_POSITIONS = ("Learned position embedding", "P[pos]  (a trained row per position, as GPT-2's wpe)",
                     "A vector per position, learned in training like the token embeddings, added to them.")


def token_labels(tokenizer, ids: list[int]) -> list[str]:
    """A short printable label per id (the subword piece, with ▁ shown as _, or the word)."""
    labels = []
    for index in ids:
        label = tokenizer.id_to_token(index)
        labels.append(label.replace("\u2581", "_") if label else f"#{index}")
    return labels


def by_generation_step(records: list[Record], new: list[int]) -> list[Record]:
    """Tag the records of the t-th pass through the model (the prompt's for t = 0, then one pass per fed
    token) with step t, each followed by the token that pass chose, recorded as `generate.chosen`.

    A `generate` that tags its passes and records its choices itself (as `greedy_decode` does) is
    taken as it is."""
    if any(record.name == "generate.chosen" for record in records):
        return records
    tagged: list[Record] = []
    step = -1
    for record in records:
        if record.name == MODEL_CALL_STARTS:
            if step >= 0:
                tagged.append(Record("generate.chosen", torch.tensor([new[step]]), step))
            step += 1
        record.step = step
        tagged.append(record)
    if step >= 0:
        tagged.append(Record("generate.chosen", torch.tensor([new[step]]), step))
    return tagged


def kv_cache_step(config) -> Step:
    """What the decoder's key/value cache keeps per token, by formula (`model.cache`)."""
    cache = kv_cache_bytes_per_token(config)
    summary = (f"KV cache per token: {cache['bytes_total']:,} bytes over {cache['layers']} layers "
               f"({cache['elements_per_layer']} numbers per layer; {100 * cache['fraction_of_mha']:.0f}% of MHA's)")
    formula = ("MLA: kv_lora_rank + qk_rope_head_dim numbers per layer" if config.attention == "mla"
               else "2 · kv_heads · d_head numbers per layer (a key and a value per head)")
    values = [[float(cache["elements_per_layer"]), float(cache["bytes_per_layer"]), float(cache["bytes_total"]),
               float(cache["fraction_of_mha"])]]
    matrix = Matrix(values, [cache["variant"]], ["numbers/layer", "bytes/layer", "bytes", "of MHA"])
    return Step(id="kv_cache.per_token", name="kv_cache.per_token", title="KV cache per token", formula=formula,
                explanation=summary, stage="cache", matrices=[matrix])


def explain_lm(model, tokenizer, ids: list[int], max_new_tokens: int = 3, top: int = 10) -> Walkthrough:
    """Greedy continuation of the prompt `ids` by `max_new_tokens` tokens under a recorder -> the walkthrough."""
    with Recorder() as recorder:
        new = generate(model, ids, max_new_tokens, SamplingOptions(greedy=True))
    labels = token_labels(tokenizer, ids + new)
    prompt = len(ids)
    # Pass t feeds the prompt (t = 0) or the t-th new token; the keys run over everything fed so far.
    target_by_step = {t: labels[: prompt + t] for t in range(len(new))}
    vocab = token_labels(tokenizer, list(range(len(tokenizer))))
    title = (f"Language model continuing {tokenizer.decode(ids)!r} "
             "(the prompt starts after <eos>, as lines did in training)")
    walk = build_walkthrough(by_generation_step(recorder.records, new), title, labels[:prompt], labels[:prompt],
                             vocab, target_by_step, top)
    walk.target_tokens = labels
    walk.result = tokenizer.decode(ids + new)
    walk.model_kind = "lm"
    if model.config.positional == "learned":  # the catalog describes the paper's sinusoidal table
        for step in walk.find("positions.PE"):
            step.title, step.formula, step.explanation = LEARNED_POSITIONS
    walk.steps.append(kv_cache_step(model.config))
    return walk


def explain_text(model, tokenizer, text: str, max_new_tokens: int = 3, top: int = 10) -> Walkthrough:
    """`lm explain TEXT` (the terminal, the page and the server): the text read as `lm generate` reads a
    prompt, checked (a one-line UserError for what no model can continue), then `explain_lm`."""
    if max_new_tokens <= 0:
        raise UserError(f"--max-new-tokens must be positive, not {max_new_tokens}")
    if top <= 0:
        raise UserError(f"--top must be positive, not {top}")
    ids = prompt_ids(tokenizer, text)
    if len(ids) >= model.config.max_len:
        raise UserError(f"the text is {len(ids)} tokens; the model's context is {model.config.max_len} "
                        "(text plus generated tokens must fit)")
    return explain_lm(model, tokenizer, ids, max_new_tokens, top)


def focus(walk: Walkthrough, attention: str) -> Walkthrough:
    """The steps `lm explain` prints unless asked for all of them."""
    return walk.only(FOCUS + (MLA_FOCUS if attention == "mla" else ()))
