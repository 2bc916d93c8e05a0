"""`learn check transformer FILE`, the checker's side: the toy run's outputs computed here, the learner's compared.

The child (learn/capstone.py, `check_learner`) runs the learner's model and sends back, by case index:

    0                  its parameters' names and shapes (or what building the model raised)
    2k-1, 2k           test sentence k: every recorded module's output and the logits, with the reference
                       translation as the decoder input; then what the learner's translate() returned
    2n+1, 2n+2         the padded batch: the same outputs with the toy run's weights, then with fresh ones

This process loads the toy run itself before the child starts (`load_toy`), never imports the learner's file, and
judges: the names and shapes against lesson 15's mapping, each output against the toy run's recorded one in
data-flow order (to 1e-5, in float64: the first module that differs is named), the translations against
clearformer's greedy decoder. What came back is read as untrusted data (learn/verdict.py, learn/wire.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from clearformer.learn import reference as modules
from clearformer.learn.capstone import (
    MAX_NEW_TOKENS,
    TOLERANCE,
    check_config,
    forward_bytes,
    fresh_model,
    mapping_problems,
    padded_batch,
    parameter_shapes,
    recorded_modules,
    sentence_batches,
    test_sentences,
)
from clearformer.learn.check import CaseResult, Mismatch, Report
from clearformer.learn.sandbox import MAX_EVENTS_BYTES, ChildRun
from clearformer.learn.verdict import missing, results_of
from clearformer.learn.wire import (
    MAX_DIMS,
    MAX_ITEMS,
    Malformed,
    Raised,
    Unsent,
    decode,
    read_raised,
    text,
    type_name,
    whole,
)
from clearformer.record import trace

MAX_PARAMETERS = 10_000   # parameters of a learner's model (the toy one has about 60)
MAX_NAME = 200            # characters of a parameter's or a module's name
WEIGHTS = "the toy run's weights in your model"


@dataclass
class Toy:
    """The checker's side of the comparison: the toy run in float64, its tokenizer, the batches it is run on."""

    model: torch.nn.Module
    tokenizer: object
    sentences: list[tuple[torch.Tensor, torch.Tensor]]   # (src, tgt_in) per test sentence, (1, len)
    batch: tuple[torch.Tensor, torch.Tensor]             # the padded batch, (batch, len)

    def names(self) -> list[str]:
        """The case of each result index, as the report names it."""
        names = [f"{WEIGHTS} (lesson 15's mapping of names)"]
        for english, french in test_sentences():
            names += [f"{english!r}: logits with {french!r} as the decoder input", f"{english!r}: greedy translation"]
        src = self.batch[0]
        lengths = [int((row != self.tokenizer.pad_id).sum()) for row in src]
        batch = (f"a padded batch of {src.shape[0]} sentences ({', '.join(map(str, lengths))} source tokens, padded "
                 f"to {src.shape[1]} with <pad>): logits at the real tokens, trained and fresh weights")
        return names + [batch, batch]

    def events_limit(self) -> int:
        """The bytes of events read from the child: three times what an honest model's outputs come to (the child
        sends at most twice that, in base64) and MAX_EVENTS_BYTES for the rest."""
        config = self.model.config
        sizes = [forward_bytes(config, src, tgt_in) for src, tgt_in in [*self.sentences, self.batch, self.batch]]
        return MAX_EVENTS_BYTES + 3 * sum(sizes)


def load_toy(run_dir: Path) -> Toy:
    """The toy run as the checker compares with it (loaded here, before the learner's code runs anywhere)."""
    from clearformer.load import load_model

    model, tokenizer, _ = load_model(run_dir)
    check_config(model.config, Path(run_dir))
    return Toy(model.double().eval(), tokenizer, sentence_batches(tokenizer), padded_batch(tokenizer))


