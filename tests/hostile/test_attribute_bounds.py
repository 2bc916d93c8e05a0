"""Issue 41, root 4: `attribute` estimates its work from steps x target x source tokens before it starts and
refuses beyond the limit in one line (naming the --steps that fit), and its memory stays bounded whatever
--steps says: the mean gradient is summed pass by pass, never stacked."""

from __future__ import annotations

import pytest
import torch
from conftest import one_line, run_child

from clearformer.data.toy import toy_splits

pytestmark = pytest.mark.slow  # seconds on its own: -m 'not slow' skips it (pyproject)

LONG = " ".join(" ".join(source for source, _ in toy_splits()["train"][:40]).split()[:63])


def test_a_long_sentence_with_many_steps_is_refused_before_the_work(toy_run, tmp_path):
    outcome = run_child("attribute 63 words x 1024 steps", ["attribute", LONG, "--steps", "1024", "--checkpoint",
                                                            str(toy_run)], tmp_path, seconds=60)
    line = one_line(outcome)
    assert "1024 path point(s)" in line and "row-tokens" in line and "use at most --steps" in line, line
    fitting = int(line.rsplit("--steps ", 1)[1].split()[0])
    assert 1 <= fitting < 1024


def test_the_steps_it_names_fit(toy_run, in_process):
    from clearformer.explain.attribution import attribution_cost
    from clearformer.load import load_model

    _, err = in_process("attribute", LONG, "--steps", "1024", "--checkpoint", toy_run)[1:]
    fitting = int(one_line(err).rsplit("--steps ", 1)[1].split()[0])
    line = one_line(err)
    tgt_len, src_len = (int(part.split()[-1]) for part in line.split(" target x ")[0].split(" x ")[-1:] +
                        [line.split(" target x ")[1].split()[0]])
    model = load_model(toy_run)[0]
    assert attribution_cost(model.config, src_len, tgt_len, fitting).over_limit() <= 1
    assert attribution_cost(model.config, src_len, tgt_len, fitting + 1).over_limit() > 1


def test_the_gradient_mean_is_the_same_in_any_number_of_passes(toy_run):
    from clearformer.explain.attribution import gradients, mean_gradients, source_inputs
    from clearformer.load import load_model

    model, tokenizer, _ = load_model(toy_run)
    model.eval()
    src = torch.tensor([tokenizer.encode("I love the cat")])
    target = torch.tensor(tokenizer.encode("J'aime le chat") + [tokenizer.eos_id])
    tgt_in = torch.tensor([[tokenizer.bos_id, *target[:-1].tolist()]])
    x, baseline = source_inputs(model, src, tgt_in)
    points = baseline + torch.linspace(0.1, 0.9, 5)[:, None, None] * (x - baseline)
    stacked = torch.stack([gradients(model, src, tgt_in, target, points, torch.full((5,), t)) for t in
                           range(len(target))]).double().mean(dim=1)  # the old way: every row at once
    for rows_per_pass in (1, 3, 256):
        assert torch.allclose(mean_gradients(model, src, tgt_in, target, points, rows_per_pass), stacked,
                              rtol=1e-4, atol=1e-6)  # float32 rows, batched differently


def test_a_pass_holds_fewer_rows_for_a_bigger_model_and_longer_sentences():
    from clearformer.config import preset
    from clearformer.explain.attribution import ROWS_PER_PASS, attribution_cost
    from clearformer.limits import ATTRIBUTION_PASS_BYTES

    toy = preset("toy-translate", src_vocab_size=200, tgt_vocab_size=200)
    big = preset("base", src_vocab_size=32000, tgt_vocab_size=32000)
    assert attribution_cost(toy, 10, 10, 128).rows_per_pass == ROWS_PER_PASS
    long_big = attribution_cost(big, 200, 220, 128)
    assert 1 <= long_big.rows_per_pass < 4
    assert long_big.rows_per_pass * 20 * 220 * 32000 <= ATTRIBUTION_PASS_BYTES  # its logits alone fit
