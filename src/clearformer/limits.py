"""The input limits, in one place: what clearformer refuses before it spends time or memory on it.

Each limit is far above any honest input and far below what would hang a laptop; going over one is
a one-line error (a `UserError` on the command line, a 413 from the server), never a slow death.
"""

from __future__ import annotations

# A sentence to translate or explain, in characters (checked before tokenizing; the model's own
# max_len, in tokens, is checked after). A sentence is a line, not a paragraph.
MAX_SENTENCE_CHARS = 2_000
# An error message quotes at most this many characters of the user's text, then an ellipsis.
MAX_QUOTED_CHARS = 200
# The server: a request body is one JSON object holding one sentence.
MAX_BODY_BYTES = 16 * 1024
# The server: explanations computed at once, and requests waiting for a worker beyond those
# (then 503 "busy": a full queue is refused at once instead of growing without bound).
SERVER_WORKERS = 2
SERVER_QUEUE = 64
# The server, for a language model: tokens generated (greedy) and explained per prompt, by default and at
# most (`serve --max-new-tokens`); each is one more pass over every layer in every answer.
SERVER_LM_NEW_TOKENS = 3
MAX_SERVER_LM_NEW_TOKENS = 32
# `clearformer check FILE`: a hand-worked example is a few matrices; 1 MiB is thousands of cells.
MAX_CHECK_FILE_BYTES = 1024 * 1024
