"""CTranslate2 as a decoding engine of `clearformer translate` / `evaluate` (`--engine ctranslate2`).

    RUN/ctranslate2/        the run's model converted for CTranslate2 (float32 weights)
    RUN/ctranslate2-int8/   the same, weights quantized to int8 (`--quantize int8`)

The first use exports the run (`clearformer export --to ctranslate2`'s own path: a Marian folder, then
CTranslate2's converter) into a temporary folder inside RUN and renames it into place; later uses load
it. Each exported folder records the SHA-256 of the run's model.safetensors in `clearformer-export.json`:
when the run's weights change (training resumed, `average`), the next use exports again and replaces
the folder, which is clearformer's own derived copy and holds nothing else.

What is the same as the PyTorch path, and what is not:

* Tokenization: the source ids are `tokenize.encode_source`'s (the ids clearformer's own encoder reads,
  <eos> included), handed to CTranslate2 as their vocabulary strings; its output strings are mapped
  back to ids and decoded by the run's tokenizer.
* Length rule: each sentence may generate its source length + max_extra tokens, at most max_len.
  CTranslate2 takes one limit per call, so sentences are grouped by source length.
* Length penalty: clearformer divides a finished hypothesis' log-probability by ((5 + len) / 6)^alpha
  (GNMT) and stops a sentence once no live beam beats its best finished one; CTranslate2 divides by
  len^beta and searches until `beam` hypotheses have finished. No beta reproduces the first with the
  second. Measured on the trained toy translator (docs/ctranslate2.md, "Length penalty"), beta = 0 gives
  clearformer's beam-4 translations at alpha 0.6, 1 and 2 for all but one test sentence, and every
  beta > 0 tried (0.5 to 2, and alpha * L / (5 + L), the beta with GNMT's slope in log-length at the
  source length L) changes several more, for the worse. So the engine runs beta = 0, which is
  clearformer's alpha = 0 exactly (the tests hold the two engines token-identical there; without a
  length penalty a score only falls as a hypothesis grows, so both stop rules are the same rule).
* Not in CTranslate2: the brevity penalty (`generate/brevity.py`) and the placeholder constraint,
  which masks logits step by step. For placeholders the engine asks for the n best hypotheses (n =
  the beam; greedy sentences that lose a placeholder are decoded again with beam 4) and keeps the best
  one whose placeholder pieces are exactly the source's (docs/ctranslate2.md measures it).

The engine takes the DecodingOptions object and refuses, by name and in one line, a choice it cannot
honour (`check_options`): --alpha other than 0 with a beam, --brevity other than 0, min_length, and
--compile on (which compiles clearformer's own decoder). The commands decode with the engine's own
alpha 0 and brevity 0 unless the user gave them (`with_engine_defaults`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.glossary import TermBatch
from clearformer.generate.options import PAPER_MAX_EXTRA, DecodingOptions, search_tokens
from clearformer.generate.result import Translation
from clearformer.generate.source import Pieces
from clearformer.generate.translator import (
    DEFAULT_SETTINGS,
    EngineSettings,
    Progress,
    Rater,
    Reading,
    check_threads,
    per_input_progress,
    records,
)
from clearformer.glossary import Glossary
from clearformer.interop.ctranslate2 import convert_marian_folder
from clearformer.interop.hf import require
from clearformer.interop.marianmt import check_exportable, export_marian
from clearformer.limits import MAX_JSON_FILE_BYTES
from clearformer.store import lock
from clearformer.store.atomic import atomic_write_text
from clearformer.store.checkpoint import WEIGHTS_FILE
from clearformer.store.fixed import open_fixed, read_fixed, what_stands
from clearformer.store.safeio import loads_json

QUANTIZE = ("none", "int8")
STAMP = "clearformer-export.json"  # the manifest: the run's weights hash and every file written, with its hash
MAX_MANIFEST_BYTES = 1024 * 1024
CONVERTER_FILES = ("model.bin", "config.json", "shared_vocabulary.json", "source.spm", "target.spm")
RETRY_BEAM = 4  # greedy sentences that lost a placeholder are decoded again with this beam
LENGTH_PENALTY = 0.0  # CTranslate2's beta: clearformer's alpha = 0 (module docstring: the closest measured)
# What the engine decodes by where the user chose nothing: the only alpha and brevity it honours.
ENGINE_DEFAULTS = {"alpha": 0.0, "brevity": 0.0}


def with_engine_defaults(options: DecodingOptions, given: set[str] | frozenset[str] = frozenset()) -> DecodingOptions:
    """`options` with the engine's alpha and brevity (ENGINE_DEFAULTS) for the fields not in `given`
    (the ones the user chose: those are kept, and `check_options` refuses them if the engine cannot)."""
    return options.but(**{name: value for name, value in ENGINE_DEFAULTS.items() if name not in given})


def check_options(options: DecodingOptions) -> DecodingOptions:
    """`options`, checked, or a one-line UserError naming the first choice CTranslate2 cannot honour."""
    options.check()
    if options.beam > 1 and options.alpha != 0:
        raise UserError(f"--alpha {options.alpha:g}: the CTranslate2 engine has no GNMT length penalty (it "
                        f"decodes as --alpha 0); give --alpha 0, or --engine pytorch")
    if options.brevity != 0:
        raise UserError(f"--brevity {options.brevity:g}: the CTranslate2 engine has no brevity penalty; give "
                        f"--brevity 0, or --engine pytorch")
    if options.min_length:
        raise UserError(f"min_length {options.min_length}: the CTranslate2 engine does not take it; use the "
                        f"PyTorch engine")
    if options.compile == "on":
        raise UserError("--compile on: compiles clearformer's own decoder, which the CTranslate2 engine does "
                        "not run; leave it at auto, or --engine pytorch")
    return options


def export_folder(run: Path, quantize: str) -> Path:
    return run / ("ctranslate2" if quantize == "none" else f"ctranslate2-{quantize}")


def file_digest(path: Path) -> str:
    """SHA-256 of the regular file at `path`, read without following a link (store/fixed.py)."""
    digest = hashlib.sha256()
    handle = open_fixed(path, os.O_RDONLY)
    with os.fdopen(handle, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def weights_digest(run: Path) -> str:
    """SHA-256 of the run's weights (the user's run: read where it is, as every command reads it)."""
    digest = hashlib.sha256()
    with open(run / WEIGHTS_FILE, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def foreign(folder: Path, why: str) -> UserError:
    return UserError(f"{folder}: {why}, so clearformer did not write it and never replaces it; move it away "
                     f"(`--engine ctranslate2` exports the run into this name)")


def export_state(folder: Path, digest: str) -> str:
    """"absent", "fresh" (the export matches its manifest and the run's weights) or "stale" (clearformer's own
    export, of other weights or damaged: exported again); a UserError for anything clearformer did not write.

    The manifest (STAMP) lists every file the export wrote with its SHA-256: a file added to the folder
    makes it foreign (never deleted), a listed file changed or missing makes it stale."""
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return "absent"
    if not stat.S_ISDIR(mode):
        raise foreign(folder, f"{what_stands(mode) if not stat.S_ISREG(mode) else 'a file'} stands at the name of "
                              f"the run's CTranslate2 export")
    data = read_fixed(folder / STAMP, MAX_MANIFEST_BYTES)
    if data is None:
        raise foreign(folder, f"it holds no {STAMP}")
    try:
        manifest = loads_json(data, str(folder / STAMP))
    except UserError:
        raise foreign(folder, f"its {STAMP} is not the manifest clearformer writes") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    entries = sorted(set(os.listdir(folder)) - {STAMP})
    if files is None and isinstance(manifest, dict) and "weights_sha256" in manifest:
        files = dict.fromkeys(CONVERTER_FILES, "")  # an export from before manifests listed files: re-exported
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise foreign(folder, f"its {STAMP} is not the manifest clearformer writes")
    extra = [name for name in entries if name not in files]
    if extra:
        raise foreign(folder, f"it holds {extra[0]}" + (f" and {len(extra) - 1} more" if len(extra) > 1 else ""))
    for name in entries:
        mode = os.lstat(folder / name).st_mode
        if not stat.S_ISREG(mode):
            raise foreign(folder, f"{what_stands(mode)} stands at its {name}")
    if manifest.get("weights_sha256") != digest or set(entries) != set(files):
        return "stale"
    return "fresh" if all(file_digest(folder / name) == files[name] for name in entries) else "stale"


def ensure_exported(run: Path, model, tokenizer, quantize: str = "none") -> tuple[Path, bool]:
    """(RUN/ctranslate2[-int8], whether it was exported now): reused while its manifest matches the files and
    the run's weights, else exported into a temporary folder in RUN and renamed into place, holding the run's
    lock (store/lock.py) while it writes."""
    if quantize not in QUANTIZE:
        raise UserError(f"--quantize must be one of {', '.join(QUANTIZE)}, not {quantize!r}")
    folder = export_folder(run, quantize)
    digest = weights_digest(run)
    if export_state(folder, digest) == "fresh":
        return folder, False
    try:
        check_exportable(model.config, tokenizer)
    except UserError as error:
        raise UserError(f"--engine ctranslate2: {error}") from None
    locked_here = not lock.holds(run)
    lock.acquire(run, "--checkpoint")  # no export into a run another command is writing
    try:
        if export_state(folder, digest) == "fresh":  # another process exported it meanwhile
            return folder, False
        export_into(run, folder, model, tokenizer, quantize, digest)
    finally:
        if locked_here:
            lock.release(run)
    return folder, True


def export_into(run: Path, folder: Path, model, tokenizer, quantize: str, digest: str) -> None:
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=run))
    except OSError as error:
        raise UserError(f"cannot write the CTranslate2 export into {run} ({error.strerror or error})") from None
    try:
        with tempfile.TemporaryDirectory(prefix="clearformer-marian-") as marian, quiet_transformers():
            export_marian(model, tokenizer, Path(marian) / "marian")
            converted = convert_marian_folder(Path(marian) / "marian", staging / "model",
                                              None if quantize == "none" else quantize)
        files = {path.name: file_digest(path) for path in sorted(converted.iterdir())}
        atomic_write_text(converted / STAMP, json.dumps({"weights_sha256": digest, "quantize": quantize,
                                                         "files": files}, indent=1) + "\n")
        replace_folder(converted, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def quiet_transformers():
    """The converter loads the Marian folder with Transformers: no progress bars or advice on stderr."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()


