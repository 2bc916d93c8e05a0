"""SentencePiece subwords: ids like the word tokenizer, round trip, save/load, damaged files."""

import pytest

from clearformer.data.toy import toy_pairs
from clearformer.errors import UserError
from clearformer.tokenize import load_tokenizer
from clearformer.tokenize.subword import SentencePieceTokenizer


@pytest.fixture(scope="module")
def tokenizer():
    sentences = [s for pair in toy_pairs() for s in pair] + ["stty crtscts -F /dev/ttyS0"] * 3
    return SentencePieceTokenizer.train(sentences, vocab_size=500, threads=1)


def test_special_ids_match_the_word_tokenizer(tokenizer):
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    assert [tokenizer.id_to_token(i) for i in range(4)] == ["<pad>", "<unk>", "<bos>", "<eos>"]
    assert 300 < len(tokenizer) <= 500


@pytest.mark.parametrize("text", ["Je t'aime", "I love AI", "Nous ne voyons pas le chat",
                                  "Set crtscts on /dev/ttyS1 at 115200 baud",
                                  "Où est la gare ? Ça va, merci."])
def test_round_trip(tokenizer, text):
    ids = tokenizer.encode(text)
    assert all(isinstance(i, int) for i in ids)
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode([tokenizer.bos_id] + ids + [tokenizer.eos_id, tokenizer.pad_id]) == text
    pieces = tokenizer.tokenize(text)
    assert len(pieces) == len(ids) and [tokenizer.token_to_id(p) for p in pieces] == ids


def test_unseen_characters_fall_back_to_bytes(tokenizer):
    text = "naïve 東京 ✓"
    assert tokenizer.unk_id not in tokenizer.encode(text)
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert tokenizer.unknown_words(text) == []


def test_save_load(tmp_path, tokenizer):
    tokenizer.save(tmp_path)
    assert (tmp_path / "tokenizer.model").exists() and (tmp_path / "tokenizer.json").exists()
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, SentencePieceTokenizer) and len(loaded) == len(tokenizer)
    for text in ["J'aime l'IA", "They drink tea"]:
        assert loaded.encode(text) == tokenizer.encode(text)
        assert loaded.tokenize(text) == tokenizer.tokenize(text)


def test_same_corpus_same_vocabulary():
    sentences = [s for pair in toy_pairs()[:200] for s in pair]
    first = SentencePieceTokenizer.train(sentences, vocab_size=300, threads=1)
    second = SentencePieceTokenizer.train(sentences, vocab_size=300, threads=1)
    assert first.model_proto == second.model_proto


def test_damaged_model_is_one_line_error(tmp_path, tokenizer):
    tokenizer.save(tmp_path)
    data = bytearray((tmp_path / "tokenizer.model").read_bytes())
    data[100] ^= 0xFF
    (tmp_path / "tokenizer.model").write_bytes(bytes(data))
    with pytest.raises(UserError, match="damaged"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.model").unlink()
    with pytest.raises(UserError, match="missing"):
        load_tokenizer(tmp_path)


def test_no_sentences():
    with pytest.raises(UserError):
        SentencePieceTokenizer.train([], vocab_size=100)
