"""Decoding speed: clearformer greedy and beam 4, with and without the KV cache, against Hugging Face
`MarianMTModel.generate` and CTranslate2 on a model of the same size.

    python benchmarks/decode_speed.py                 # writes its section of BENCHMARKS.md
    python benchmarks/decode_speed.py --no-write --sentences 64

All three run the `small` size (d_model 256, 4 heads, 3 + 3 layers, d_ff 1024) with random
weights and one vocabulary of --vocab tokens, on the same source sentences: the first
--sentences of data/en-fr-software/test.tsv, as token counts (random ids of each sentence's
word count; random lengths when the corpus is not built). With random weights <eos> would come
at random, so every system is made to generate exactly --new-tokens tokens per sentence
(clearformer: min_length = max_new; Transformers: min_new_tokens = max_new_tokens;
CTranslate2: min_decoding_length = max_decoding_length). Throughput = sentences x new tokens /
seconds (beam search counts the returned tokens, not the beams'). Batches of --batch
sentences, sorted by length, the same batches for everyone, one warm-up batch each; best of
--repeats rounds (each round runs every system once, in turn; the uncached runs only once).

Each system runs in its own worker process (clearformer, Transformers, CTranslate2), started once;
the main process only asks them in turn to time a run, so only one computes at a time. In one
shared process the systems slowed each other: clearformer's beam 4 ran 10-30% slower once
CTranslate2 (its own OpenMP runtime and allocations) had run in the same process, an effect no
user who runs one translator sees.

`--ab SWITCH` instead times clearformer against itself with one decoding switch (a field of
`DecodingOptions`; today `compile`: the one-token step compiled by torch.compile, against eager; a setting
of the layout, `few_rows_layout`; of the int8 model, `int8_output_onednn`: its output projection's oneDNN
product against `torch._int_mm`) on and off, batch by batch in alternating order, and writes the
medians of the per-pair ratios to its own section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import copy
import functools
import importlib.util
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import ct2_export_row  # noqa: E402
from benchmarks.report import markdown_table, write_section  # noqa: E402
from clearformer.config import preset  # noqa: E402
from clearformer.generate import DecodingOptions, beam_search, greedy_decode, pad_batch  # noqa: E402
from clearformer.generate import layout as layout_module  # noqa: E402
from clearformer.generate.int8 import quantize_int8  # noqa: E402
from clearformer.generate.layout import for_decoding  # noqa: E402
from clearformer.model.transformer import Transformer  # noqa: E402

SIZE = dict(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024)


def source_lengths(count: int, seed: int) -> tuple[list[int], str]:
    """Word counts of the first `count` test sources of en-fr-software (or random lengths)."""
    from clearformer.data.paths import default_data_dir
    from clearformer.tokenize import split_words

    path = default_data_dir("en-fr-software") / "test.tsv"
    if path.exists():
        text = path.read_text(encoding="utf-8")
        lines = [line.split("\t")[0] for line in text.splitlines() if "\t" in line]
        lengths = [max(1, len(split_words(s))) for s in lines[:count]]
        if len(lengths) == count:
            return lengths, f"word counts of the first {count} sources of {path}"
    rng = random.Random(seed)
    return [rng.randint(3, 30) for _ in range(count)], f"{count} random lengths in 3..30"


def make_batches(lengths: list[int], vocab: int, batch: int, seed: int) -> list[list[list[int]]]:
    """Random source ids (4 .. vocab-2: no special id) of the given lengths, longest first, in batches."""
    rng = random.Random(seed)
    sentences = [[rng.randrange(4, vocab - 1) for _ in range(n)] for n in lengths]
    sentences.sort(key=len, reverse=True)
    return [sentences[i: i + batch] for i in range(0, len(sentences), batch)]


def time_once(run) -> float:
    synchronize()
    start = time.perf_counter()
    run()
    synchronize()  # a GPU runs asynchronously: wait for its work before reading the clock
    return time.perf_counter() - start


def synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


# ----------------------------------------------------------------------------- the three systems


def clearformer_runner(model, batches, options: DecodingOptions, setting: tuple | None = None):
    """The timed run of `options` (with_scores=False: as `translate` calls greedy; Transformers returns
    no scores either), on the model's device; `setting` (module, name, value): a model setting given that
    value during the run."""
    device = next(model.parameters()).device
    inputs = [pad_batch(b, model.config.pad_id, device) for b in batches]
    search = greedy_decode if options.beam == 1 else beam_search

    def run(warm_up: bool = False, batch: int | None = None):
        if setting is not None:
            module, name, value = setting
            saved = getattr(module, name)
            setattr(module, name, value)
        try:
            for src in inputs[:1] if warm_up else inputs if batch is None else inputs[batch: batch + 1]:
                out = search(model, src, options)
                assert bool((out.lengths == options.max_new).all()), "every sentence must generate new_tokens tokens"
        finally:
            if setting is not None:
                setattr(module, name, saved)
    return run


def marian_model(vocab: int):
    """A random MarianMTModel of the same size; <pad> (the decoder start) is the last id, </s> is 0."""
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(vocab_size=vocab, d_model=SIZE["d_model"], encoder_layers=SIZE["n_encoder_layers"],
                          decoder_layers=SIZE["n_decoder_layers"], encoder_attention_heads=SIZE["n_heads"],
                          decoder_attention_heads=SIZE["n_heads"], encoder_ffn_dim=SIZE["d_ff"],
                          decoder_ffn_dim=SIZE["d_ff"], activation_function="relu",
                          max_position_embeddings=512, scale_embedding=True, dropout=0.0,
                          attention_dropout=0.0, activation_dropout=0.0,
                          pad_token_id=vocab - 1, eos_token_id=0, decoder_start_token_id=vocab - 1,
                          forced_eos_token_id=None, bos_token_id=None)
    torch.manual_seed(0)
    return MarianMTModel(config).eval()


def hf_runner(model, batches, beam: int, new_tokens: int):
    pad = model.config.pad_token_id
    inputs = []
    for b in batches:
        ids = pad_batch(b, pad, model.device)
        inputs.append((ids, (ids != pad).long()))

    def run(warm_up: bool = False):
        with torch.inference_mode():
            for ids, mask in inputs[:1] if warm_up else inputs:
                out = model.generate(input_ids=ids, attention_mask=mask, num_beams=beam, do_sample=False,
                                     max_new_tokens=new_tokens, min_new_tokens=new_tokens, length_penalty=1.0,
                                     early_stopping=False)
                assert out.shape[1] == new_tokens + 1, out.shape  # the start token + new tokens
    return run


def ctranslate2_vocabulary(vocab: int) -> list[str]:
    """Token strings for ids 0 .. vocab-1: </s> first, <pad> (Marian's decoder start) last."""
    return ["</s>", "<unk>"] + [f"t{i}" for i in range(2, vocab - 1)] + ["<pad>"]


def save_and_convert(model, vocab: int, directory: Path, convert: bool = True) -> None:
    """Save the Marian model (directory/hf) and convert it with CTranslate2's TransformersConverter (directory/ct2)."""
    model.save_pretrained(directory / "hf")
    if not convert:
        return
    from ctranslate2.converters import TransformersConverter

    tokens = ctranslate2_vocabulary(vocab)

    class VocabularyOnly:
        """What the Marian converter reads from a tokenizer: the vocabulary (<pad> last) and two names."""

        eos_token, unk_token = "</s>", "<unk>"

        def get_vocab(self):
            return {token: index for index, token in enumerate(tokens)}

    class Converter(TransformersConverter):
        def load_tokenizer(self, tokenizer_class, model_name_or_path, **kwargs):
            return VocabularyOnly()

    Converter(str(directory / "hf")).convert(str(directory / "ct2"), force=True)


def ct2_runner(translator, tokens, batches, beam: int, new_tokens: int):
    inputs = [[[tokens[i] for i in sentence] for sentence in b] for b in batches]

    def run(warm_up: bool = False):
        for batch in inputs[:1] if warm_up else inputs:
            results = translator.translate_batch(batch, beam_size=beam, max_decoding_length=new_tokens,
                                                 min_decoding_length=new_tokens, length_penalty=0.6,
                                                 max_batch_size=len(batch))
            assert all(len(r.hypotheses[0]) == new_tokens for r in results)
    return run


INT8 = "clearformer, int8"  # the same model, its linear layers in int8 (generate/int8.py; translate --quantize int8)
# ... with every linear layer requantized to int8 (two int8 rows per input row), as the second pass shipped it:
# what the hidden layers' int8 costs or buys against translate's choice (int8 output projection only, for weights
# that were float; generate/int8.py)
INT8_EVERY = "clearformer, int8 every layer requantized"
AB_PREFIX = "clearformer, "  # the same runs with one switch of DecodingOptions on ("... on") and off ("... off")
SWITCHES = {"compile": ("on", "off")}  # DecodingOptions field: (its value "on", its value "off")
# Module settings (module, name, value "off"): the product layout of `generate/layout.py`.
MODEL_SWITCHES = {"few_rows_layout": (layout_module, "FEW_ROWS", 0)}
# Settings of the int8 model (`clearformer, int8`), as (module path in it, name, value "off"): its output projection's
# integer product through oneDNN (generate/int8.py `Int8Output.ranking`) against `torch._int_mm` (packed None)
INT8_SWITCHES = {"int8_output_onednn": ("output.linear", "packed", None)}


def build_runs(system: str, args, directory: Path) -> dict[tuple[str, int], object]:
    """The timed runs of one system: {(name, beam): run}."""
    lengths, _ = source_lengths(args.sentences, args.seed)
    batches = make_batches(lengths, args.vocab, args.batch, args.seed)
    new = args.new_tokens
    runs = {}
    if system == "clearformer":
        torch.manual_seed(args.seed)
        model = for_decoding(Transformer(preset("small", src_vocab_size=args.vocab, tgt_vocab_size=args.vocab,
                                                dropout=0.0, max_len=512)).eval().to(args.device))
        int8_model, every = copy.deepcopy(model), copy.deepcopy(model)
        if args.device == "cpu":  # int8 (generate/int8.py) is a CPU path
            quantize_int8(int8_model)
            quantize_int8(every, requantize=True)
        for beam in (1, 4):
            options = DecodingOptions(beam=beam, alpha=0.6, max_new=new, min_length=new, with_scores=False)
            if args.ab is None:
                runs[("clearformer, KV cache", beam)] = clearformer_runner(model, batches, options)
                runs[(INT8, beam)] = clearformer_runner(int8_model, batches, options)
                runs[(INT8_EVERY, beam)] = clearformer_runner(every, batches, options)
            for switch in (args.ab or []):
                if switch in INT8_SWITCHES:
                    path, name, value = INT8_SWITCHES[switch]
                    runs[(f"{AB_PREFIX}{switch} on", beam)] = clearformer_runner(int8_model, batches, options)
                    runs[(f"{AB_PREFIX}{switch} off", beam)] = clearformer_runner(
                        int8_model, batches, options, (int8_model.get_submodule(path), name, value))
                    continue
                if switch in MODEL_SWITCHES:
                    runs[(f"{AB_PREFIX}{switch} on", beam)] = clearformer_runner(model, batches, options)
                    runs[(f"{AB_PREFIX}{switch} off", beam)] = clearformer_runner(model, batches, options,
                                                                                  MODEL_SWITCHES[switch])
                    continue
                on, off = SWITCHES[switch]
                runs[(f"{AB_PREFIX}{switch} on", beam)] = clearformer_runner(model, batches,
                                                                             options.but(**{switch: on}))
                runs[(f"{AB_PREFIX}{switch} off", beam)] = clearformer_runner(model, batches,
                                                                              options.but(**{switch: off}))
            if not args.skip_uncached:
                runs[("clearformer, no cache", beam)] = clearformer_runner(model, batches,
                                                                           options.but(use_cache=False))
    elif system == "transformers":
        from transformers import MarianMTModel

        marian = MarianMTModel.from_pretrained(directory / "hf").eval().to(args.device)
        for beam in (1, 4):
            runs[("transformers MarianMTModel.generate", beam)] = hf_runner(marian, batches, beam, new)
    elif system in ct2_export_row.SYSTEMS:  # clearformer's own export, and the int8 rows
        runs = ct2_export_row.build_runs(system, args, batches, directory, ct2_runner,
                                         ctranslate2_vocabulary(args.vocab))
    else:
        import ctranslate2

        translator = ctranslate2.Translator(str(directory / "ct2"), device=ct2_device(args), compute_type="float32",
                                           intra_threads=args.threads, inter_threads=1)
        vocabulary = ctranslate2_vocabulary(args.vocab)
        for beam in (1, 4):
            runs[("CTranslate2 float32", beam)] = ct2_runner(translator, vocabulary, batches, beam, new)
    return runs


def ct2_device(args) -> str:
    """CTranslate2's device for --device (it takes "cpu" or "cuda")."""
    return "cuda" if getattr(args, "device", "cpu").startswith("cuda") else "cpu"


def serve_system(connection, system: str, args, directory: str) -> None:
    """Worker process: build and warm up one system's runs, then time the run asked for until told to stop."""
    torch.set_num_threads(args.threads)
    runs = build_runs(system, args, Path(directory))
    for run in runs.values():
        run(warm_up=True)
    connection.send(list(runs))
    while (key := connection.recv()) is not None:
        # (name, beam): every batch; (name, beam, i): batch i only (the A/B pairs)
        run = runs[tuple(key[:2])]
        connection.send(time_once(run if len(key) == 2 else functools.partial(run, batch=key[2])))


# ----------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=30)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu",
                        help="cpu or cuda: every system decodes there (clearformer and Transformers move their "
                             "models, CTranslate2 opens its translator there)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only; leave BENCHMARKS.md alone")
    parser.add_argument("--skip-peers", action="store_true",
                        help="clearformer only (no transformers / ctranslate2)")
    parser.add_argument("--skip-uncached", action="store_true", help="leave out the runs without the KV cache")
    parser.add_argument("--ab", nargs="*", choices=[*SWITCHES, *MODEL_SWITCHES, *INT8_SWITCHES], default=None,
                        metavar="SWITCH",
                        help="instead of the comparison with peers: time clearformer with each of these "
                             "decoding switches on against off, batch by batch, alternating "
                             f"(no names: all of {', '.join([*SWITCHES, *MODEL_SWITCHES, *INT8_SWITCHES])}). "
                             "Writes its own section of BENCHMARKS.md")
    args = parser.parse_args()
    if args.device != "cpu" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: no CUDA GPU is available here")
    if args.ab == []:
        args.ab = [*SWITCHES, *MODEL_SWITCHES, *INT8_SWITCHES]
    if args.ab is not None:  # the A/B compares clearformer with itself only
        args.skip_peers = args.skip_uncached = True

    _, where = source_lengths(args.sentences, args.seed)
    tokens = args.sentences * args.new_tokens
    temporary = tempfile.TemporaryDirectory()
    systems = ["clearformer"]
    # A machine without CTranslate2 (a GPU image, say) still compares against Transformers; the
    # section then says that CTranslate2 was not there, rather than the run failing at the end.
    has_ct2 = importlib.util.find_spec("ctranslate2") is not None
    missing = "" if has_ct2 or args.skip_peers else " CTranslate2 is not installed here: its rows are left out."
    if not args.skip_peers:
        systems += ["transformers", *(["ctranslate2", *ct2_export_row.SYSTEMS] if has_ct2 else [])]
        save_and_convert(marian_model(args.vocab), args.vocab, Path(temporary.name), has_ct2)
        if has_ct2:
            ct2_export_row.prepare(args, Path(temporary.name))

    # Round-robin over the systems, best time of each: a busy machine slows every system alike
    # instead of whichever happened to run during a burst of other work.
    load_before = os.getloadavg()[0]
    workers, processes = start_workers(systems, args, temporary.name)
    if args.ab is not None:
        ab = ab_rounds(workers, args)
        stop_workers(processes)
        load = f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
        temporary.cleanup()
        report = ab_report(ab, args, load)
        print(report)
        if not args.no_write:
            write_section("decode_switches_ab", "Decoding: each switch on against off (alternating A/B)", report)
        return
    best: dict[tuple[str, int], float] = {}
    rounds: dict[tuple[str, int], list[float]] = {}
    cached = [key for key in workers if "no cache" not in key[0]]
    uncached = [key for key in workers if key not in cached]
    for name, beam in cached * args.repeats + uncached:  # the slow uncached runs once, last
        workers[(name, beam)].send((name, beam))
        seconds = workers[(name, beam)].recv()
        best[(name, beam)] = min(seconds, best.get((name, beam), seconds))
        rounds.setdefault((name, beam), []).append(seconds)
        print(f"{name:40s} beam {beam}: {seconds:7.2f} s  {tokens / seconds:8.0f} tok/s", flush=True)
    stop_workers(processes)
    rate = {key: tokens / seconds for key, seconds in best.items()}
    ours = "clearformer, KV cache"
    # Each round times every system once, close together: the ratio within a round cancels most of a
    # slow phase of the machine, so the median of the per-round ratios is the steadier figure.
    paired = {}
    for (name, beam), times in rounds.items():
        if name != ours and len(times) == len(rounds[(ours, beam)]):
            paired[(name, beam)] = statistics.median(t / o for t, o in zip(times, rounds[(ours, beam)],
                                                                          strict=True))
    load = f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    temporary.cleanup()

    rows = []
    for (name, beam), value in rate.items():
        ratio = rate[(ours, beam)] / value
        search = "greedy" if beam == 1 else f"beam {beam}"
        speed_up = "—" if name == ours else f"{ratio:.2f}x"
        per_round = f"{paired[(name, beam)]:.2f}x" if (name, beam) in paired else "—"
        rows.append([name, search, f"{tokens / value:.2f}", f"{value:,.0f}", speed_up, per_round])
    rows.sort(key=lambda row: (row[1], row[0] != ours))
    # issue 54's goal: clearformer's int8 against CTranslate2's, best against best and round by round
    peer = ct2_export_row.MARIAN_INT8
    against = []
    for beam in (1, 4):
        if (INT8, beam) in rate and (peer, beam) in rate:
            paired_int8 = statistics.median(p / o for p, o in zip(rounds[(peer, beam)], rounds[(INT8, beam)],
                                                                  strict=True))
            search = "greedy" if beam == 1 else f"beam {beam}"
            best_int8 = rate[(INT8, beam)] / rate[(peer, beam)]
            against.append(f"{search} {best_int8:.2f}x ({paired_int8:.2f}x round by round)")
    versus = f" `{INT8}` against `{peer}`: {', '.join(against)}." if against else ""
    body = (f"{args.sentences} sentences ({where}), batches of {args.batch} sentences, exactly "
            f"{args.new_tokens} new tokens per sentence (<eos> suppressed until then, on every system), "
            f"vocabulary {args.vocab}, random weights, float32, {args.threads} threads, best of "
            f"{args.repeats} runs (1 for the uncached runs); each system in its own worker process, "
            f"one computing at a time. Throughput counts returned tokens "
            f"({tokens} per run). Speed-up: clearformer with the cache, this many times faster (best "
            f"against best); per-round: the median over the {args.repeats} rounds of the same ratio within "
            f"each round. "
            f"1-minute load average of the machine: {load} (other jobs sharing the cores slow every "
            f"system; the best-of rounds damp that but do not remove it).{missing}{versus}\n\n"
            + markdown_table(["system", "search", "seconds", "tokens/s", "clearformer (cache) speed-up",
                              "per-round median"], rows))
    print(body)
    if not args.no_write:
        if args.device == "cpu":
            write_section("decode_speed", "Decoding speed (greedy and beam 4, KV cache, peers)", body)
        else:  # a GPU's figures go to their own section, naming the card
            gpu = torch.cuda.get_device_name(torch.device(args.device)) if torch.cuda.is_available() else args.device
            write_section("decode_speed_cuda", f"Decoding speed on a GPU ({gpu})", body)


