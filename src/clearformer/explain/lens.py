"""The logit lens: what the decoder would say if it stopped after each of its layers.

`translate`'s own search (greedy: `generate.greedy.greedy_decode`, the call `translate` makes with
--beam 1) runs under a recorder; each generation step records every decoder layer's output as
`decoder.layers.L.output` (the hook points of `record/trace.py`). That output, through the decoder's
final LayerNorm where the architecture has one (pre-norm) and then the output projection, is what the
model would predict after layer L:

    p_L = softmax(W_out · FinalNorm(h_L) + b)          (the last layer's p_L is the model's own p)

For each step and layer the lens keeps the top token of p_L and the probability p_L gives the token
the search finally chose. A language model (`clearformer lens` on an `lm` run) is read the same way
from `lm generate`'s greedy continuation.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from clearformer.explain.beam import follow_chosen, read_beam_tree
from clearformer.generate.beam import beam_search
from clearformer.generate.greedy import greedy_decode
from clearformer.generate.options import DecodingOptions, SearchTokens
from clearformer.generate.sampling import SamplingOptions, generate
from clearformer.record.trace import Recorder


@dataclass
class LensStep:
    """One generation step: the chosen token id and, per decoder layer, (top id, p(top), p(chosen))."""

    step: int
    chosen: int
    layers: list[tuple[int, float, float]] = field(default_factory=list)


def layer_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """A decoder layer's output (..., d_model) -> logits (..., vocab): the final norm (if any), then the projection."""
    norm = model.decoder.final_norm
    return model.output(hidden if norm is None else norm(hidden))


def read_lens(model, recorder: Recorder, chosen: list[int]) -> list[LensStep]:
    """The lens of every step from a recorder that saw the search: step t's records are tagged t, and the
    last query row of each `decoder.layers.L.output` is the position that chose token t (row 0 of the batch)."""
    steps = []
    with torch.no_grad():
        for t, token in enumerate(chosen):
            step = LensStep(t, token)
            for layer in range(len(model.decoder_layers())):
                hidden = recorder.get(f"decoder.layers.{layer}.output", step=t)[0, -1]
                probabilities = torch.softmax(layer_logits(model, hidden.to(model.output.linear.weight)).float(), -1)
                top = int(probabilities.argmax())
                step.layers.append((top, float(probabilities[top]), float(probabilities[token])))
            steps.append(step)
    return steps


def lens_translation(model, src_ids: list[int], options: DecodingOptions, tokens: SearchTokens) -> list[LensStep]:
    """The lens of the greedy translation of one source (its ids, <eos> included as the model reads them)."""
    src = torch.tensor([src_ids], device=next(model.parameters()).device)
    model.eval()
    with Recorder() as recorder:
        decoded = greedy_decode(model, src, options.but(beam=1, with_scores=False), tokens)
    chosen = decoded.tokens[0, : int(decoded.lengths[0])].tolist()
    return read_lens(model, recorder, chosen)


def lens_beam(model, src_ids: list[int], options: DecodingOptions, tokens: SearchTokens, vocab: list[str],
              eos_id: int) -> list[LensStep]:
    """The lens of `translate --beam K`'s translation of one source: beam search (the call `translate` makes)
    under the recorder, then at every step the winning hypothesis's row (explain/beam.py `follow_chosen`, as
    the beam walkthrough reads it). `vocab`: the token labels the search tree is read with."""
    src = torch.tensor([src_ids], device=next(model.parameters()).device)
    model.eval()
    with Recorder() as recorder:
        beam_search(model, src, options, tokens)
    tree = read_beam_tree(recorder.records, vocab, [vocab[i] for i in src_ids], eos_id, options.beam, options.alpha,
                          options.stop)
    winner = Recorder()
    winner.records = follow_chosen(recorder.records, tree)
    return read_lens(model, winner, tree.ranking[0].tokens if tree.ranking else [])


def lens_lm(model, prompt_ids: list[int], max_new_tokens: int) -> list[LensStep]:
    """The lens of a language model's greedy continuation (`lm generate`'s own function) of `prompt_ids`."""
    model.eval()
    with Recorder() as recorder:
        new = generate(model, prompt_ids, max_new_tokens, SamplingOptions(greedy=True))
    return read_lens(model, recorder, new)


def lens_to_dict(steps: list[LensStep], label, result: str) -> dict:
    """The JSON of `clearformer lens`: {"result", "steps": [{"step", "chosen", "layers": [{"layer", "top",
    "p_top", "p_chosen"}]}]}; `label(id)` names a token."""
    return {"result": result, "steps": [
        {"step": s.step, "chosen": label(s.chosen),
         "layers": [{"layer": i, "top": label(top), "p_top": p_top, "p_chosen": p_chosen}
                    for i, (top, p_top, p_chosen) in enumerate(s.layers)]} for s in steps]}
