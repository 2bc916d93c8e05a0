"""Label-smoothed loss against torch's cross_entropy(label_smoothing=0.1, ignore_index=pad)."""

import dataclasses

import torch
import torch.nn.functional as F

from clearformer.train.loss import label_smoothed_loss

PAD = 0


def sample(seed=0, batch=3, length=5, vocab=11):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, length, vocab, generator=generator, dtype=torch.float64) * 3
    labels = torch.randint(1, vocab, (batch, length), generator=generator)
    labels[0, 3:] = PAD
    labels[2, 1:] = PAD
    return logits, labels


def test_matches_torch_cross_entropy_with_smoothing():
    logits, labels = sample()
    for smoothing in (0.0, 0.1, 0.3):
        loss, nll, count = label_smoothed_loss(logits.float(), labels, PAD, smoothing)
        expected = F.cross_entropy(logits.float().reshape(-1, 11), labels.reshape(-1), ignore_index=PAD,
                                   label_smoothing=smoothing, reduction="sum")
        assert count == int((labels != PAD).sum()) == 9
        torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-5)
        plain = F.cross_entropy(logits.float().reshape(-1, 11), labels.reshape(-1), ignore_index=PAD,
                                reduction="sum")
        torch.testing.assert_close(nll, plain, rtol=1e-6, atol=1e-5)


def test_gradients_match_torch():
    logits, labels = sample(seed=3)
    mine = logits.float().clone().requires_grad_(True)
    theirs = logits.float().clone().requires_grad_(True)
    label_smoothed_loss(mine, labels, PAD, 0.1)[0].backward()
    F.cross_entropy(theirs.reshape(-1, 11), labels.reshape(-1), ignore_index=PAD, label_smoothing=0.1,
                    reduction="sum").backward()
    torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-5, atol=1e-6)
    assert torch.all(mine.grad[2, 1:] == 0)  # padding gets no gradient


def test_formula_by_hand():
    # One token, 4 classes, label 1: (1 - eps) * -log p_1 + eps * mean_k(-log p_k).
    logits = torch.tensor([[[0.0, 1.0, 2.0, 3.0]]])
    log_p = torch.log_softmax(logits[0, 0], dim=-1)
    expected = 0.9 * -log_p[1] + 0.1 * -log_p.mean()
    loss, _, count = label_smoothed_loss(logits, torch.tensor([[1]]), pad_id=-100, smoothing=0.1)
    assert count == 1
    torch.testing.assert_close(loss, expected)


def test_training_step_loss_equals_full_logits_loss():
    """TranslationLoss projects only labelled positions; the loss and gradients are those of all logits."""
    from clearformer.config import preset
    from clearformer.data.batching import Example, collate
    from clearformer.model.transformer import Transformer
    from clearformer.train.step import TranslationLoss

    torch.manual_seed(0)
    config = preset("toy-translate", d_model=16, n_heads=2, d_ff=32, src_vocab_size=20, tgt_vocab_size=20,
                    tie_embeddings="all", dropout=0.0)
    model = Transformer(config).train()
    batch = collate([Example((4, 5, 6, 7), (8, 9)), Example((4,), (10, 11, 12, 13, 14))], 0, 2, 3)
    loss, nll, count = TranslationLoss(model, 0.1)(batch.src, batch.tgt_in, batch.tgt_out)
    loss.backward()
    packed = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    full, full_nll, full_count = label_smoothed_loss(model(batch.src, batch.tgt_in), batch.tgt_out, 0, 0.1)
    full.backward()
    assert count == full_count == 9
    torch.testing.assert_close(loss, full)
    torch.testing.assert_close(nll, full_nll)
    for name, p in model.named_parameters():
        torch.testing.assert_close(packed[name], p.grad, msg=name)
    model = Transformer(dataclasses.replace(config, attention_dropout=0.2, ffn_dropout=0.3))  # dropout: the config's
    assert model.encoder.layers[0].self_attention.dropout == 0.2
    assert model.decoder.layers[0].feed_forward.dropout.p == 0.3
    assert model.decoder.layers[0].add_norm_1.dropout.p == 0.0  # residual dropout stays the config's
