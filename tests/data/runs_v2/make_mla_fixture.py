"""Writes tests/data/runs_v2/lm-mla: a tiny MLA language model saved by the code of release v2
(ModelConfig with MLA's sizes flat, source_eos, length_ratio and extra). Run with that release."""
import sys
from pathlib import Path

import torch
from clearformer.checkpoint import save_model

from clearformer.config import preset, variant_overrides
from clearformer.model.lm import LanguageModel
from clearformer.tokenize import WordTokenizer

out = Path(sys.argv[1])
corpus = Path(sys.argv[2]).read_text(encoding="utf-8").splitlines()
tokenizer = WordTokenizer.build(corpus)
torch.manual_seed(0)
config = preset("lm-tiny", tgt_vocab_size=len(tokenizer), d_model=16, n_heads=2, n_decoder_layers=1, d_ff=32,
                max_len=32, **variant_overrides("mla", 16, 2))
save_model(out, LanguageModel(config), tokenizer, {"kind": "lm"})
