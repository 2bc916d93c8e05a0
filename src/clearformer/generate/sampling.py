"""Sampling the next token from a language model: temperature, top-k, top-p (nucleus), and a seed.

    p = softmax(logits / temperature)      lower temperature -> sharper, higher -> flatter
    top-k: keep the k most probable tokens
    top-p: keep the smallest set of most probable tokens whose probabilities sum to >= p
    next ~ p restricted to what is kept (renormalised)

`generate` runs the prompt through the model once (filling its cache), then one token per step
through the same model with its cache (`model/cache.py`); under a `trace.Recorder` every
intermediate of those passes is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from clearformer.errors import UserError
from clearformer.limits import MAX_SEED, MAX_TEMPERATURE, MIN_TEMPERATURE
from clearformer.options import Options, option
from clearformer.record import trace


@dataclass
class SamplingOptions(Options):
    """How a language model picks its next token: the same mechanism as DecodingOptions
    (clearformer/options.py: flags, ranges and messages from the fields).

    temperature > 0; top_k = 0 keeps every token; top_p in (0, 1], 1 keeps every token; greedy = always
    the most probable token (temperature, top-k and top-p are then ignored); seed: None = a fresh one."""

    temperature: float = option(1.0, "--temperature", "softmax(logits / T): lower is sharper (default %(default)s)",
                                at_least=MIN_TEMPERATURE, at_most=MAX_TEMPERATURE,
                                hint=" (use --greedy for the most probable token)")
    top_k: int = option(0, "--top-k", "keep the k most probable tokens (0 = off; default %(default)s)", at_least=0)
    top_p: float = option(1.0, "--top-p", "nucleus: keep tokens up to this mass (1 = off; default %(default)s)",
                          above=0.0, at_most=1.0)
    greedy: bool = option(False, "--greedy", "always the most probable token", action="store_true")
    seed: int | None = option(None, "--seed", "random seed (default %(default)s)", metavar="N", at_least=0,
                              at_most=MAX_SEED)


def filter_logits(logits: torch.Tensor, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """logits (..., vocab) with every token outside the top-k / top-p set set to -inf.

    Ties at the k-th score are all kept. For top-p the most probable token always stays, so the
    set is never empty.
    """
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs  # probability mass strictly above each token
        drop_sorted = before >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def next_token_distribution(logits: torch.Tensor, settings: SamplingOptions) -> torch.Tensor:
    """logits (batch, vocab) -> the probabilities the next token is drawn from, (batch, vocab)."""
    if settings.greedy:
        return torch.nn.functional.one_hot(logits.argmax(dim=-1), logits.shape[-1]).to(logits.dtype)
    filtered = filter_logits(logits.float() / settings.temperature, settings.top_k, settings.top_p)
    return torch.softmax(filtered, dim=-1)


def sample_next(logits: torch.Tensor, settings: SamplingOptions,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """logits (batch, vocab) -> next token ids (batch,)."""
    if settings.greedy:
        return logits.argmax(dim=-1)
    probs = next_token_distribution(logits, settings)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(model, prompt_ids: list[int], max_new_tokens: int, settings: SamplingOptions,
             stop_id: int | None = None) -> list[int]:
    """Continue `prompt_ids` by up to `max_new_tokens` tokens, never past the model's context.

    The prompt fills the cache in one pass; then each step feeds only the newest token. Stops
    early at `stop_id` (not included). Returns the new token ids.
    """
    settings.check()
    context = model.config.max_len
    if not prompt_ids:
        raise UserError("the prompt is empty")
    if len(prompt_ids) >= context:
        raise UserError(f"the prompt is {len(prompt_ids)} tokens; the model's context is {context} tokens "
                        f"(prompt plus generated text must fit)")
    device = next(model.parameters()).device
    generator = torch.Generator(device=device)
    generator.manual_seed(settings.seed if settings.seed is not None else torch.seed())
    model.eval()  # its layout is applied where it was loaded (generate/layout.py `for_decoding`)
    recorder = trace.active()  # the pass that chooses new token t is recorded as step t
    if recorder is not None:
        recorder.step = 0
    cache = model.new_cache()
    ids = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    logits = model(ids, cache, 0)[:, -1]
    position = len(prompt_ids)
    new: list[int] = []
    steps = min(max_new_tokens, context - position)
    for step in range(steps):
        token = sample_next(logits, settings, generator)
        trace.emit("generate", "chosen", token)
        if stop_id is not None and int(token) == stop_id:
            break
        new.append(int(token))
        if step + 1 < steps:  # the last token is never fed back
            if recorder is not None:
                recorder.step = step + 1
            logits = model(token.view(1, 1), cache, position)[:, -1]
            position += 1
    return new
