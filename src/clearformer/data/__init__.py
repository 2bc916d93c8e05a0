"""Corpora: reproducible recipes (Debian gettext catalogues, two Bibles), user corpora, batching.

`clearformer data build NAME` writes `train.tsv` / `valid.tsv` / `test.tsv` (source TAB target) and
a `manifest.json` under `default_data_dir(NAME)` (see `paths.py`); the other commands find them there.
"""
