"""The seeds of the tests' models, shifted by CLEARFORMER_TEST_SEED (a whole number, default 0).

A test passes on any CPU and any seed, or it is wrong: `CLEARFORMER_TEST_SEED=1 pytest` trains every model of
the suite from other starting weights and other batches (CI runs the training folders' quick subset once more
with 1, .ci/run). tests/conftest.py checks the value (a bad one stops the session in one line) and documents
it; this module is where the fixtures, the helpers and the tests that train read it, so that the folders'
helper modules (which cannot import the root conftest: pytest imports every folder's conftest as `conftest`)
take the one value.

    seed(base)       base + the shift: the seed a test gives a training or a random model
    seed_args(base)  ["--seed", str(seed(base))]: the flag for `train`, `lm train` and their child processes;
                     base 1 is the commands' own default, so the shift 0 trains what the command alone trains
"""

from __future__ import annotations

import os

VARIABLE = "CLEARFORMER_TEST_SEED"
RAW = os.environ.get(VARIABLE, "0").strip()
TEST_SEED = int(RAW) if RAW.isdigit() else 0  # tests/conftest.py refuses anything but a whole number >= 0
TRAIN_DEFAULT_SEED = 1  # `train --seed` and `lm train --seed` default (train/options.py LoopOptions.seed)


def valid() -> bool:
    return RAW.isdigit() and len(RAW) <= 18  # below torch's largest seed with any base added


def seed(base: int = TRAIN_DEFAULT_SEED) -> int:
    return base + TEST_SEED


def seed_args(base: int = TRAIN_DEFAULT_SEED) -> list[str]:
    return ["--seed", str(seed(base))]