def judge_capstone(run: ChildRun, path: Path, timeout: float, toy: Toy) -> Report:
    """The report on the child's run: every case judged here from what came back, or the one line saying why not."""
    names = toy.names()
    report = Report("transformer", str(path))
    results = results_of(run, path, timeout, names, "your Transformer")
    first = None
    try:
        if results.stopped is None and 0 in results.by_case:
            first = judge_parameters(results.by_case[0], toy, path)
            if not first.ok:         # nothing else can be compared: the child stops there too
                report.results = [first]
                return report
        results.stopped = results.stopped or missing(results, path, names)
        if results.stopped is not None:
            report.stopped = results.stopped
            return report
        report.results = [first]
        for number, (src, tgt_in) in enumerate(toy.sentences):
            logits, translation = (results.by_case[2 * number + 1], results.by_case[2 * number + 2])
            report.results.append(judge_logits(logits, toy, src, tgt_in, names[2 * number + 1]))
            report.results.append(judge_translation(translation, toy, src, names[2 * number + 2]))
        trained, fresh = results.by_case[len(names) - 2], results.by_case[len(names) - 1]
        report.results.append(judge_batch(trained, fresh, toy, names[-1]))
    except Malformed as error:
        report.results, report.stopped = [], f"{path}: the checker's report holds {error}: not believed"
    return report


def raised_in(event: dict, fields: set[str]) -> Raised | None:
    """What the learner's code raised in this case, or None when the event has exactly `fields`."""
    given = set(event) - {"event", "index"}
    if given == {"raised"}:
        return read_raised(event["raised"])
    if given != fields:
        raise Malformed(f"a result for case {event.get('index')} with fields {sorted(given)[:6]}")
    return None


def unwritten(error: Raised) -> str:
    """A starter's `raise NotImplementedError` still in place: say so (its file and line are named already)."""
    if error.isa("NotImplementedError"):
        return " (a starter's `raise NotImplementedError` still stands there: fill that block)"
    return ""


def judge_parameters(event: dict, toy: Toy, path: Path) -> CaseResult:
    """The learner's parameters against lesson 15's mapping of names (their names and shapes, as sent)."""
    error = raised_in(event, {"parameters"})
    if error is not None:
        return CaseResult(WEIGHTS, False, Mismatch("", f"{error.where}: building Transformer(...) raised "
                                                       f"{error.describe()}"))
    listed = event["parameters"]
    if not isinstance(listed, list) or len(listed) > MAX_PARAMETERS:
        raise Malformed("a list of parameters that is not one")
    mine = {}
    for item in listed:
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[1], list) \
                or len(item[1]) > MAX_DIMS or not all(whole(size) for size in item[1]):
            raise Malformed("a parameter that is not a name and a shape")
        mine[text(item[0], MAX_NAME, "a parameter's name")] = tuple(item[1])
    problems = mapping_problems(mine, parameter_shapes(toy.model))
    if problems:
        return CaseResult(WEIGHTS, False, Mismatch("", problems[0]))
    return CaseResult(f"{WEIGHTS} (lesson 15's mapping of names)", True)


def outputs_of(event: dict) -> tuple[dict[str, object], object]:
    """({learner's module name: its output}, the logits), decoded from a forward result."""
    listed = event["modules"]
    if not isinstance(listed, list) or len(listed) > MAX_ITEMS:
        raise Malformed("a list of module outputs that is not one")
    outputs = {}
    for item in listed:
        if not isinstance(item, list) or len(item) != 2:
            raise Malformed("a module output that is not a name and a value")
        outputs[text(item[0], MAX_NAME, "a module's name")] = decode(item[1])
    return outputs, decode(event["logits"])


def judge_logits(event: dict, toy: Toy, src: torch.Tensor, tgt_in: torch.Tensor, name: str) -> CaseResult:
    error = raised_in(event, {"modules", "logits"})
    if error is not None:
        words = f"{error.where}: your model raised {error.describe()}{unwritten(error)}"
    else:
        words = first_difference(*outputs_of(event), toy.model, src, tgt_in)
    return CaseResult(name, words is None, None if words is None else Mismatch("", words))


def judge_translation(event: dict, toy: Toy, src: torch.Tensor, name: str) -> CaseResult:
    error = raised_in(event, {"value"})
    expected = modules.greedy(toy.model, src, MAX_NEW_TOKENS)
    words = None
    if error is not None:
        words = f"{error.where}: translate() raised {error.describe()}{unwritten(error)}"
    else:
        got = decode(event["value"])
        ids = got.tolist() if isinstance(got, torch.Tensor) else list(got) if isinstance(got, (list, tuple)) else None
        if ids is None:
            words = f"translate() returned {type_name(got)}, expected a list of token ids"
        elif ids != expected:
            words = (f"ids {ids[:12]}, expected {expected[:12]}: {spelled(toy.tokenizer, ids)!r} instead of "
                     f"{toy.tokenizer.decode(expected)!r}")
    return CaseResult(name, words is None, None if words is None else Mismatch("", words))


