"""Small random Hugging Face models saved with save_pretrained, with real tokenizer files, built offline.

Marian: a SentencePiece model trained here with the `sentencepiece` library (</s> = 0, <unk> = 1, as in
the opus-mt models) and a vocab.json of its pieces with <pad> last. GPT-2: a byte-level BPE vocab.json
and merges.txt trained here with the `tokenizers` library.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import seeds
import torch
from tolerance import depth_of

SENTENCES = ["the cat sat on the mat", "a dog runs in the park", "I love you", "we read a book today",
             "le chat est sur le tapis", "un chien court dans le parc", "je t'aime", "nous lisons un livre"]
TEST_SOURCES = ["the cat runs in the park", "I love you", "a book on le tapis", "we read"]


def marian_spm(sentences: list[str] | None = None, vocab_size: int = 60) -> bytes:
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter((sentences or SENTENCES) * 20), model_writer=model, vocab_size=vocab_size,
        hard_vocab_limit=False,
        character_coverage=1.0, eos_id=0, unk_id=1, bos_id=-1, pad_id=-1, eos_piece="</s>", unk_piece="<unk>",
        minloglevel=2)
    return model.getvalue()


@torch.no_grad()
def noise(model, skip: str = "-") -> None:
    """Weights larger than the init's std 0.02 (LayerNorm gains near 1): outputs that differ by input."""
    for name, parameter in model.named_parameters():
        if skip in name:
            continue
        if name.endswith("weight") and parameter.dim() == 1:
            parameter.copy_(1 + 0.1 * torch.randn_like(parameter))
        else:
            parameter.normal_(0, 0.2)


def marian_folder(directory: Path, seed: int = 0, proto: bytes | None = None, **overrides):
    """(folder, MarianMTModel in eval mode): a random Marian translator and its tokenizer files (`proto`: the
    SentencePiece model of both sides, default `marian_spm()`)."""
    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel

    proto = proto or marian_spm()
    processor = spm.SentencePieceProcessor(model_proto=proto)
    vocab = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())}
    vocab["<pad>"] = len(vocab)  # Marian's <pad>: the last id, and the decoder's start token
    size = len(vocab)
    settings = dict(vocab_size=size, d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                    decoder_attention_heads=2, encoder_ffn_dim=24, decoder_ffn_dim=24, max_position_embeddings=40,
                    pad_token_id=size - 1, decoder_start_token_id=size - 1, eos_token_id=0, forced_eos_token_id=None,
                    activation_function="swish", scale_embedding=True, dropout=0.0)
    settings.update(overrides)
    torch.manual_seed(seeds.seed(seed))
    model = MarianMTModel(MarianConfig(**settings)).eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 0.1)
        noise(model, skip="embed_positions")  # the sinusoidal table stays
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    for name in ("source.spm", "target.spm"):
        (directory / name).write_bytes(proto)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    return directory, model


def gpt2_folder(directory: Path, seed: int = 0, **overrides):
    """(folder, GPT2LMHeadModel in eval mode): a random GPT-2 and a byte-level BPE trained on SENTENCES."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(SENTENCES * 10, trainer)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.model.save(str(directory))  # vocab.json + merges.txt
    size = tokenizer.get_vocab_size()
    end = tokenizer.token_to_id("<|endoftext|>")
    settings = dict(vocab_size=size, n_positions=48, n_embd=16, n_layer=2, n_head=2, bos_token_id=end,
                    eos_token_id=end, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    settings.update(overrides)
    torch.manual_seed(seeds.seed(seed))
    model = GPT2LMHeadModel(GPT2Config(**settings)).eval()
    noise(model)
    model.save_pretrained(directory)
    return directory, model


def marian_depth(config) -> int:
    """tests/tolerance.py's depth for a MarianConfig's logits."""
    return depth_of(config.d_model, max(config.encoder_ffn_dim, config.decoder_ffn_dim),
                    encoder_layers=config.encoder_layers, decoder_layers=config.decoder_layers, vocabulary=True)


def gpt2_depth(config) -> int:
    """tests/tolerance.py's depth for a GPT2Config's logits (a decoder-only layer: one attention, one MLP)."""
    return depth_of(config.n_embd, config.n_inner or 4 * config.n_embd, encoder_layers=config.n_layer,
                    vocabulary=True)


def padded(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows])


def hf_generate(model, src: torch.Tensor, pad_id: int, beams: int, max_new: int) -> list[list[int]]:
    """Transformers' generate with clearformer's rules: no forced </s>, no banned tokens, plain sum of
    log-probabilities for beams (length_penalty 0), stopping as `early_stopping=False`. Output ids
    without the start token, cut before </s> (what follows it is padding)."""
    with torch.no_grad():
        out = model.generate(input_ids=src, attention_mask=src != pad_id, num_beams=beams, do_sample=False,
                             max_new_tokens=max_new, length_penalty=0.0, early_stopping=False,
                             forced_eos_token_id=None, bad_words_ids=None, num_return_sequences=1,
                             min_length=0, no_repeat_ngram_size=0, repetition_penalty=1.0)
    eos = model.config.eos_token_id
    result = []
    for row in out[:, 1:].tolist():
        result.append(row[:row.index(eos)] if eos in row else row)
    return result
