"""Lesson 15's file: the whole small Transformer, as the learner writes it (the solution) and its skeleton.

SOLUTION is the complete file, in the paper's order, built from the exercise functions it imports
from the learner's own files (attention.py, heads.py, ...: they sit in the same folder). The
skeleton is the same file with each block between `# yours:` and `# end` replaced by
`raise NotImplementedError`, so the two cannot drift apart.
"""

from __future__ import annotations

import re

SOLUTION = '''"""clearformer lesson 15: the Transformer of "Attention Is All You Need", put together (a small one).

Everything below is built from your exercises (the files beside this one):

    positional_encoding.py  attention.py  causal_mask.py  heads.py  layer_norm.py  greedy_decode.py

Check it against the trained toy model, then train it yourself:

    clearformer learn check transformer transformer.py   # the toy run's weights in your model: same logits?
    clearformer learn train transformer.py               # clearformer's trainer, your modules doing the math
"""

import math

import torch
from torch import nn

from attention import scaled_dot_product_attention
from causal_mask import causal_mask
from greedy_decode import greedy_decode
from heads import merge_heads, split_heads
from layer_norm import layer_norm
from positional_encoding import positional_encoding


# 3.4 Embeddings: a learned vector per token, times sqrt(d_model), plus 3.5 the positional encoding.
class Embedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.d_model = d_model
        self.table = nn.Embedding(vocab_size, d_model)

    def forward(self, ids):
        """ids (batch, seq) -> X (batch, seq, d_model) = E[ids] * sqrt(d_model) + PE."""
        # yours: look the ids up, scale, add positional_encoding(seq, d_model)
        x = self.table(ids) * math.sqrt(self.d_model)
        return x + positional_encoding(ids.shape[1], self.d_model).to(x.dtype)
        # end


# 3.2.2 Multi-head attention: h heads of d_k = d_model / h, each its own slice of W^Q, W^K, W^V; then W^O.
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)

    def forward(self, x, memory, mask):
        """x (batch, q_len, d_model) asks; memory (batch, k_len, d_model) answers (memory is x for
        self-attention); mask broadcastable to (batch, heads, q_len, k_len), True = may attend."""
        # yours: project, split into heads, attend, merge, project with W^O
        q = split_heads(self.w_q(x), self.n_heads)
        k = split_heads(self.w_k(memory), self.n_heads)
        v = split_heads(self.w_v(memory), self.n_heads)
        heads, _ = scaled_dot_product_attention(q, k, v, mask)
        return self.w_o(merge_heads(heads))
        # end


# 3.3 Position-wise feed-forward: FFN(x) = max(0, x W1 + b1) W2 + b2.
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        # yours: the two linear maps with a ReLU between
        return self.linear2(torch.relu(self.linear1(x)))
        # end


# 5.4 / 3.1 Layer normalisation with its learned gain and bias (used as LayerNorm(x + Sublayer(x))).
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        return layer_norm(x, self.gamma, self.beta, self.eps)


# 3.1 Encoder layer: self-attention, then feed-forward, each as LayerNorm(x + Sublayer(x)).
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.norm1 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm2 = LayerNorm(d_model)

    def forward(self, x, src_mask):
        # yours: the two sublayers, each with its residual and norm
        x = self.norm1(x + self.self_attn(x, x, src_mask))
        return self.norm2(x + self.ffn(x))
        # end


# 3.1 Decoder layer: masked self-attention, cross-attention to the encoder output, feed-forward.
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.norm1 = LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_heads)
        self.norm2 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm3 = LayerNorm(d_model)

    def forward(self, x, memory, src_mask, tgt_mask):
        # yours: the three sublayers, each with its residual and norm
        x = self.norm1(x + self.self_attn(x, x, tgt_mask))
        x = self.norm2(x + self.cross_attn(x, memory, src_mask))
        return self.norm3(x + self.ffn(x))
        # end


# 3 The model: encoder stack, decoder stack, and 3.4 the output projection (sharing the embedding).
class Transformer(nn.Module):
    def __init__(self, vocab_size, d_model=64, n_heads=4, d_ff=128, n_encoder_layers=2, n_decoder_layers=2,
                 pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.src_embed = Embedding(vocab_size, d_model)
        self.tgt_embed = Embedding(vocab_size, d_model)
        self.encoder = nn.ModuleList(EncoderLayer(d_model, n_heads, d_ff) for _ in range(n_encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, n_heads, d_ff) for _ in range(n_decoder_layers))
        self.out = nn.Linear(d_model, vocab_size)
        # 3.4: one weight matrix for both embeddings and the output projection (one joint vocabulary).
        self.tgt_embed.table.weight = self.src_embed.table.weight
        self.out.weight = self.src_embed.table.weight

    def encode(self, src_ids):
        """src_ids (batch, src_len) -> memory (batch, src_len, d_model)."""
        # yours: the padding mask (batch, 1, 1, src_len), the embedding, every encoder layer
        src_mask = (src_ids != self.pad_id)[:, None, None, :]
        x = self.src_embed(src_ids)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return x
        # end

    def decode(self, tgt_ids, memory, src_ids):
        """tgt_ids (batch, tgt_len), shifted right (<bos> first) -> decoder states (batch, tgt_len, d_model)."""
        # yours: the masks, the embedding, every decoder layer
        src_mask = (src_ids != self.pad_id)[:, None, None, :]
        tgt_mask = causal_mask(tgt_ids.shape[1]).to(tgt_ids.device)
        x = self.tgt_embed(tgt_ids)
        for layer in self.decoder:
            x = layer(x, memory, src_mask, tgt_mask)
        return x
        # end

    def project(self, hidden):
        """decoder states -> logits (batch, tgt_len, vocab): one score per word."""
        return self.out(hidden)

    def forward(self, src_ids, tgt_ids):
        return self.project(self.decode(tgt_ids, self.encode(src_ids), src_ids))


# Translation, one word at a time (your greedy_decode): the source is encoded once, then each prefix is decoded.
@torch.no_grad()
def translate(model, src_ids, bos_id, eos_id, max_new_tokens=40):
    """src_ids (1, src_len) -> the generated ids (<eos> included when it is reached)."""
    memory = model.encode(src_ids)

    def next_token_logits(prefix):
        hidden = model.decode(torch.tensor([prefix], device=src_ids.device), memory, src_ids)
        return model.project(hidden)[0, -1]

    return greedy_decode(next_token_logits, bos_id, eos_id, max_new_tokens)
'''

BLOCK = re.compile(r"(?P<indent>[ ]*)# yours: (?P<what>[^\n]*)\n.*?[ ]*# end\n", re.DOTALL)


def solution_text() -> str:
    """The solution: the file without its `# yours:` / `# end` markers."""
    text = BLOCK.sub(lambda m: "".join(line + "\n" for line in m.group(0).splitlines()[1:-1]), SOLUTION)
    return text


def skeleton_text() -> str:
    """The starter: every `# yours:` block replaced by `raise NotImplementedError`, with the task in a comment."""
    return BLOCK.sub(lambda m: f"{m['indent']}# yours: {m['what']}\n{m['indent']}raise NotImplementedError\n",
                     SOLUTION)