def start_workers(systems: list[str], args, directory: str):
    """One worker process per system, each built and warmed up: ({(name, beam): its connection}, processes)."""
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: no shared threads or heap
    workers: dict[tuple[str, int], object] = {}
    processes = []
    for system in systems:
        ours_end, theirs = spawn.Pipe()
        process = spawn.Process(target=serve_system, args=(theirs, system, args, directory), daemon=True)
        process.start()
        theirs.close()  # the worker holds that end now: if it dies, recv() below raises instead of waiting
        processes.append((process, ours_end))
        try:
            offered = ours_end.recv()  # the runs it offers, once built and warmed up
        except EOFError:
            sys.exit(f"decode_speed: the {system} worker stopped before its runs were ready (its error is above)")
        for key in offered:
            workers[tuple(key)] = ours_end
    return workers, processes


def stop_workers(processes) -> None:
    for process, connection in processes:
        connection.send(None)
        process.join()


def ab_rounds(workers: dict, args) -> dict[tuple[str, int], list[float]]:
    """The A/B: for every round, batch and switch, clearformer with the switch on and with it off
    decode the same batch back to back, in alternating order.
    Returns {(switch, beam): [time off / time on, one per pair]}."""
    batches = -(-args.sentences // args.batch)
    ratios: dict[tuple[str, int], list[float]] = {}
    for round_ in range(args.repeats):
        for beam in (1, 4):
            for index in range(batches):
                for turn, switch in enumerate(args.ab):
                    on, off = f"{AB_PREFIX}{switch} on", f"{AB_PREFIX}{switch} off"
                    order = [on, off] if (round_ + index + turn) % 2 == 0 else [off, on]
                    seconds = {}
                    for name in order:
                        workers[(name, beam)].send((name, beam, index))
                        seconds[name] = workers[(name, beam)].recv()
                    ratios.setdefault((switch, beam), []).append(seconds[off] / seconds[on])
            print(f"round {round_ + 1} beam {beam}: " + ", ".join(
                f"{switch} {statistics.median(ratios[(switch, beam)]):.3f}" for switch in args.ab), flush=True)
    return ratios


def ab_report(ratios: dict[tuple[str, int], list[float]], args, load: str) -> str:
    """The A/B table: per switch and search, the median over all pairs of
    time with it off / time with it on, and the middle half of those ratios."""
    rows = []
    for (switch, beam), values in ratios.items():
        values = sorted(values)
        median = statistics.median(values)
        quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [median, median, median]
        rows.append([switch, "greedy" if beam == 1 else f"beam {beam}", f"{median:.3f}x",
                     f"{quartiles[0]:.3f}x .. {quartiles[2]:.3f}x", len(values),
                     "pays" if median >= 1.05 else "does not pay"])
    rows.sort(key=lambda row: (row[0], row[1]))
    return (f"{args.sentences} sentences in batches of {args.batch}, {args.new_tokens} new tokens each, vocabulary "
            f"{args.vocab}, the `small` size with random weights, {args.threads} threads, {args.repeats} rounds. "
            f"For every round, batch and switch, clearformer with the switch on and with it off (one worker "
            f"process, warmed up: a compiled step is compiled before timing) "
            f"decode the same batch back to back, in alternating order. Speed-up = time off / time on, per pair; "
            f"a switch stays on if the median is at least 1.05x. 1-minute load average: {load}.\n\n"
            + markdown_table(["switch", "search", "median speed-up", "middle half of the pairs", "pairs",
                              "verdict"], rows))


if __name__ == "__main__":
    main()