def replace_folder(new: Path, folder: Path) -> None:
    """Rename `new` to `folder`; a stale `folder` (our own earlier export) is moved aside, then deleted."""
    old = None
    if folder.exists():
        old = new.parent / "stale"
        folder.rename(old)
    try:
        new.rename(folder)
    except OSError as error:
        raise UserError(f"{folder}: cannot be replaced ({error.strerror or error})") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def engine_error(folder: Path, error: BaseException) -> UserError:
    """CTranslate2's error (C++ or Python, often several lines) as one line naming the folder."""
    first = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
    return UserError(f"{folder}: CTranslate2 cannot use it ({first[:200]}); delete the folder to export again")


def compute_type(settings: EngineSettings) -> str:
    return "float32" if settings.quantize == "none" else settings.quantize


class CTranslate2Engine:
    """A run's exported model in a `ctranslate2.Translator`: source ids in, output ids out."""

    def __init__(self, folder: Path, tokenizer, max_len: int, settings: EngineSettings = DEFAULT_SETTINGS) -> None:
        ctranslate2 = require("ctranslate2", "--engine ctranslate2")
        try:  # whatever the engine's C++ says about a damaged folder (garbage, a newer format): one line
            self.translator = ctranslate2.Translator(str(folder), device="cpu", compute_type=compute_type(settings),
                                                     intra_threads=settings.threads or torch.get_num_threads(),
                                                     inter_threads=1)
        except (RuntimeError, ValueError, OSError) as error:
            raise engine_error(folder, error) from None
        vocabulary = folder / "shared_vocabulary.json"
        tokens = loads_json(read_fixed(vocabulary, MAX_JSON_FILE_BYTES) or b"null", str(vocabulary))
        if not isinstance(tokens, list) or not all(isinstance(token, str) for token in tokens):
            raise UserError(f"{vocabulary}: not a CTranslate2 vocabulary (a JSON list of strings): delete "
                            f"{folder} to export again")
        if len(tokens) != len(tokenizer):
            raise UserError(f"{folder}: {len(tokens)} tokens, but the run's tokenizer has {len(tokenizer)}: "
                            f"delete the folder to export again")
        self.folder = folder
        self.tokens = tokens
        self.ids = {token: index for index, token in enumerate(tokens)}
        self.tokenizer = tokenizer
        self.max_len = max_len
        self.placeholder_ids = frozenset(tokenizer.placeholder_ids)

    def translate_ids(self, sources: list[list[int]], options: DecodingOptions | None = None,
                      progress: Callable[[int], None] | None = None) -> list[str]:
        """Source ids -> one translation per source, in order (an empty source -> "").
        options: default DecodingOptions() with the engine's alpha and brevity; a choice the engine cannot
        honour is a one-line UserError (`check_options`)."""
        options = check_options(options if options is not None else with_engine_defaults(DecodingOptions()))
        beam, placeholders, batch_size = options.beam, options.placeholders == "exact", options.batch_size
        outputs = [""] * len(sources)
        groups: dict[int, list[int]] = {}
        for index, ids in enumerate(sources):
            if ids:
                groups.setdefault(len(ids), []).append(index)
            elif progress is not None:
                progress(1)
        for length in sorted(groups, reverse=True):
            members = groups[length]
            for start in range(0, len(members), batch_size):
                chunk = members[start: start + batch_size]
                extra = PAPER_MAX_EXTRA if options.max_extra is None else options.max_extra
                limit = options.max_new if options.max_new is not None else length + extra
                decoded = self.decode_group([sources[i] for i in chunk], beam, max(1, min(limit, self.max_len)),
                                            placeholders)
                for index, ids in zip(chunk, decoded, strict=True):
                    outputs[index] = self.tokenizer.decode(ids)
                if progress is not None:
                    progress(len(chunk))
        return outputs

    def decode_group(self, sources: Sequence[list[int]], beam: int, limit: int, placeholders: bool) -> list[list[int]]:
        """Sources of one length -> output ids (without <eos>), the best hypothesis that keeps the
        source's placeholder pieces where one of the n best does."""
        check = placeholders and bool(self.placeholder_ids)
        hypotheses = self.run(sources, beam, LENGTH_PENALTY, limit,
                              beam if check else 1)
        chosen = [self.pick(source, options, check) for source, options in zip(sources, hypotheses, strict=True)]
        if check and beam == 1:  # greedy has one hypothesis: a sentence that lost a placeholder gets RETRY_BEAM
            lost = [i for i, source in enumerate(sources) if not self.keeps(source, chosen[i])]
            if lost:
                again = self.run([sources[i] for i in lost], RETRY_BEAM, LENGTH_PENALTY, limit, RETRY_BEAM)
                for i, options in zip(lost, again, strict=True):
                    better = self.pick(sources[i], options, True)
                    if self.keeps(sources[i], better):
                        chosen[i] = better
        return chosen

    def run(self, sources: Sequence[list[int]], beam: int, penalty: float, limit: int,
            hypotheses: int) -> list[list[list[int]]]:
        """CTranslate2's translate_batch -> per source, its `hypotheses` best outputs as ids."""
        try:
            results = self.translator.translate_batch(
                [[self.tokens[i] for i in ids] for ids in sources], beam_size=beam, num_hypotheses=hypotheses,
                length_penalty=penalty, max_decoding_length=limit, min_decoding_length=0,
                max_batch_size=len(sources), return_scores=False)
            return [[[self.ids[token] for token in hypothesis] for hypothesis in result.hypotheses]
                    for result in results]
        except (RuntimeError, ValueError, KeyError) as error:
            raise engine_error(self.folder, error) from None

    def placeholder_counts(self, ids: Sequence[int]) -> Counter:
        return Counter(i for i in ids if i in self.placeholder_ids)

    def keeps(self, source: Sequence[int], output: Sequence[int]) -> bool:
        return self.placeholder_counts(source) == self.placeholder_counts(output)

    def pick(self, source: list[int], options: list[list[int]], check: bool) -> list[int]:
        if check:
            for output in options:
                if self.keeps(source, output):
                    return output
        return options[0]