def spelled(tokenizer, ids: list) -> str:
    """The learner's ids as text, when the vocabulary can spell them (they are whatever came back)."""
    try:
        return tokenizer.decode([int(i) for i in ids])
    except Exception:  # not ints, or ids outside the vocabulary
        return "(ids the vocabulary cannot spell)"


def judge_batch(trained: dict, fresh: dict, toy: Toy, name: str) -> CaseResult:
    """Sentences of different lengths as one padded batch (what training feeds): a model without the padding mask
    lets the real tokens attend to <pad>, and the first module that does is named. Run on the toy run's weights
    and on clearformer's fresh initialisation (seed 0): the trained heads are so sharp that the weight a real token
    gives to <pad> can stay below the tolerance, the untrained ones spread it."""
    src, tgt_in = toy.batch
    words = None
    for weights, event, model in (("the toy run's weights", trained, toy.model),
                                  ("fresh weights", fresh, fresh_model(toy.model.config))):
        error = raised_in(event, {"modules", "logits"})
        if error is not None:
            words = f"{error.where}: your model raised {error.describe()}{unwritten(error)}"
            break
        words = first_difference(*outputs_of(event), model, src, tgt_in, pad_id=toy.tokenizer.pad_id)
        if words is not None:
            words = (f"with {weights}, {words} (only in a padded batch: are the <pad> keys blocked in every "
                     "attention that reads the source?)")
            break
    return CaseResult(name, words is None, None if words is None else Mismatch("", words))


def first_difference(outputs: dict[str, object], got, reference, src, tgt_in, pad_id: int | None = None) -> str | None:
    """The learner's module outputs and logits (as sent back) against clearformer's on the same batch: the first
    module (in data-flow order) whose output differs, in words. With `pad_id`, only the real tokens' rows are
    compared (a padded position's row is nobody's output)."""
    with torch.no_grad(), trace.Recorder() as recorder:
        expected = reference(src, tgt_in)
    for name, recorded in recorded_modules(list(outputs)):
        try:
            want = recorder.get(recorded).to(torch.float64)
        except KeyError:
            continue
        mine = outputs[name]
        if not isinstance(mine, (torch.Tensor, Unsent)):
            return f"{name}: returned {type_name(mine)}, expected a tensor like clearformer's {recorded}"
        real = None if pad_id is None else (src if name.startswith(("src_embed", "encoder")) else tgt_in) != pad_id
        words = _differ(mine, want, real)
        if words:
            return f"the first module whose output differs is {name} (clearformer's {recorded}): {words}"
    real = None if pad_id is None else tgt_in != pad_id
    words = _differ(got, expected.to(torch.float64), real) if isinstance(got, (torch.Tensor, Unsent)) else \
        "not a tensor"
    return f"the logits differ: {words}" if words else None


def _differ(mine: torch.Tensor | Unsent, want: torch.Tensor, real: torch.Tensor | None = None) -> str | None:
    """Where `mine` differs from `want`, in words; `real` (batch, seq): the rows that count."""
    if tuple(mine.shape) != tuple(want.shape):
        return f"shape {tuple(mine.shape)}, expected {tuple(want.shape)}"
    if isinstance(mine, Unsent):
        return f"a tensor the checker could not read back ({mine.why})"
    mine = mine.detach().to(torch.float64)
    bad = ~((mine - want).abs() <= TOLERANCE + TOLERANCE * want.abs())
    if real is not None and bad.dim() == 3 and tuple(real.shape) == tuple(bad.shape[:2]):
        bad &= real[..., None]
    if not bool(bad.any()):
        return None
    index = tuple(int(i) for i in bad.nonzero()[0])
    return (f"{int(bad.sum())} of {want.numel()} cells differ; at {list(index)} expected {float(want[index]):.6g}, "
            f"got {float(mine[index]):.6g}")
