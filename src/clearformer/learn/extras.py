"""What two lessons show on the learner's sentence beyond the greedy walkthrough (`Lesson.extra["show"]`):

    beam   lesson 12: `clearformer explain SENTENCE --beam 2`'s own table (explain/search.py), on the toy model
    lm     lesson 13: a decoder-only model (model/lm.py) on the sentence: its scaled scores before the causal mask
    mla    lesson 14: the latent c_KV that Multi-Head Latent Attention caches, per token of the sentence
    browser lesson 16: Firefox's en-pt student on the sentence, measured (learn/browser.py; not the toy run)

Both read the same toy run the lesson's walkthrough comes from (learn/toy.py's ensure_toy_model).
"""

from __future__ import annotations

import torch

from clearformer.learn.browser import browser_table
from clearformer.learn.onsentence import beam_walk, lm_scores
from clearformer.learn.toy import ensure_toy_model


def beam_table(sentence: str, checkpoint=None) -> str:
    """The beam search of `sentence` (beam 2, translate's own alpha and brevity penalty), as `explain --beam`."""
    from clearformer.explain.search import render_beam

    return render_beam(beam_walk(sentence, ensure_toy_model(checkpoint)).beam, 4, color=False)


def lm_table(sentence: str, checkpoint=None) -> str:
    """Lesson 13's table: `lm_scores` with its row and column numbers."""
    words, scaled = lm_scores(sentence, ensure_toy_model(checkpoint))
    width = max(9, *(len(w) + 2 for w in words))
    lines = ["A decoder-only model reads your sentence (model/lm.py, one layer, random weights:",
             "the mechanism, not learned language). Layer 0, head 0:",
             "scaled scores Q·Kᵀ/√d_k, BEFORE the causal mask (row = query, column = key):", "",
             " " * (width + 4) + "".join(f"{f'{j} {w}':>{width}s}" for j, w in enumerate(words))]
    for i, (word, row) in enumerate(zip(words, scaled, strict=True)):
        lines.append(f"{i:2d} {word:>{width}s} " + "".join(f"{v:{width}.4f}" for v in row))
    return "\n".join(lines) + "\n"


def mla_latent(sentence: str, checkpoint=None) -> str:
    """Your sentence's tokens through one decoder layer with MLA (random weights, the toy model's width):
    the latent c_KV each token leaves in the cache, against the keys and values MHA would keep."""
    from clearformer.config import preset, variant_overrides
    from clearformer.load import load_model
    from clearformer.model.cache import kv_cache_bytes_per_token
    from clearformer.model.lm import LanguageModel
    from clearformer.record import trace
    from clearformer.tokenize import encode_source

    toy, tokenizer, _ = load_model(ensure_toy_model(checkpoint))
    width, heads = toy.config.d_model, toy.config.n_heads
    ids = [tokenizer.bos_id] + encode_source(tokenizer, sentence)
    words = [tokenizer.id_to_token(i) for i in ids]
    config = preset("lm-tiny", tgt_vocab_size=len(tokenizer), d_model=width, n_heads=heads, n_decoder_layers=1,
                    **variant_overrides("mla", width, heads))
    generator = torch.random.fork_rng()
    with generator:
        torch.manual_seed(0)
        model = LanguageModel(config).eval()
    with torch.no_grad(), trace.Recorder() as recorder:
        model(torch.tensor([ids]))
    latent = recorder.get("decoder.layers.0.self_attention.latent")[0]
    k_rope = recorder.get("decoder.layers.0.self_attention.K_rope")[0]
    mla, mha = (kv_cache_bytes_per_token(preset("lm-tiny", tgt_vocab_size=len(tokenizer), d_model=width,
                                                n_heads=heads, n_decoder_layers=1, **variant_overrides(v, width,
                                                                                                     heads)))
                for v in ("mla", "mha"))
    lines = [f"MLA on your sentence (one decoder layer, random weights, d_model {width}, {heads} heads): each token "
             f"leaves c_KV ({latent.shape[-1]} numbers) and a shared RoPE key ({k_rope.shape[-1]}) in the cache; "
             f"MHA would leave K and V, 2 x {heads} heads x {width // heads} = {2 * width} numbers.",
             f"cache per token and layer: MLA {mla['bytes_total']} bytes, MHA {mha['bytes_total']} bytes "
             f"({mla['bytes_total'] / mha['bytes_total']:.1%})", "",
             f"{'token':>10s}  c_KV (first 8 of {latent.shape[-1]})"]
    for word, row in zip(words, latent.tolist(), strict=True):
        lines.append(f"{word:>10s}  " + " ".join(f"{value:7.4f}" for value in row[:8]))
    lines.append("Every head's keys and values are rebuilt from these rows (W^UK, W^UV); the cache keeps only them.")
    return "\n".join(lines) + "\n"


SHOW = {"beam": beam_table, "lm": lm_table, "mla": mla_latent, "browser": browser_table}


def extra_text(kind: str | None, sentence: str, checkpoint=None) -> str:
    return SHOW[kind](sentence, checkpoint) if kind else ""
