"""The input limits, in one place: what clearformer refuses before it spends time or memory on it.

Each limit is far above any honest input and far below what would hang a laptop; going over one is
a one-line error (a `UserError` on the command line, a 413 from the server), never a slow death.
The numbers live here; the options objects check their fields against them (clearformer/options.py).
Besides the numbers: the model-size and memory checks, and how an error quotes a user's text.
"""

from __future__ import annotations

import os
import resource

from clearformer.errors import UserError

# A sentence to translate or explain, in characters (checked before tokenizing; the model's own
# max_len, in tokens, is checked after). A sentence is a line, not a paragraph.
MAX_SENTENCE_CHARS = 2_000
# `clearformer learn check` / `learn train`: a learner's exercise file (a few hundred lines at most), read
# before any child process starts (learn/sandbox.py).
MAX_LEARNER_SOURCE_BYTES = 1024 * 1024
# An error message quotes at most this many characters of the user's text, then an ellipsis.
MAX_QUOTED_CHARS = 200
# The server: a request body is one JSON object holding one sentence.
MAX_BODY_BYTES = 16 * 1024
# The server's LibreTranslate API (serve/libretranslate.py): one request is a page of strings (Weblate sends
# its suggestions in batches): at most MAX_TRANSLATE_TEXTS texts of MAX_SENTENCE_CHARS, in a body of at most
# MAX_TRANSLATE_BODY_BYTES.
MAX_TRANSLATE_TEXTS = 128
MAX_TRANSLATE_BODY_BYTES = 512 * 1024
# The server: a client has this long to send a request's headers (from connecting, or from its first byte after
# an answer) and then its body (serve/deadline.py); a slower one is let go, so clients that hold requests
# half-sent cannot keep the server's sockets (issue 49: 1,100 held for 60 s ran out of file descriptors).
REQUEST_HEADER_SECONDS = 10.0
REQUEST_BODY_SECONDS = 30.0
# The server: explanations computed at once, and requests waiting for a worker beyond those
# (then 503 "busy": a full queue is refused at once instead of growing without bound).
SERVER_WORKERS = 2
SERVER_QUEUE = 64
# The server, for a language model: tokens generated (greedy) and explained per prompt, by default and at
# most (`serve --max-new-tokens`); each is one more pass over every layer in every answer.
SERVER_LM_NEW_TOKENS = 3
MAX_SERVER_LM_NEW_TOKENS = 32
# The server: one answer (a walkthrough grows with layers x heads x tokens squared) is refused with 413
# above this, and the answers it keeps for repeated requests take at most SERVER_CACHE_BYTES in all.
MAX_ANSWER_BYTES = 8 * 1024 * 1024
SERVER_CACHE_BYTES = 64 * 1024 * 1024
# `clearformer check FILE`: a hand-worked example is a few matrices; 1 MiB is thousands of cells.
MAX_CHECK_FILE_BYTES = 1024 * 1024

# ----------------------------------------------------------------------------- files a user hands in
# Every file or stream is read through clearformer.store.safeio, which counts bytes while reading (a device,
# a FIFO or stdin has no size to stat), so going over one of these stops the read at the limit.
# Sentences to translate (--file, stdin): 2,000 characters a line, tens of thousands of lines.
MAX_TEXT_FILE_BYTES = 64 * 1024 * 1024
# A corpus file (train --tsv/--src/--tgt, a corpus folder's splits, evaluate --data, lm train --corpus):
# the largest built corpus is some 10 MB; a billion-word corpus is not a laptop's.
MAX_CORPUS_FILE_BYTES = 256 * 1024 * 1024
# A JSON file (config.json, meta.json, tokenizer.json, trainer_state.json, an import's vocab.json...):
# GPT-2's vocab.json is 1 MB, a 64k-word tokenizer.json a few MB.
MAX_JSON_FILE_BYTES = 64 * 1024 * 1024
# How deeply a JSON document may nest: clearformer's own files nest 4 deep; Python's parser overflows
# its stack near 1,000.
MAX_JSON_DEPTH = 64
# A tokenizer model file (tokenizer.model, source.spm, target.spm, merges.txt): Marian's are under 1 MB.
MAX_TOKENIZER_FILE_BYTES = 64 * 1024 * 1024
# runs/LATEST holds one path.
MAX_POINTER_FILE_BYTES = 4096

# ----------------------------------------------------------------------------- numbers on the command line
# Each is the bound of an options field (clearformer/options.py: `check()` refuses it in code and on the
# command line alike) or of a command's own flag (commands/options.py: --threads).
MAX_BEAM = 64              # the paper uses 4; each beam is one more decoder row per step
MAX_BEAM_SHOWN = 16        # `explain --beam`: a search tree wider than this is no longer readable
MAX_THREADS = 1024         # torch aborts (libgomp) or crashes far above any machine's core count
MAX_BATCH_SIZE = 4096      # sentences (or windows) per batch
MAX_NEW_TOKENS = 4096      # tokens generated or added past the source (--max-new-tokens, --max-extra)
MAX_SEED = 2**63 - 1       # what torch.manual_seed accepts
MAX_ALPHA = 10.0           # GNMT's length penalty exponent: the paper uses 0.6, GNMT searched [0, 1]
MIN_TEMPERATURE = 1e-3     # below this softmax(logits / T) is argmax (use --greedy) or overflows
MAX_TEMPERATURE = 100.0    # above this every token is equally likely

