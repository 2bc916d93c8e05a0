"""clearformer.allocator: freed blocks stay in the process, so repeated decoding faults in no new pages."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# Decodes the same batch with beam search, once to grow the heap to its working size, then three times
# more; prints whether malloc was tuned and the fewest minor page faults of those three runs (now and
# then one run grows the heap once more, by one 4 MB block: ~1,000 faults, and never again).
WARM_RUN_FAULTS = """
import resource, torch
from clearformer.allocator import keep_freed_memory
from clearformer.config import preset
from clearformer.generate import beam_search
from clearformer.model.transformer import Transformer

tuned = keep_freed_memory()
assert keep_freed_memory() == tuned  # a second call changes nothing
torch.manual_seed(0)
torch.set_num_threads(1)
model = Transformer(preset("toy-translate", src_vocab_size=8000, tgt_vocab_size=8000, dropout=0.0)).eval()
src = torch.randint(4, 8000, (32, 12))
beam_search(model, src, beam=4, max_new=12, min_length=12)
faults = []
for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    beam_search(model, src, beam=4, max_new=12, min_length=12)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(tuned, min(faults))
"""


def warm_run_faults(malloc: str | None) -> tuple[bool, int]:
    env = {key: value for key, value in os.environ.items() if key != "CLEARFORMER_MALLOC"}
    if malloc is not None:
        env["CLEARFORMER_MALLOC"] = malloc
    out = subprocess.run([sys.executable, "-c", WARM_RUN_FAULTS], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(not GLIBC, reason="tunes glibc malloc only")
def test_tuned_malloc_reuses_freed_memory_where_the_default_faults_pages_in():
    tuned, faults = warm_run_faults(None)
    default, default_faults = warm_run_faults("system")
    assert tuned and not default
    # The 4 MB logits and the regrown caches come back from the heap: (almost) no new pages. glibc's
    # defaults hand some of them back to the kernel, so the same run faults thousands of pages in.
    assert faults < 100, faults
    assert default_faults > 10 * max(faults, 100), (faults, default_faults)


def test_opting_out_leaves_malloc_alone(monkeypatch):
    from clearformer import allocator

    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.setenv("CLEARFORMER_MALLOC", "system")
    assert allocator.keep_freed_memory() is False


def test_the_command_tunes_malloc_at_start(monkeypatch):
    from clearformer import cli

    calls = []
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: calls.append(True) or True)
    assert cli.main(["info"]) == 0
    assert calls == [True]
