"""The seeds' worked examples, run through the real modules, equal the golden (true) values within float32
rounding and the golden file's 6 decimals (tests/tolerance.py)."""

from __future__ import annotations

from tolerance import golden_close

from clearformer.explain.examples import i_love_you, india_is_great, india_two_head_weights


def close(a, b) -> bool:
    return golden_close(a, b)


def test_i_love_you_every_step(golden):
    seed = golden["seed_002_i_love_you"]
    walk, rec = i_love_you()
    assert rec.get("embedding.token_ids")[0].tolist() == seed["token_ids"]
    assert close(rec.get("embedding.tokens.lookup")[0], [seed["embedding_matrix"][i] for i in seed["token_ids"]])
    assert close(rec.get("embedding.positions.PE"), seed["PE"])
    assert close(rec.get("embedding.X")[0], seed["X"])
    for name in ("Q", "K", "V", "scores", "scaled", "weights"):
        assert close(rec.get(f"self_attention.{name}")[0, 0], seed[name]), name
    assert close(rec.get("self_attention.head_outputs")[0, 0], seed["output"])
    masked = seed["masked_example"]
    assert close(rec.get("masked_example.weights")[0, 0], masked["weights"])
    out = seed["output_layer_example"]
    assert close(rec.get("output.probabilities")[0, 0], out["probabilities"])
    chosen = int(rec.get("generate.chosen")[0])
    assert walk.find("generate.chosen")[0].matrices[0].note == out["argmax_token"] == "Je"
    assert chosen == seed["vocab"].index("Je")


def test_i_love_you_walkthrough_is_in_the_seeds_order():
    walk, _ = i_love_you()
    titles = [step.title for step in walk.steps]
    order = ["Token ids", "Embedding lookup", "Positional encoding", "Input X = embedding + positional encoding",
             "Queries Q", "Keys K", "Values V", "Scores QKᵀ", "Scaled scores", "Attention weights", "Head output"]
    assert titles[: len(order)] == order
    weights = walk.find("self_attention.weights")[0].matrices[0]
    assert weights.row_labels == ["I", "love", "you"] and weights.col_labels == ["I", "love", "you"]


def test_india_is_great_single_and_two_heads(golden):
    seed = golden["seed_001_india_is_great"]
    _, rec = india_is_great()
    for name in ("Q", "K", "V", "scores", "scaled", "weights"):
        assert close(rec.get(f"self_attention.{name}")[0, 0], seed[name]), name
    assert close(rec.get("self_attention.head_outputs")[0, 0], seed["output"])
    multi = seed["multi_head"]
    weights = india_two_head_weights()
    assert close(weights["Wq1"], multi["W_Q_heads"][0]) and close(weights["W_O"], multi["W_O"])
    assert rec.get("multi_head.weights").shape == (1, 2, 3, 3)
    assert close(rec.get("multi_head.output")[0], multi["output"])
