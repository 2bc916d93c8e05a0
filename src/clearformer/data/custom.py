"""`clearformer data build custom`: a user corpus, validated, deduplicated, split, with a manifest."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from clearformer.data.corpus import summary, write_parallel_corpus
from clearformer.data.deb import sha256_file
from clearformer.data.parallel import PathArg, read_parallel_counted

VALID_FRACTION = TEST_FRACTION = 0.02


def build(out: Path, inputs: PathArg | Sequence[PathArg], name: str = "custom", skip_bad: bool = False,
          valid_fraction: float = VALID_FRACTION, test_fraction: float = TEST_FRACTION,
          log: Callable[[str], None] = print) -> dict[str, int]:
    """Validate `inputs` (a TSV, or source and target files), then write train/valid/test.tsv + manifest."""
    files = [Path(inputs)] if isinstance(inputs, (str, Path)) else [Path(path) for path in inputs]
    log(f"reading {' + '.join(str(path) for path in files)}")
    read, skipped = read_parallel_counted(files[0] if len(files) == 1 else files, skip_bad, log)
    pairs = list(dict.fromkeys(read))
    manifest = {
        "name": name,
        "description": "a user corpus, validated (aligned lines, UTF-8, no empty side, sane lengths)",
        "source": {"files": [{"path": str(path), "sha256": sha256_file(path)} for path in files],
                   "format": "TSV: source TAB target" if len(files) == 1 else "two files aligned by line"},
        "cleaning": {"pairs_read": len(read), "bad_lines_skipped": skipped,
                     "duplicates_removed": len(read) - len(pairs)},
    }
    counts = write_parallel_corpus(out, pairs, manifest, valid_fraction, test_fraction)
    for split in ("valid", "test"):
        if counts[split] == 0 and (valid_fraction if split == "valid" else test_fraction) > 0:
            log(f"warning: the {split} split is empty: the corpus is small for a {split} fraction of "
                f"{valid_fraction if split == 'valid' else test_fraction}")
    log(summary(name, out, counts))
    return counts