# `attribute` (explain/attribution.py): integrated gradients run one forward and backward pass per path point
# and target token (a row). The work is estimated from the sizes before it starts and refused above either
# bound, about two minutes of a laptop CPU: rows x tokens (measured on the toy model, whose small products
# cost per token; the measurement is in docs/reliability.md, "Limits")
# and floating-point operations (larger models). The activations of one pass stay under
# ATTRIBUTION_PASS_BYTES (fewer rows a pass for long sentences and large vocabularies).
MAX_ATTRIBUTION_ROW_TOKENS = 3_000_000
MAX_ATTRIBUTION_FLOPS = 10e12
ATTRIBUTION_PASS_BYTES = 512 * 1024 * 1024

# ----------------------------------------------------------------------------- model sizes
# Checked on every config before a tensor is allocated (clearformer.limits.check_model_size): run folders,
# imported Marian and GPT-2 configs, `train --set`. Far above the paper's big model (d_model 1024,
# 6 + 6 layers, d_ff 4096, 37k tokens) and GPT-2 XL (1600, 48 layers, 50k tokens).
MAX_D_MODEL = 16_384
MAX_D_FF = 131_072
MAX_HEADS = 1_024
MAX_LAYERS = 256
MAX_VOCAB = 1_048_576
MAX_LEN = 1_048_576
# A model whose float32 weights (and position table) would take more than this share of the machine's
# memory is refused, naming both figures.
MAX_MEMORY_SHARE = 0.8


def parameter_bytes(config) -> int:
    """float32 bytes of the weights (and the sinusoidal table) a config describes, from its sizes alone.

    An estimate from above for every architecture (MLA's projections are smaller than MHA's)."""
    d, ff = config.d_model, config.d_ff
    layers_enc, layers_dec = config.n_encoder_layers, config.n_decoder_layers
    embeddings = (config.src_vocab_size + 2 * config.tgt_vocab_size) * d + config.max_len * d
    per_encoder = 4 * d * d + 2 * d * ff + 8 * d + ff
    per_decoder = 8 * d * d + 2 * d * ff + 12 * d + ff
    return 4 * (embeddings + layers_enc * per_encoder + layers_dec * per_decoder)


def machine_memory_bytes() -> int:
    """The memory this process may use: physical memory, or a lower address-space limit (ulimit -v)."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 1 << 62
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        memory = min(memory, soft)
    return memory


def check_model_size(config, where: str = "config") -> None:
    """A UserError naming the field (or the memory figure) when a config's sizes are out of bounds.

    Called on every config before its model is built: run folders (clearformer.load.load_model), imported
    Marian and GPT-2 configs, `train --set` and `lm train`. Sizes must be positive (layers may be 0 on one
    side) and under the MAX_ limits; then the weights' estimated bytes must fit in the machine's memory."""
    fields = {"d_model": (1, MAX_D_MODEL), "d_ff": (1, MAX_D_FF), "n_heads": (1, MAX_HEADS),
              "n_encoder_layers": (0, MAX_LAYERS), "n_decoder_layers": (1, MAX_LAYERS),
              "src_vocab_size": (0, MAX_VOCAB), "tgt_vocab_size": (1, MAX_VOCAB), "max_len": (1, MAX_LEN),
              "n_kv_heads": (1, MAX_HEADS), "kv_lora_rank": (0, MAX_D_MODEL), "q_lora_rank": (0, MAX_D_MODEL),
              "qk_nope_head_dim": (0, MAX_D_MODEL), "qk_rope_head_dim": (0, MAX_D_MODEL),
              "v_head_dim": (0, MAX_D_MODEL)}
    for name, (low, high) in fields.items():
        value = getattr(config, name, None)
        if value is None or isinstance(value, bool) or not isinstance(value, int):
            continue
        if not low <= value <= high:
            raise UserError(f"{where}: {name}={value} is out of range: clearformer builds {low} to {high:,} "
                            f"(clearformer.limits)")
    needed, available = parameter_bytes(config), machine_memory_bytes()
    if needed > MAX_MEMORY_SHARE * available:
        raise UserError(f"{where}: the model's weights need about {needed / 2**30:,.1f} GiB, more than "
                        f"{MAX_MEMORY_SHARE:.0%} of this machine's {available / 2**30:,.1f} GiB of memory")


# ----------------------------------------------------------------------------- a user's text in a message


def shorten(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """`text` if short, else its first `limit` characters and an ellipsis saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters in all)"


def has_surrogates(text: str) -> bool:
    """Whether `text` holds lone surrogates: how Python carries bytes that were not UTF-8 (argv, stdin)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def require_utf8(name: str, text: str | None) -> None:
    """A UserError when a text argument (a sentence, a prompt) was not UTF-8 on the command line."""
    if text is not None and has_surrogates(text):
        raise UserError(f"{name}: not UTF-8 text")
