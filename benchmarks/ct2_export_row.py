"""The decoding benchmark's row "clearformer model served by CTranslate2": the clearformer model that
benchmarks/decode_speed.py times (the `small` size, the same seed, so the same random weights), exported
with `clearformer export --to ctranslate2`'s own code path (clearformer.interop: Marian folder, then
CTranslate2's converter) and run by `ctranslate2.Translator`, float32, like the CTranslate2 row.

decode_speed.py calls `build_runs` from its worker for the system named SYSTEM; the export happens there,
before the warm-up, and is not timed.
"""

from __future__ import annotations

from pathlib import Path

import torch

SYSTEM = "clearformer model served by CTranslate2"


def vocabulary_tokenizer(vocab: int):
    """A tokenizer for ids 0 .. vocab-1 as the benchmark's batches use them: <pad> <unk> <bos> <eos>, then t4 ...
    (the SentencePiece models written beside it are placeholders: the benchmark feeds token strings)."""
    from clearformer.tokenize.marian import MarianVocabularyTokenizer
    from clearformer.tokenize.subword import SentencePieceTokenizer

    pieces = SentencePieceTokenizer.train(["a placeholder for the token strings t4 t5 t6"] * 4, vocab_size=300)
    names = ["<pad>", "<unk>", "<bos>", "<eos>"] + [f"t{i}" for i in range(4, vocab)]
    return MarianVocabularyTokenizer(pieces.model_proto, pieces.model_proto, {n: i for i, n in enumerate(names)},
                                     pad="<pad>", unk="<unk>", eos="<eos>", start="<bos>")


def build_runs(args, batches, directory: Path, ct2_runner) -> dict[tuple[str, int], object]:
    """{(SYSTEM, beam): run} for greedy and beam 4; `ct2_runner` is decode_speed's CTranslate2 runner."""
    import ctranslate2

    from clearformer.config import preset
    from clearformer.interop.ctranslate2 import convert_marian_folder
    from clearformer.interop.marian import export_marian
    from clearformer.model.transformer import Transformer

    torch.manual_seed(args.seed)  # as decode_speed builds its clearformer model: the same weights
    model = Transformer(preset("small", src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, dropout=0.0,
                               max_len=512)).eval()
    tokenizer = vocabulary_tokenizer(args.vocab)
    # source_eos: Marian's tokenizer appends </s>; it changes no weight, and the batches are ids already.
    tokenizer.source_eos = True
    marian = export_marian(model, tokenizer, directory / "clearformer-marian")
    converted = convert_marian_folder(marian, directory / "clearformer-ct2")
    translator = ctranslate2.Translator(str(converted), device="cpu", compute_type="float32",
                                       intra_threads=args.threads, inter_threads=1)
    return {(SYSTEM, beam): ct2_runner(translator, tokenizer.itos, batches, beam, args.new_tokens) for beam in (1, 4)}
