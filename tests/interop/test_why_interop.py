"""The logit lens and activation patching on an imported Marian translator, against the same computation done
with PyTorch hooks on the Transformers `MarianMTModel` it came from (1e-5)."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("transformers")
from interop_helpers import marian_folder  # noqa: E402

from clearformer.explain.lens import lens_translation  # noqa: E402
from clearformer.explain.patching import activation_patching  # noqa: E402
from clearformer.generate import DecodingOptions, encode_source, search_tokens  # noqa: E402
from clearformer.interop.marianmt import load_marian  # noqa: E402

CLEAN, CORRUPTED = "I love you", "I love we"


@pytest.fixture(scope="module")
def marian(tmp_path_factory):
    folder, theirs = marian_folder(tmp_path_factory.mktemp("marian_why"), seed=5, encoder_attention_heads=4,
                                   decoder_attention_heads=4)
    ours, tokenizer, _ = load_marian(str(folder))
    return theirs, ours, tokenizer


def first(output):
    """A Transformers layer's hidden states (some versions return a tuple)."""
    return output[0] if isinstance(output, tuple) else output


def replaced(output, value):
    return (value, *output[1:]) if isinstance(output, tuple) else value


def their_logprob(theirs, src, tgt_in, target, hooks=()) -> float:
    """M = sum_t log p(target_t) of MarianMTModel, with forward hooks [(module, hook, pre)] in force."""
    handles = [module.register_forward_pre_hook(hook) if pre else module.register_forward_hook(hook)
               for module, hook, pre in hooks]
    try:
        with torch.no_grad():
            logits = theirs(input_ids=src, attention_mask=torch.ones_like(src), decoder_input_ids=tgt_in).logits
    finally:
        for handle in handles:
            handle.remove()
    return float(torch.log_softmax(logits.double(), -1)[0].gather(1, target[:, None]).sum())


def test_lens_equals_marian_hidden_states_through_its_head(marian):
    theirs, ours, tokenizer = marian
    options = DecodingOptions(brevity=0.0, max_new=6)
    ids = encode_source(tokenizer, CLEAN)
    steps = lens_translation(ours, ids, options, search_tokens(ours, tokenizer, options))
    chosen = [s.chosen for s in steps]
    seen: dict[int, torch.Tensor] = {}
    layers = theirs.model.decoder.layers
    hooks = [(layer, lambda m, a, out, i=i: seen.__setitem__(i, first(out)), False) for i, layer in enumerate(layers)]
    src, tgt_in = torch.tensor([ids]), torch.tensor([[tokenizer.bos_id, *chosen[:-1]]])
    their_logprob(theirs, src, tgt_in, torch.tensor(chosen), hooks)
    for i in range(len(layers)):
        with torch.no_grad():  # Marian has no final norm: the layer's output straight through lm_head (+ bias)
            p = torch.softmax(theirs.lm_head(seen[i][0]) + theirs.final_logits_bias[0], -1)
        for t, step in enumerate(steps):
            top, p_top, p_chosen = step.layers[i]
            assert top == int(p[t].argmax())
            assert abs(p_chosen - float(p[t, step.chosen])) < 1e-5 and abs(p_top - float(p[t].max())) < 1e-5


def their_points(theirs):
    """Ours -> (module of MarianMTModel, how to patch it): the names `activation_patching` uses."""
    model = theirs.model
    points = {"encoder.output": (model.encoder, None)}
    for stack, parts in (("encoder", ("self_attn",)), ("decoder", ("self_attn", "encoder_attn"))):
        for i, layer in enumerate(getattr(model, stack).layers):
            points[f"{stack}.layers.{i}.output"] = (layer, None)
            for part in parts:
                ours = "self_attention" if part == "self_attn" else "cross_attention"
                points[f"{stack}.layers.{i}.{ours}.heads"] = (getattr(layer, part).out_proj, None)
    return points


def test_patching_equals_marian_patched_by_hooks(marian):
    theirs, ours, tokenizer = marian
    clean, corrupted = encode_source(tokenizer, CLEAN), encode_source(tokenizer, CORRUPTED)
    assert len(clean) == len(corrupted)
    translation = [5, 9, 12, 7, tokenizer.eos_id]
    theirs = copy.deepcopy(theirs).double()  # patching computes in float64 (explain/patching.py)
    _, _, points = activation_patching(ours, clean, corrupted, translation, tokenizer.bos_id)
    src_clean, src_corrupted = torch.tensor([clean]), torch.tensor([corrupted])
    tgt_in, target = torch.tensor([[tokenizer.bos_id, *translation[:-1]]]), torch.tensor(translation)
    modules = their_points(theirs)
    saved: dict[str, torch.Tensor] = {}

    def keeper(name, pre):
        if pre:
            return lambda m, args: saved.__setitem__(name, args[0].clone())
        if name == "encoder.output":
            return lambda m, a, out: saved.__setitem__(name, out.last_hidden_state.clone())
        return lambda m, a, out: saved.__setitem__(name, first(out).clone())

    their_logprob(theirs, src_clean, tgt_in, target,
                  [(module, keeper(name, name.endswith(".heads")), name.endswith(".heads"))
                   for name, (module, _) in modules.items()])
    m_clean = their_logprob(theirs, src_clean, tgt_in, target)
    m_corrupted = their_logprob(theirs, src_corrupted, tgt_in, target)
    heads = theirs.config.encoder_attention_heads
    for point, restored in points:
        name, position, head = point.name, None, None
        if name.endswith("]"):
            name, position = name[:-1].split("[")[0], int(name[:-1].split("[")[1])
        elif ".head." in name:
            name, head = name.rsplit(".head.", 1)[0] + ".heads", int(name.rsplit(".", 1)[1])
        module, _ = modules[name]
        clean_value = saved[name]
        if head is not None:
            size = clean_value.shape[-1] // heads
            cols = slice(head * size, (head + 1) * size)

            def hook(m, args, cols=cols, clean_value=clean_value):
                value = args[0].clone()
                value[..., cols] = clean_value[..., cols]
                return (value, *args[1:])
            hooks = [(module, hook, True)]
        elif name == "encoder.output":
            def hook(m, a, out, clean_value=clean_value):
                out["last_hidden_state"] = clean_value
                return out
            hooks = [(module, hook, False)]
        else:
            def hook(m, a, out, clean_value=clean_value, position=position):
                value = first(out).clone()
                if position is None:
                    value[:] = clean_value
                else:
                    value[:, position] = clean_value[:, position]
                return replaced(out, value)
            hooks = [(module, hook, False)]
        m_patched = their_logprob(theirs, src_corrupted, tgt_in, target, hooks)
        expected = (m_patched - m_corrupted) / (m_clean - m_corrupted)
        assert abs(restored - expected) < 1e-5, point.name
