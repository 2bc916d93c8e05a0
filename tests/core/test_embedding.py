"""Token embeddings and positional encodings against the formula and the golden seed values."""

from __future__ import annotations

import math

import pytest
import torch
from tolerance import golden_close

from clearformer.model.embedding import (
    InputEmbedding,
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_table,
)


def test_pe_matches_the_formula_cell_by_cell():
    table = sinusoidal_table(20, 8)
    for pos in range(20):
        for i in range(4):
            angle = pos / 10000 ** (2 * i / 8)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_pe_equals_golden_seed_tables(golden):
    # tests/tolerance.py: the table's one sine or cosine, against the golden file's 6 decimals
    assert golden_close(sinusoidal_table(3, 4), golden["seed_002_i_love_you"]["PE"], depth=1)
    five_by_six = golden["seed_003_positional_encoding_5x6"]
    assert golden_close(sinusoidal_table(5, 6), five_by_six["PE"], depth=1)


def test_odd_width_has_one_more_sine_column():
    table = sinusoidal_table(4, 5)
    assert table.shape == (4, 5)
    assert torch.allclose(table[:, 4], torch.sin(torch.arange(4.0) / 10000 ** (4 / 5)))


def test_sinusoidal_buffer_extends_past_its_precomputed_length():
    pe = SinusoidalPositionalEncoding(8, max_len=4)
    x = torch.zeros(1, 10, 8)
    out = pe(x)
    assert out.shape == (1, 10, 8)
    assert torch.allclose(out[0], sinusoidal_table(10, 8))
    assert "table" not in pe.state_dict()  # fixed, not a weight: never saved in checkpoints


def test_offset_gives_the_positions_of_later_tokens():
    pe = SinusoidalPositionalEncoding(8, max_len=16)
    assert torch.allclose(pe(torch.zeros(1, 2, 8), offset=5)[0], sinusoidal_table(7, 8)[5:7])


def test_learned_positions_refuse_to_go_past_their_table():
    learned = LearnedPositionalEmbedding(4, max_len=3)
    assert learned(torch.zeros(2, 3, 4)).shape == (2, 3, 4)
    with pytest.raises(ValueError, match="longer than the learned table"):
        learned(torch.zeros(1, 4, 4))


def test_token_embedding_is_a_row_lookup_scaled_by_sqrt_d():
    emb = TokenEmbedding(10, 16, scale=True, pad_id=0)
    ids = torch.tensor([[3, 0, 7]])
    out = emb(ids)
    assert torch.allclose(out[0, 0], emb.weight[3] * 4.0)
    assert torch.count_nonzero(out[0, 1]) == 0  # <pad> row is zero
    one_hot = torch.nn.functional.one_hot(ids, 10).float()
    assert torch.allclose(one_hot @ emb.weight * 4.0, out)
    unscaled = TokenEmbedding(10, 16, scale=False)
    assert torch.allclose(unscaled(ids)[0, 0], unscaled.weight[3])


def test_input_embedding_adds_positions_to_token_vectors(golden):
    seed = golden["seed_002_i_love_you"]
    tokens = TokenEmbedding(10, 4, scale=False, pad_id=None)
    with torch.no_grad():
        tokens.weight.copy_(torch.tensor(seed["embedding_matrix"]))
    x = InputEmbedding(tokens, SinusoidalPositionalEncoding(4))(torch.tensor([seed["token_ids"]]))
    assert golden_close(x[0], seed["X"], depth=1)  # one float32 addition
