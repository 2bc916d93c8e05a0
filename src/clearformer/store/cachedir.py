"""Where clearformer keeps what it may recompute: one folder, or none.

    $CLEARFORMER_CACHE            if set: that folder ("off": no cache at all)
    $XDG_CACHE_HOME/clearformer   else, if XDG_CACHE_HOME is set
    ~/.cache/clearformer          else

It holds `matmul_peak.json` (this machine's measured matrix-product peak, for `train`'s MFU figure:
clearformer.train.mfu), `matplotlib/` (matplotlib's font cache, which it would otherwise keep in
~/.cache/matplotlib) and, once `--compile on` has compiled a step, `inductor/`
(torch.compile's compiled kernels and precompiled headers, which PyTorch would otherwise keep in
/tmp/torchinductor_USER; kept so that a second run does not compile again) and, on a GPU, `triton/`
(Triton's kernels, otherwise in ~/.triton), and `toy-translate/`, the lessons' toy model
(learn/toy.py: trained there on first use). Deleting it costs a second of re-measurement (and a
recompile). With CLEARFORMER_CACHE=off the peak is measured at every start, and matplotlib's and the
compiler's caches live in temporary folders removed at exit.
docs/reliability.md states the rule for users.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
from pathlib import Path

from clearformer.errors import UserError
from clearformer.store.fixed import what_stands

OFF = ("off", "none", "0")


def cache_root() -> Path | None:
    """The cache folder (not created here), or None when caching is off."""
    chosen = os.environ.get("CLEARFORMER_CACHE")
    if chosen:
        return None if chosen.strip().lower() in OFF else Path(chosen)
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "clearformer"


def cache_dir(name: str) -> Path:
    """The cache's sub-folder `name`; with caching off, a temporary folder removed when the process ends."""
    root = cache_root()
    if root is not None:
        return root / name
    folder = tempfile.mkdtemp(prefix=f"clearformer-{name}-")
    _temporary.append(folder)
    atexit.register(remove_temporary_folders)
    return Path(folder)


_temporary: list[str] = []


def check_cache_folder(root: Path) -> None:
    """The cache folder exists (made now if not) as a folder that takes a new file; one line naming
    CLEARFORMER_CACHE (or the default place) otherwise."""
    named = f"CLEARFORMER_CACHE={root}" if os.environ.get("CLEARFORMER_CACHE") else f"the cache folder {root}"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(f"{named}: is a file, not a folder; name a folder, or set CLEARFORMER_CACHE=off") from None
    except OSError as error:
        raise UserError(f"{named}: cannot be made ({error.strerror or error}); set CLEARFORMER_CACHE to a "
                        f"folder you can write, or CLEARFORMER_CACHE=off") from None
    if not root.is_dir():
        raise UserError(f"{named}: is not a folder; name a folder, or set CLEARFORMER_CACHE=off")
    try:
        handle, probe = tempfile.mkstemp(prefix=".probe-", dir=root)
    except OSError as error:
        raise UserError(f"{named}: cannot be written ({error.strerror or error}); set CLEARFORMER_CACHE to a "
                        f"folder you can write, or CLEARFORMER_CACHE=off") from None
    os.close(handle)
    os.unlink(probe)


def use_for_compiled_code() -> None:
    """Point every on-disk cache of torch.compile into this cache (or, when it is off, into temporary folders
    removed at exit), unless the user set the variable: Inductor's kernels (TORCHINDUCTOR_CACHE_DIR), Triton's
    (TRITON_CACHE_DIR, on a GPU) and Inductor's precompiled C++ headers, which PyTorch otherwise keeps in
    /tmp/torchinductor_USER whatever TORCHINDUCTOR_CACHE_DIR says. Call it before compiling."""
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir("inductor"))
    if "TRITON_CACHE_DIR" not in os.environ:
        os.environ["TRITON_CACHE_DIR"] = str(cache_dir("triton"))
    folder = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    try:
        from torch._inductor import codecache, config
        from torch._inductor.runtime import cache_dir_utils, runtime_utils
    except ImportError:  # a torch without Inductor compiles nothing to disk
        return
    # Inductor's "global" caches (precompiled headers, its key-value caches) ignore TORCHINDUCTOR_CACHE_DIR and
    # ask default_cache_dir(), which names tempfile.gettempdir()/torchinductor_USER: point it into the cache.
    for module in (cache_dir_utils, runtime_utils, codecache):
        if hasattr(module, "default_cache_dir"):
            module.default_cache_dir = lambda: folder
    headers = os.path.join(folder, "precompiled_headers")
    if hasattr(codecache, "_HEADER_DIR") and hasattr(codecache, "_HEADER_LOCK_DIR"):
        codecache._HEADER_DIR = headers  # fixed at import from default_cache_dir() (torch 2.5 to 2.13)
        codecache._HEADER_LOCK_DIR = os.path.join(headers, "locks")
    else:  # a torch that keeps them elsewhere: none at all rather than a folder outside the cache
        config.cpp_cache_precompile_headers = False


def remove_temporary_folders() -> None:
    """Remove the temporary folders of a cache that is off (at exit, also an interrupted one)."""
    while _temporary:
        shutil.rmtree(_temporary.pop(), ignore_errors=True)


def check_cache_entry(folder: Path, what: str, holds_run: bool, ours: bool, remedy: str = "move it away") -> bool:
    """True when the cache's `folder` holds the run (`holds_run`, read by the caller); False when nothing, or a
    folder clearformer may write into (`ours`: empty, or marked as its own), is there; a one-line UserError
    naming `what` and the `remedy` for anything else (a link, a file, a user's folder), which is never touched."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return False
    except OSError as error:
        raise UserError(f"{folder}: cannot be read ({error.strerror or error})") from None
    if not stat.S_ISDIR(mode):
        raise UserError(f"{folder}: {what_stands(mode)} stands where clearformer keeps {what}; "
                        f"{remedy}")
    if holds_run:
        return True
    if not ours and any(folder.iterdir()):
        raise UserError(f"{folder}: a folder clearformer did not make stands where it keeps {what}; "
                        f"it is left as it is: {remedy}")
    return False


PARTIAL_MARK = ".clearformer-partial"  # in every folder clearformer makes to build into, then rename


def make_marked(folder: Path) -> Path:
    """A new folder to build into, marked as clearformer's own (so that only it is ever removed); one line if
    something already stands at its name."""
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        raise UserError(f"{folder}: already exists and clearformer did not make it now; move it away") from None
    (folder / PARTIAL_MARK).write_text("a folder clearformer builds into, then renames (store/cachedir.py)\n")
    return folder


def remove_if_marked(folder: Path) -> None:
    """Remove `folder` if clearformer marked it (`make_marked`), or it is empty; anything else is left as it is."""
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return
        if (folder / PARTIAL_MARK).is_file() or not any(folder.iterdir()):
            shutil.rmtree(folder, ignore_errors=True)
    except OSError:
        return