def load_engine(run: Path, model, tokenizer, settings: EngineSettings) -> tuple[CTranslate2Engine, bool]:
    """(the engine for `run`, whether it was exported now)."""
    folder, exported = ensure_exported(run, model, tokenizer, settings.quantize)
    return CTranslate2Engine(folder, tokenizer, model.config.max_len, settings), exported


class CTranslate2Translator(Reading):
    """The `generate.translator.Translator` protocol over CTranslate2: the run exported once (RUN/ctranslate2,
    RUN/ctranslate2-int8), the pieces every front reads decoded by `CTranslate2Engine`."""

    name = "ctranslate2"
    enforces_glossary = False  # its own search: a glossary's terms missing are only noted

    def __init__(self, engine: CTranslate2Engine, model, tokenizer, settings: EngineSettings,
                 facts: DecodingFacts = NO_FACTS) -> None:
        self.engine, self.model, self.tokenizer, self.settings, self.facts = engine, model, tokenizer, settings, facts
        self.label = self.name if settings.quantize == "none" else f"{self.name} {settings.quantize}"
        self.described = f", engine {self.name} ({compute_type(settings)})"

    @classmethod
    def check_settings(cls, settings: EngineSettings) -> None:
        """What this engine cannot take, refused by name before any work."""
        if settings.quantize not in QUANTIZE:
            raise UserError(f"--quantize must be one of {', '.join(QUANTIZE)}, not {settings.quantize!r}")
        if settings.ablate:
            raise UserError("--ablate changes clearformer's own decoder; it does not apply to --engine ctranslate2")
        cores = os.cpu_count() or 1
        if settings.threads is not None and settings.threads > cores:
            # CTranslate2 starts all its threads at once, and a count the system refuses ends in a native abort
            # ("Thread creation failed"), not an error clearformer could catch.
            raise UserError(f"--threads {settings.threads}: --engine ctranslate2 starts that many threads at once; "
                            f"this machine has {cores} cores: give at most {cores}")
        check_threads(settings.threads)

    @classmethod
    def decoding(cls, options: DecodingOptions, given: set[str] | None = None) -> DecodingOptions:
        """The options CTranslate2 decodes by: the user's, with the engine's alpha and brevity (0) where the
        caller gave none (`given`: the fields chosen); a one-line error naming a choice it cannot honour."""
        return check_options(with_engine_defaults(options, set(given or ())))

    @classmethod
    def open(cls, model, tokenizer, directory: Path, settings: EngineSettings = DEFAULT_SETTINGS,
             said: Callable[[str], None] | None = None, facts: DecodingFacts = NO_FACTS) -> CTranslate2Translator:
        """The run's engine, exported first if needed (`said(line)` is told where, when it was)."""
        cls.check_settings(settings)
        folder, exported = ensure_exported(Path(directory), model, tokenizer, settings.quantize)
        if exported and said is not None:
            said(f"exported the run for CTranslate2 into {folder}")
        return cls(CTranslate2Engine(folder, tokenizer, model.config.max_len, settings), model, tokenizer, settings,
                   facts)

    def translate(self, inputs: Sequence[str] | Pieces, options: DecodingOptions | None = None,
                  progress: Progress | None = None, confidence: Rater | None = None,
                  glossary: Glossary | TermBatch | None = None) -> list[Translation]:
        """One `Translation` per input, as `PyTorchTranslator.translate`; checked pieces already fit max_len,
        unchecked ones (`evaluate`'s corpus) are cut to it. `options`: default the engine's (`decoding`).
        `confidence`: read back by clearformer's own model from the output re-encoded (CTranslate2 gives text).
        A `glossary` is not enforced by this engine: its terms missing are only noted (`translate` refuses it)."""
        options = check_options(options if options is not None else self.decoding(DecodingOptions()))
        pieces = self.pieces_of(inputs, options)
        max_len = self.model.config.max_len
        texts = self.engine.translate_ids([ids[:max_len] for ids in pieces.sources], options,
                                          progress=per_input_progress(progress, pieces.count, len(pieces.sources)))
        if confidence is not None:
            searched = [self.tokenizer.encode(text) if source else [] for text, source in
                        zip(texts, pieces.sources, strict=True)]
            tokens = search_tokens(self.model, self.tokenizer, options, self.facts)
            translations = records(pieces, texts, glossary)
            return confidence.rate(self.model, self.tokenizer, tokens, pieces, searched, translations)
        return records(pieces, texts, glossary)
