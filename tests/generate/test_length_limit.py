"""How long a translation may run (generate/state.py `max_new_tokens`): the paper's source + 50, or the length
factor of the engine an imported model came from (Marian's max-length-factor, Firefox's 2.5), which an explicit
--max-extra replaces."""

from __future__ import annotations

import json

import pytest
import torch

from clearformer.generate.options import DecodingOptions, SearchTokens
from clearformer.generate.state import max_new_tokens


def sources(*lengths: int) -> torch.Tensor:
    """A padded batch (pad 0) of sources of these lengths (their <eos> counted)."""
    batch = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, length in enumerate(lengths):
        batch[row, :length] = 5
    return batch


def test_the_papers_limit_and_the_engines_factor():
    src = sources(41, 42, 3)
    paper = max_new_tokens(src, SearchTokens(pad_id=0), DecodingOptions(), 512)
    assert paper.tolist() == [91, 92, 53]
    # measured on the package's engine: a 41-token source runs to 103 tokens (2.5 x 41 = 102.5, half up), 42 to 105
    engine = max_new_tokens(src, SearchTokens(pad_id=0, max_length_factor=2.5), DecodingOptions(), 512)
    assert engine.tolist() == [103, 105, 8]
    explicit = max_new_tokens(src, SearchTokens(pad_id=0, max_length_factor=2.5), DecodingOptions(max_extra=4), 512)
    assert explicit.tolist() == [45, 46, 7]
    fixed = max_new_tokens(src, SearchTokens(pad_id=0, max_length_factor=2.5), DecodingOptions(max_new=9), 512)
    assert fixed.tolist() == [9, 9, 9]
    capped = max_new_tokens(src, SearchTokens(pad_id=0, max_length_factor=100.0), DecodingOptions(), 64)
    assert capped.tolist() == [64, 64, 64]


@pytest.mark.parametrize("value", ["2.5", -1, 1e9, True, None, [2.5]])
@pytest.mark.parametrize("layout", ["decoding.json", "tokenizer.json"])
def test_a_damaged_length_factor_is_a_damaged_run_folder(tmp_path, value, layout):
    """decoding.json, or the tokenizer.json of an earlier release's folder: one line naming the file and the fact."""
    from clearformer.errors import UserError
    from clearformer.generate.facts import DecodingFacts
    from clearformer.tokenize import WordTokenizer

    tokenizer = WordTokenizer.build(["a b c"])
    tokenizer.save(tmp_path)
    if layout == "decoding.json":
        DecodingFacts().save(tmp_path)
    data = json.loads((tmp_path / layout).read_text())
    assert data.get("max_length_factor", 0.0) == 0.0
    data["max_length_factor"] = value
    (tmp_path / layout).write_text(json.dumps(data))
    with pytest.raises(UserError, match=f"{layout}: max_length_factor"):
        DecodingFacts.read(tmp_path, len(tokenizer))
