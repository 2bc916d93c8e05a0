"""The decoding benchmark's CTranslate2 rows beyond CTranslate2's own Marian conversion:

* "clearformer model served by CTranslate2": the clearformer model that benchmarks/decode_speed.py times
  (the `small` size, the same seed, so the same random weights), exported with `clearformer export --to
  ctranslate2`'s own code path (clearformer.interop: Marian folder, then CTranslate2's converter) and run
  by `ctranslate2.Translator`, float32, like the CTranslate2 row;
* the same model and CTranslate2's converted Marian at compute_type int8 (CTranslate2 quantizes the
  weights to int8 as it loads them, as `clearformer translate --engine ctranslate2 --quantize int8` runs).

decode_speed.py calls `prepare` in its main process, where it also converts the Marian model, and
`build_runs` from the worker of each system in SYSTEMS. Every CTranslate2 worker therefore does the same
thing: load a converted folder, warm up, time. (The export used to run inside its own worker: that
worker had built the PyTorch model and run Transformers and the converter before CTranslate2 decoded,
the Marian worker had not; docs/ctranslate2.md.)
"""

from __future__ import annotations

from pathlib import Path

import torch

SYSTEM = "clearformer model served by CTranslate2"
SYSTEM_INT8 = "clearformer model served by CTranslate2 int8"
MARIAN_INT8 = "CTranslate2 int8"
SYSTEMS = [SYSTEM, SYSTEM_INT8, MARIAN_INT8]
EXPORTED = "clearformer-ct2"


def vocabulary_tokenizer(vocab: int):
    """A tokenizer for ids 0 .. vocab-1 as the benchmark's batches use them: <pad> <unk> <bos> <eos>, then t4 ...
    (the SentencePiece models written beside it are placeholders: the benchmark feeds token strings)."""
    from clearformer.tokenize.marianmt import MarianMTTokenizer
    from clearformer.tokenize.subword import SentencePieceTokenizer

    pieces = SentencePieceTokenizer.train(["a placeholder for the token strings t4 t5 t6"] * 4, vocab_size=300)
    names = exported_tokens(vocab)
    return MarianMTTokenizer(pieces.model_proto, pieces.model_proto, {n: i for i, n in enumerate(names)},
                                     pad="<pad>", unk="<unk>", eos="<eos>", start="<bos>")


def exported_tokens(vocab: int) -> list[str]:
    return ["<pad>", "<unk>", "<bos>", "<eos>"] + [f"t{i}" for i in range(4, vocab)]


def prepare(args, directory: Path) -> None:
    """Export decode_speed's clearformer model to directory/clearformer-ct2 (untimed, in the main process)."""
    from clearformer.config import preset
    from clearformer.interop.ctranslate2 import convert_marian_folder
    from clearformer.interop.marianmt import export_marian
    from clearformer.model.transformer import Transformer

    torch.manual_seed(args.seed)  # as decode_speed builds its clearformer model: the same weights
    model = Transformer(preset("small", src_vocab_size=args.vocab, tgt_vocab_size=args.vocab, dropout=0.0,
                               max_len=512)).eval()
    tokenizer = vocabulary_tokenizer(args.vocab)
    # source_eos: Marian's tokenizer appends </s>; it changes no weight, and the batches are ids already.
    tokenizer.source_eos = True
    marian = export_marian(model, tokenizer, directory / "clearformer-marian")
    convert_marian_folder(marian, directory / EXPORTED)


def build_runs(system: str, args, batches, directory: Path, ct2_runner,
               marian_tokens: list[str]) -> dict[tuple[str, int], object]:
    """{(system, beam): run} for greedy and beam 4; `ct2_runner` is decode_speed's CTranslate2 runner,
    `marian_tokens` the converted Marian's token strings by id."""
    import ctranslate2

    folder, tokens = directory / "ct2", marian_tokens
    if system in (SYSTEM, SYSTEM_INT8):
        folder, tokens = directory / EXPORTED, exported_tokens(args.vocab)
    compute = "float32" if system == SYSTEM else "int8"
    device = "cuda" if getattr(args, "device", "cpu").startswith("cuda") else "cpu"  # decode_speed.py --device
    translator = ctranslate2.Translator(str(folder), device=device, compute_type=compute,
                                       intra_threads=args.threads, inter_threads=1)
    return {(system, beam): ct2_runner(translator, tokens, batches, beam, args.new_tokens) for beam in (1, 4)}
