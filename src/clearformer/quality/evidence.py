"""What the model itself says about a translation it wrote: one forced-decoding pass over the output.

A search keeps only the sum of its log-probabilities; a reviewer needs more. `read_evidence` runs the
model's own `encode`/`decode`/`project` (teacher forcing, the pass training makes) over each source and the
ids the search chose, with hooks on two kinds of hook point (`record/trace.py`):

    log p(y_t | y_<t, x)                         the output pieces' log-probabilities (<eos> last)
    decoder.layers.L.cross_attention.weights     how much each output piece looked at each source piece
    decoder.layers.L.output                      the logit lens (explain/lens.py): what layer L would say

and a second pass over the same output with an empty source (only <eos>): log p(y_t | y_<t, ∅),
the language model inside the decoder. A piece the model writes as readily without the source as with it
was not read from the source (a hallucination, a memorised phrase).

Greedy or beam, own run or imported (Marian, Firefox's student): the evidence of an output is the same
pass; nothing here depends on how the output was found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from clearformer.explain.lens import layer_logits
from clearformer.generate.options import SearchTokens
from clearformer.generate.shortlist import sliced_output
from clearformer.record.trace import Hooks


@dataclass(frozen=True)
class Evidence:
    """One translation as its model reads it back.

    source (S,): the encoder's input ids (<eos> included when the model reads one); pieces (T,): the output
    ids, <eos> last; log_probs (T,): log p(piece | prefix, source); prior (T,): log p(piece | prefix, empty
    source); entropy (T,): of each step's distribution (nats); lens (layers - 1, T): p_L(piece) of each
    earlier decoder layer's lens; lens_top (layers - 1, T): whether that layer's top piece was the chosen one;
    attention (T, S): cross-attention weights averaged over layers and heads (each row sums to 1; empty
    (T, 0) for a model without cross-attention)."""

    source: tuple[int, ...]
    pieces: tuple[int, ...]
    log_probs: torch.Tensor
    prior: torch.Tensor
    entropy: torch.Tensor
    lens: torch.Tensor
    lens_top: torch.Tensor
    attention: torch.Tensor


def _pad(rows: Sequence[Sequence[int]], pad_id: int, device) -> torch.Tensor:
    width = max(1, max((len(row) for row in rows), default=1))
    batch = torch.full((len(rows), width), pad_id, dtype=torch.long)
    for index, row in enumerate(rows):
        batch[index, : len(row)] = torch.tensor(list(row), dtype=torch.long)
    return batch.to(device)


def _hook_names(model) -> tuple[list[str], list[str]]:
    """(cross-attention weight points, decoder layer output points) of `model`, in layer order."""
    layers = range(len(model.decoder_layers()))
    from clearformer.record.points import hook_points

    points = hook_points(model)
    attention = [f"decoder.layers.{i}.cross_attention.weights" for i in layers]
    outputs = [f"decoder.layers.{i}.output" for i in layers]
    return [name for name in attention if name in points], [name for name in outputs if name in points]


def _forced(model, src: torch.Tensor, target_in: torch.Tensor, hooks: dict[str, list[torch.Tensor]]):
    """One teacher-forced pass; the hooked values are appended to `hooks[name]` (they change nothing)."""

    def keep(name: str):
        def hook(value: torch.Tensor, point) -> None:
            hooks[name].append(value.detach())
        return hook

    with Hooks({name: keep(name) for name in hooks}):
        memory, src_mask = model.encode(src)
        hidden = model.decode(target_in, memory, src_mask)
        return model.project(hidden).float().log_softmax(-1)


@torch.inference_mode()
def read_evidence(model, tokens: SearchTokens, sources: Sequence[Sequence[int]],
                  outputs: Sequence[Sequence[int]], batch_size: int = 32) -> list[Evidence]:
    """The `Evidence` of each (source ids, output ids without <eos>) pair: see the module docstring.

    An empty source or output gives evidence with no pieces but <eos>. Batches of `batch_size` pairs."""
    if len(sources) != len(outputs):
        raise ValueError(f"{len(sources)} sources but {len(outputs)} outputs")
    device = next(model.parameters()).device
    sliced = sliced_output(model)
    if sliced is not None:  # a search may have left the shortlist's slice on: log p needs the whole vocabulary
        sliced.restrict(None)
    attention_names, output_names = _hook_names(model)
    empty_source = [tokens.eos_id]  # a source with no word: what the decoder writes from its own language model
    was_training = model.training
    model.eval()
    evidence: list[Evidence] = []
    try:
        for start in range(0, len(sources), batch_size):
            src_rows = [list(s) or empty_source for s in sources[start: start + batch_size]]
            out_rows = [list(o) + [tokens.eos_id] for o in outputs[start: start + batch_size]]
            target_in = _pad([[tokens.bos_id] + row[:-1] for row in out_rows], tokens.pad_id, device)
            gold = _pad(out_rows, tokens.pad_id, device)
            hooked: dict[str, list[torch.Tensor]] = {name: [] for name in attention_names + output_names}
            log_probs = _forced(model, _pad(src_rows, tokens.pad_id, device), target_in, hooked)
            prior = _forced(model, _pad([empty_source] * len(src_rows), tokens.pad_id, device), target_in,
                            {})
            chosen = log_probs.gather(-1, gold[..., None])[..., 0]          # (B, T)
            chosen_prior = prior.gather(-1, gold[..., None])[..., 0]
            entropy = -(log_probs.exp() * log_probs).sum(-1)               # (B, T)
            earlier = [hooked[name][0] for name in output_names[:-1]]
            lens_p, lens_top = [], []
            for hidden in earlier:
                lens_log = layer_logits(model, hidden).float().log_softmax(-1)
                lens_p.append(lens_log.gather(-1, gold[..., None])[..., 0].exp())
                lens_top.append((lens_log.argmax(-1) == gold).float())
            weights = [hooked[name][0].float().mean(1) for name in attention_names]  # (B, T, S) each
            attention = torch.stack(weights).mean(0) if weights else None
            for row, (src, out) in enumerate(zip(src_rows, out_rows, strict=True)):
                t, s = len(out), len(src)
                evidence.append(Evidence(
                    source=tuple(src), pieces=tuple(out),
                    log_probs=chosen[row, :t].cpu(), prior=chosen_prior[row, :t].cpu(),
                    entropy=entropy[row, :t].cpu(),
                    lens=torch.stack([p[row, :t] for p in lens_p]).cpu() if lens_p else torch.zeros(0, t),
                    lens_top=torch.stack([p[row, :t] for p in lens_top]).cpu() if lens_top else torch.zeros(0, t),
                    attention=attention[row, :t, :s].cpu() if attention is not None else torch.zeros(t, 0)))
    finally:
        model.train(was_training)
    return evidence
