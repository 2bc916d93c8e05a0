"""`clearformer neighbors`: the tokens nearest to a word in the learned embedding (cosine similarity).

    clearformer neighbors cat                      tokens whose vectors point the way "cat"'s does
    clearformer neighbors --analogy king man woman  tokens nearest to king - man + woman

The seeds say "similar words cluster together" in the embedding space; this shows which words a
trained model put together. Cosine similarity compares directions only:
cos(u, v) = u . v / (|u| |v|), from -1 (opposite) through 0 (unrelated) to 1 (same direction).
"""

from __future__ import annotations

import torch

from clearformer.commands import options
from clearformer.errors import UserError
from clearformer.load import load_model
from clearformer.store.runs import resolve_checkpoint


def embedding_matrix(model, side: str) -> torch.Tensor:
    """The (vocab, d_model) token embedding table of the encoder ("source") or decoder ("target")."""
    table = model.embedding_table(side)
    if table is None:
        raise UserError("this checkpoint has no encoder: use --side target")
    return table.detach()


def cosine_neighbors(matrix: torch.Tensor, query: torch.Tensor, top: int,
                     exclude: set[int] = frozenset()) -> list[tuple[int, float]]:
    """The `top` rows of matrix (vocab, d) most cosine-similar to query (d,), best first, as (row, cos).

    Rows in `exclude` and all-zero rows (the <pad> embedding) are skipped.
    """
    norms = matrix.norm(dim=1)
    similarity = (matrix @ query) / (norms * query.norm()).clamp_min(1e-12)
    similarity = similarity.masked_fill(norms == 0, float("-inf"))
    if exclude:
        similarity[torch.tensor(sorted(exclude), dtype=torch.long)] = float("-inf")
    count = min(top, int(torch.isfinite(similarity).sum()))
    values, rows = similarity.topk(count)
    return [(int(row), float(value)) for row, value in zip(rows, values, strict=True)]


def analogy_vector(matrix: torch.Tensor, a: int, b: int, c: int) -> torch.Tensor:
    """a - b + c on unit-length vectors (king - man + woman), as word2vec's analogy test does."""
    unit = matrix / matrix.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return unit[a] - unit[b] + unit[c]


def token_id(tokenizer, word: str) -> int:
    """The id of `word` as one token of the vocabulary; a UserError if it has none."""
    ids = tokenizer.encode(word)
    if ids == [tokenizer.unk_id]:  # a word vocabulary without it (a subword one spells it in pieces)
        raise UserError(f"{word!r} is not in the model's vocabulary")
    if len(ids) != 1:
        pieces = ", ".join(repr(tokenizer.id_to_token(i)) for i in ids)
        raise UserError(f"{word!r} is not one token of the vocabulary (it splits into {pieces or 'nothing'})")
    return ids[0]


def run(args) -> int:
    if args.top < 1:
        raise UserError(f"--top must be at least 1, not {args.top}")
    if bool(args.word) == bool(args.analogy):
        raise UserError("give one WORD, or --analogy A B C (not both)")
    model, tokenizer, _ = load_model(resolve_checkpoint(args.checkpoint))
    side = args.side or ("source" if model.config.n_encoder_layers > 0 else "target")
    matrix = embedding_matrix(model, side).float()
    if matrix.shape[0] != len(tokenizer):
        raise UserError(f"the {side} embedding has {matrix.shape[0]} rows but the tokenizer "
                        f"{len(tokenizer)} tokens")
    words = args.analogy or [args.word]
    ids = [token_id(tokenizer, word) for word in words]
    specials = {tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id}
    if len(ids) == 3:
        query = analogy_vector(matrix, *ids)
        title = f"{words[0]} - {words[1]} + {words[2]}"
    else:
        query = matrix[ids[0]]
        title = words[0]
        if not bool(query.any()):
            raise UserError(f"{words[0]!r} has an all-zero embedding (the padding token)")
    found = cosine_neighbors(matrix, query, args.top, exclude=set(ids) | specials)
    print(f"nearest to {title} ({side} embedding, cosine similarity):")
    width = max((len(tokenizer.id_to_token(row)) for row, _ in found), default=0)
    for rank, (row, value) in enumerate(found, start=1):
        print(f"{rank:3d}  {tokenizer.id_to_token(row):<{width}}  {value:+.3f}")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("neighbors",
                                   help="nearest tokens in the learned embedding (cosine similarity)",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("word", nargs="?", help="the token whose neighbours to list")
    parser.add_argument("--analogy", nargs=3, metavar=("A", "B", "C"),
                        help="tokens nearest to A - B + C (king man woman -> queen)")
    parser.add_argument("--top", type=int, default=10, metavar="N", help="how many neighbours (default 10)")
    parser.add_argument("--side", choices=("source", "target"),
                        help="the encoder's (default) or the decoder's embedding table")
    options.add_checkpoint(parser)
    parser.set_defaults(func=run)
