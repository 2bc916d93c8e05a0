"""Turn what the recorder saw into a walkthrough: an ordered list of labelled steps.

A `Walkthrough` is the one data structure every view reads: the terminal printer, `--format json`,
the figures and the web page. Each `Step` wraps one recorded tensor (batch item 0) as one or more
labelled matrices (one per head for per-head tensors), with the formula and one sentence that
explain it. Steps come in the order the model computed them, which is the seeds' order:
tokens -> ids -> embeddings -> + PE -> Q, K, V -> scores -> scaled -> softmax -> output -> concat
and W_O -> Add & Norm -> FFN -> ... -> decoder -> logits -> probabilities -> chosen token.

Generation runs the decoder with its key/value cache, so generation step t computes one new query
row: Q, scores and weights of step t are (heads, 1, keys). Each step shows what it computed; the
decoder's attention weights and masks are the exception: there the view shows every row so far
(the lower triangle of masked self-attention, the alignment of cross-attention), assembled from
the rows steps 0..t recorded (the same numbers), the newest row last.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

import torch

from clearformer.explain.claim_links import claim_link
from clearformer.record.trace import Record

# name suffix -> (title, formula, one sentence). Longest matching suffix wins.
CATALOG: dict[str, tuple[str, str, str]] = {
    "token_ids": ("Token ids", "ids = vocab[tokens]",
                  "Each token is replaced by its row number in the vocabulary."),
    "tokens.lookup": ("Embedding lookup", "E[ids]  (= one_hot(ids) · E)",
                      "Each id selects its row of the embedding table: a learned vector per token."),
    "tokens.scaled": ("Scaled embeddings", "E[ids] · √d_model",
                      "The paper multiplies embeddings by √d_model so positions do not drown them."),
    "PE": ("Positional encoding", "PE(pos,2i) = sin(pos/10000^(2i/d)),  PE(pos,2i+1) = cos(pos/10000^(2i/d))",
           "A fixed vector per position, so the model can tell word order apart."),
    "X": ("Input X = embedding + positional encoding", "X = E[ids] · √d_model + PE  (the scaled embeddings + PE)",
          "Adding the position vector gives each token a representation of what it is and where it is."),
    "Q": ("Queries Q", "Q = X · W^Q + b^Q  (per head: X · W_i^Q + b_i^Q)", "What each token is looking for."),
    "K": ("Keys K", "K = X · W^K + b^K", "What each token offers to the others."),
    "V": ("Values V", "V = X · W^V + b^V", "The information each token hands over when attended to."),
    "scores": ("Scores QKᵀ", "scores = Q · Kᵀ",
               "How well each query matches each key: one dot product per pair of tokens."),
    "scaled": ("Scaled scores", "scaled = Q · Kᵀ / √d_k",
               "Dividing by √d_k keeps the scores from growing with the width and saturating the softmax."),
    "mask": ("Mask", "mask[i, j] = 1 where position i may look at position j",
             "Blocked cells (padding, or future words in the decoder) get -∞ before the softmax."),
    "weights": ("Attention weights", "weights = softmax(scaled + mask)  (row by row)",
                "Each row becomes a probability distribution: how much each token attends to each other."),
    "head_outputs": ("Head output", "head_i = weights · V",
                     "Each token's output is the weighted average of the value vectors."),
    "concat": ("Concatenated heads", "Concat(head_1, ..., head_h)",
               "The heads' outputs side by side, back to d_model columns."),
    "attention.output": ("Multi-head output (× W^O)", "MultiHead = Concat(heads) · W^O",
                         "The output projection mixes what the heads found."),
    "latent": ("Latent c_KV (MLA)", "c_KV = X · W^DKV",
               "Multi-Head Latent Attention compresses keys and values of each token into one small vector; "
               "only it (and the RoPE key) is cached."),
    "K_rope": ("Decoupled RoPE key (MLA)", "k^R = RoPE(X · W^KR)",
               "One rotary key per token, shared by every head, carries the position."),
    "Q_rope": ("RoPE part of the queries (MLA)", "q^R = RoPE(c_Q · W^QR)", "Each head's rotary query part."),
    "K_nope": ("Keys from the latent (MLA)", "k^C = c_KV · W^UK", "Each head's keys, up-projected from the latent."),
    "Q_absorbed": ("Absorbed queries (MLA)", "q · W^UKᵀ",
                   "The key up-projection folded into the query, so scores are taken against the latent."),
    # The SSRU, a decoder layer's `recurrence` where others have self-attention (model/ssru.py; Firefox's students).
    "candidate": ("SSRU candidate", "x̃_t = x_t · W  (no bias)",
                  "What this position would write into the cell: a linear map of its input."),
    "forget_gate": ("SSRU forget gate", "f_t = σ(x_t · W_f + b_f)",
                    "Per dimension, how much of the old cell to keep (1) or to replace by the candidate (0)."),
    "cell": ("SSRU cell", "c_t = f_t ⊙ c_(t-1) + (1 − f_t) ⊙ x̃_t,   c_(-1) = 0",
             "The recurrent memory of the output so far: one vector per row, updated once per word, with no "
             "matrix on the state (it is all the decoder remembers of earlier words)."),
    "relu_cell": ("SSRU output", "h_t = ReLU(c_t)",
                  "What the decoder layer reads in place of self-attention's output, before Add & Norm."),
    "start": ("Start vector", "y_0 = 0  (then + PE(0))",
              "Marian's decoder starts from a zero vector instead of a <bos> embedding."),
    "residual": ("Residual sum", "x + Sublayer(x)",
                 "The sublayer's output is added to its input, so information and gradients flow through."),
    "norm": ("Layer normalisation", "LayerNorm(x) = γ (x - mean) / √(var + ε) + β",
             "Each token vector is rescaled to mean 0 and variance 1 (then scaled and shifted)."),
    "feed_forward.hidden": ("Feed-forward hidden layer", "h = max(0, x · W_1 + b_1)",
                            "Each position is expanded to d_ff dimensions through a ReLU, on its own."),
    "feed_forward.output": ("Feed-forward output", "FFN(x) = h · W_2 + b_2", "And projected back to d_model."),
    "encoder.output": ("Encoder output (memory)", "memory = Encoder(X)",
                       "The context-aware source vectors that every decoder layer attends to."),
    "decoder.output": ("Decoder output", "d = Decoder(Y, memory)",
                       "The target vectors, ready to be turned into word scores."),
    "logits": ("Logits", "logits = d · W_vocab + b", "One score per vocabulary word."),
    "probabilities": ("Probabilities", "p = softmax(logits)",
                      "The scores turned into a probability distribution over the vocabulary."),
    # The GRU baseline (model/rnn.py, `clearformer train --arch rnn`): its own names.
    "embed.lookup": ("Embedding lookup", "E[ids]",
                     "Each id selects its row of the embedding table (no positions: the recurrence knows the order)."),
    "decoder.states": ("GRU decoder state", "h_t = GRU(E[y_t], h_(t-1)),  h_0 = tanh(W_init · mean(memory))",
                       "The recurrent state after reading the newest word: one step per word, each waiting for "
                       "the step before."),
    "decoder.cross_attention.weights": (
        "Attention weights (alignment)", "a_t = softmax(h_t · W_a · memoryᵀ)  (Luong, 'general'; padding masked)",
        "Each row: how much the word being produced looks at each source word - the RNN's alignment."),
    "chosen": ("Chosen token", "next = argmax(p)  (greedy, within the decoding rules)",
               "The most probable word is emitted and fed back in. Two rules of `translate` may move it: <eos> "
               "scores w·(expected − length)² / expected lower while the translation is shorter than its "
               "source predicts (generate/brevity.py), and a placeholder of the source still owed comes "
               "before <eos> (generate/constraints.py)."),
}

# Hook points that repeat a neighbouring record (an Add & Norm's skip input is what the step before
# produced, a layer's output its last Add & Norm): there for experiments (`explain/why.py`), not shown as steps.
REPEATS = re.compile(r"(\.skip|\.layers\.\d+\.output)$")

PER_HEAD = {"Q", "K", "V", "scores", "scaled", "weights", "head_outputs", "Q_rope", "K_nope", "Q_absorbed"}
VOCAB_SIZED = {"logits", "probabilities"}
OUTPUT_LOGITS = "output.logits"  # the output projection's logits (model/transformer.py, OutputProjection)


def position_formula(config) -> str | None:
    """The PE step's formula for a model whose sinusoid is not the paper's (Marian's layout or timescales, e.g.
    Firefox's students); None for the paper's (CATALOG's) or no sinusoid."""
    if config.positional != "sinusoidal" or (config.position_layout, config.position_timescales) == (
            "interleaved", "paper"):
        return None
    exponent = "i/(d/2-1)" if config.position_timescales == "tensor2tensor" else "2i/d"
    if config.position_layout == "interleaved":
        return f"PE(pos,2i) = sin(pos/10000^({exponent})),  PE(pos,2i+1) = cos(pos/10000^({exponent}))"
    return (f"PE(pos,i) = sin(pos/10000^({exponent})),  PE(pos,d/2+i) = cos(pos/10000^({exponent}))  "
            f"(Marian's table: every sine, then every cosine)")


@dataclass
class Matrix:
    """A 2-D grid of numbers with labels; `head` is set for per-head matrices."""

    values: list[list[float]]
    row_labels: list[str]
    col_labels: list[str]
    head: int | None = None
    note: str = ""


@dataclass
class Step:
    id: str
    name: str  # the recorder's dotted name
    title: str
    formula: str
    explanation: str
    stage: str  # "input", "encoder", "decoder", "output", "example"
    layer: int | None = None
    sublayer: str | None = None  # "self_attention", "cross_attention", "feed_forward", ...
    decode_step: int | None = None
    kind: str = "matrix"  # "matrix", "attention", "distribution", "ids"
    matrices: list[Matrix] = field(default_factory=list)
    claim: dict | None = None  # the `clearformer claims` experiment about this step (explain/claim_links.py)


@dataclass
class Walkthrough:
    title: str
    source_tokens: list[str]
    target_tokens: list[str] = field(default_factory=list)
    result: str = ""
    steps: list[Step] = field(default_factory=list)
    # What computed it: "translation" (the encoder-decoder and the seeds' examples) or "lm" (decoder-only:
    # source_tokens are the prompt, target_tokens the prompt and then the generated tokens).
    model_kind: str = "translation"
    # A run that masks placeholders (tokenize/placeholders.py): the sentence the model reads and the
    # translation it wrote, before `result` got the placeholders back ("" when nothing was masked).
    masked_source: str = ""
    masked_result: str = ""
    # `--glossary`: the steps where a glossary term decided the token ([{"step", "token"}], generate/glossary.py)
    glossary_forced: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def find(self, name_suffix: str, decode_step: int | None = None) -> list[Step]:
        return [s for s in self.steps if s.name.endswith(name_suffix)
                and (decode_step is None or s.decode_step == decode_step)]

    def only(self, names: tuple[str, ...]) -> Walkthrough:
        """The same walkthrough with only the steps whose name ends with one of `names` (a last part
        such as "weights", or a longer suffix such as "self_attention.weights")."""
        wanted = tuple(names)
        steps = [s for s in self.steps if s.name.split(".")[-1] in wanted or s.name.endswith(wanted)]
        return replace(self, steps=steps)


def describe(name: str) -> tuple[str, str, str]:
    """(title, formula, sentence) for a recorded name, by its longest known suffix."""
    parts = name.split(".")
    for take in range(min(3, len(parts)), 0, -1):
        suffix = ".".join(parts[-take:])
        if suffix in CATALOG:
            return CATALOG[suffix]
        if take == 2 and parts[-1] == "output" and parts[-2].endswith("attention"):
            return CATALOG["attention.output"]
    return (parts[-1].replace("_", " ").capitalize(), "", "")


def _where(name: str) -> tuple[str, int | None, str | None]:
    """(stage, layer, sublayer) from a dotted name such as decoder.layers.1.cross_attention.weights."""
    stage = "input" if "embed" in name.split(".")[0] else name.split(".")[0]
    layer = None
    match = re.search(r"layers\.(\d+)\.([a-z_0-9]+)", name)
    sublayer = None
    if match:
        layer, sublayer = int(match.group(1)), match.group(2)
    if stage in ("output", "generate"):
        stage = "output"
    return stage, layer, sublayer


def _sequence(name: str, axis: str) -> str:
    """Which sequence ("source" or "target") the `axis` ("query" or "key") of tensor `name` runs over."""
    head = name.split(".")[0]
    if head in ("tgt_embed", "embed", "decoder", "output", "generate"):
        return "source" if axis == "key" and ".cross_attention." in name else "target"
    return "source"


def _labels_for(name: str, labels: dict[str, list[str]], length: int, axis: str) -> list[str]:
    """Token labels for a tensor axis of `length` entries (the last ones when decoding with a cache)."""
    tokens = labels.get(_sequence(name, axis), [])
    if len(tokens) >= length:
        return list(tokens[len(tokens) - length:])
    return [str(i) for i in range(length)]


def _grid(tensor: torch.Tensor) -> list[list[float]]:
    if tensor.dim() == 0:
        tensor = tensor.reshape(1, 1)
    if tensor.dim() == 1:
        tensor = tensor.unsqueeze(0)
    return [[float(x) for x in row] for row in tensor.double().tolist()]


def step_from_record(record: Record, labels: dict[str, list[str]], vocab: list[str] | None = None,
                     top: int = 10, index: int = 0) -> Step:
    """One walkthrough step from one record (batch item 0)."""
    name = record.name
    last = name.split(".")[-1]
    title, formula, sentence = describe(name)
    stage, layer, sublayer = _where(name)
    value = record.value
    step = Step(id=f"{index}:{name}" + (f"@{record.step}" if record.step is not None else ""), name=name,
                title=title, formula=formula, explanation=sentence, stage=stage, layer=layer, sublayer=sublayer,
                decode_step=record.step, claim=claim_link(name))
    if last in PER_HEAD and value.dim() == 4:  # (batch, heads, rows, cols)
        value = value[0]
        step.kind = "attention" if last in ("scores", "scaled", "weights") else "matrix"
        for head in range(value.shape[0]):
            rows = _labels_for(name, labels, value.shape[1], "key" if last in ("K", "V") else "query")
            if last in ("scores", "scaled", "weights"):
                cols = _labels_for(name, labels, value.shape[2], "key")
            else:
                cols = [f"d{j}" for j in range(value.shape[2])]
            step.matrices.append(Matrix(_grid(value[head]), rows, cols, head=head))
        return step
    if last == "mask" and value.dim() == 3:  # (batch, rows, cols) bool
        value = value[0].to(torch.float64)
        rows = _labels_for(name, labels, value.shape[0], "query")
        cols = _labels_for(name, labels, value.shape[1], "key")
        step.kind = "attention"
        step.matrices.append(Matrix(_grid(value), rows, cols, note="1 = may attend, 0 = blocked (-∞)"))
        return step
    if last == "token_ids":
        ids = value[0] if value.dim() == 2 else value
        step.kind = "ids"
        cols = _labels_for(name, labels, ids.shape[-1], "query")
        step.matrices.append(Matrix(_grid(ids.reshape(1, -1)), ["id"], cols))
        return step
    if last == "chosen":
        token = int(value.reshape(-1)[0])
        step.kind = "ids"
        word = vocab[token] if vocab and token < len(vocab) else str(token)
        step.matrices.append(Matrix([[float(token)]], ["chosen"], [word], note=word))
        return step
    if value.dim() == 3:
        value = value[0]
    if last in VOCAB_SIZED:
        step.kind = "distribution"
        row = value[-1] if value.dim() == 2 else value  # the position that predicts the next token
        k = row.numel() if top <= 0 else min(top, row.numel())
        order = torch.topk(row, k).indices
        if top <= 0 or k == row.numel():
            order = torch.arange(row.numel())
        cols = [vocab[i] if vocab and i < len(vocab) else str(i) for i in order.tolist()]
        note = "" if k == row.numel() else f"top {k} of {row.numel()}"
        position = labels.get("target", [])[-1:] or ["next"]
        step.matrices.append(Matrix(_grid(row[order]), position, cols, note=note))
        return step
    if value.dim() == 2:
        rows = _labels_for(name, labels, value.shape[0], "query")
        cols = [f"d{j}" for j in range(value.shape[1])]
        step.matrices.append(Matrix(_grid(value), rows, cols))
        return step
    step.matrices.append(Matrix(_grid(value.reshape(value.shape[0], -1) if value.dim() > 2 else value),
                                [], []))
    return step


ASSEMBLED = ("weights", "mask")  # decoder tensors shown with every query row so far


def stack_rows(rows: list[torch.Tensor]) -> torch.Tensor:
    """Query rows recorded at successive generation steps, each (..., rows_s, keys_s), as one
    (..., sum rows_s, max keys_s) tensor. A row that saw fewer keys (an earlier step of masked
    self-attention) is padded with 0: the weight, and the mask value, of a key it may not see."""
    keys = max(r.shape[-1] for r in rows)
    padded = [torch.nn.functional.pad(r.to(torch.float64), (0, keys - r.shape[-1])) for r in rows]
    return torch.cat(padded, dim=-2)


class RowsSoFar:
    """Turns a generation step's one-row decoder attention weights (or mask) into all rows so far."""

    def __init__(self) -> None:
        self.history: dict[str, list[torch.Tensor]] = {}

    def __call__(self, record: Record, query_tokens: list[str]) -> tuple[Record, str]:
        """(record with rows 0..t, a note naming the row this step computed), or (record, "")."""
        if record.step is None or not record.name.startswith("decoder.") \
                or record.name.split(".")[-1] not in ASSEMBLED or record.value.dim() not in (3, 4):
            return record, ""
        rows = self.history.setdefault(record.name, [])
        rows.append(record.value[:1])
        computed = record.value.shape[-2]
        if computed >= len(query_tokens) or len(rows) == 1:
            return record, ""
        value = stack_rows(rows)
        if record.name.endswith("mask"):
            value = value.bool()
        newest = ", ".join(query_tokens[-computed:])
        note = f"row {newest!r} computed at this step; the rows above it at the earlier steps"
        return replace(record, value=value), note


def build_walkthrough(records: list[Record], title: str, source_tokens: list[str],
                      target_tokens: list[str] | None = None, vocab: list[str] | None = None,
                      target_by_step: dict[int, list[str]] | None = None, top: int = 10,
                      skip: tuple[str, ...] = ()) -> Walkthrough:
    """A walkthrough of `records` in order. `target_by_step[t]` labels the decoder input at decoding step t
    (every token fed so far, newest last)."""
    walk = Walkthrough(title, list(source_tokens), list(target_tokens or []))
    rows_so_far = RowsSoFar()
    present = {(record.name, record.step) for record in records}
    for index, recorded in enumerate(records):
        for record in (recorded, *probabilities_of(recorded, present)):
            if any(record.name.endswith(s) for s in skip) or REPEATS.search(record.name):
                continue
            target = (target_by_step or {}).get(record.step, target_tokens or [])
            labels = {"source": list(source_tokens), "target": list(target)}
            record, note = rows_so_far(record, list(target))
            step = step_from_record(record, labels, vocab, top, index)
            for matrix in step.matrices:
                matrix.note = "; ".join(n for n in (matrix.note, note) if n)
            walk.steps.append(step)
    if not any(step.name.endswith("tokens.scaled") for step in walk.steps):  # a model that does not scale E
        for step in walk.steps:
            if step.name.endswith("embed.X"):
                step.formula = "X = E[ids] + PE"
    return walk


def probabilities_of(record: Record, present: set[tuple[str, int | None]]) -> list[Record]:
    """The view's own p = softmax(logits) after the output layer's logits (the model computes no softmax for a
    viewer): [the `output.probabilities` record], or [] for any other record, or when the records hold one."""
    if not record.name.endswith(OUTPUT_LOGITS):
        return []
    name = record.name.removesuffix("logits") + "probabilities"
    if (name, record.step) in present:  # a worked example (explain/examples.py) records its own
        return []
    return [Record(name, torch.softmax(record.value.float(), dim=-1), record.step)]
