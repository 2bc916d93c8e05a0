"""Writes tests/data/runs_v1/lm with the code of the commit named in the README (train_lm API)."""
from pathlib import Path

import torch
from clearformer.lm import data as lm_data
from clearformer.lm.training import LMTrainSettings, train_lm

from clearformer.config import attention_variant, preset
from clearformer.model.lm import LanguageModel

root = Path("tests/data/runs_v1")
subjects = ["the dog", "the cat", "a man", "the woman"]
verbs = ["ran to", "looked at", "came to"]
places = ["the house", "the city", "the river"]
lines = [f"{s} {v} {p} ." for s in subjects for v in verbs for p in places]
(root / "lm-corpus.txt").write_text("\n".join(lines * 2) + "\n", encoding="utf-8")
train_lines, valid_lines = lm_data.load_corpus(root / "lm-corpus.txt")
tokenizer = lm_data.train_tokenizer(train_lines, 100, "words")
torch.manual_seed(0)
config = preset("lm-tiny", tgt_vocab_size=len(tokenizer), d_model=16, n_heads=2, d_ff=32, max_len=32)
model = LanguageModel(config)
streams = lm_data.build_streams(tokenizer, train_lines, valid_lines)
settings = LMTrainSettings(steps=6, eval_every=3, batch_size=4, block_size=16, eval_batches=1, lr=1e-2,
                           warmup=2, log_every=3)
meta = {"kind": "lm", "corpus": "lm-corpus.txt", "corpus_words": streams.words, "tokenizer": tokenizer.kind,
        "variant": attention_variant(model.config)}
print(train_lm(model, tokenizer, streams.train, streams.valid, settings, root / "lm", meta))
