"""clearformer: the Transformer of "Attention Is All You Need", from scratch in PyTorch.

Use it from Python (README.md, "Use it from Python"):

    import clearformer
    from clearformer import DecodingOptions, TrainOptions

    result = clearformer.train_model(TrainOptions.for_preset("toy-translate", run_dir="runs/toy"))
    model, tokenizer, meta = clearformer.load_model(result.run_dir)     # or latest_checkpoint()
    facts = clearformer.load_decoding_facts(result.run_dir, tokenizer) # decoding.json: as the commands decode
    clearformer.translate(model, tokenizer, ["I love you"], DecodingOptions(beam=4), facts=facts)
    translator = clearformer.load_translator(result.run_dir)           # loaded once; engine="ctranslate2" too
    translator.translate(["I love you"], DecodingOptions(beam=4))      # -> [Translation(text, notes, ...)]
    walk = clearformer.explain_translation(model, tokenizer, "I love you")   # every step, recorded

The public names load on first use (module `__getattr__`), so `import clearformer` (and the
command line's start-up) imports neither torch nor anything else until a name is asked for.
"""

from __future__ import annotations

# The one place the version is written: pyproject.toml reads it (`dynamic = ["version"]`).
__version__ = "0.1.0"

# Public name -> the module that defines it.
PUBLIC = {
    "DecodingOptions": "clearformer.generate.options",   # how to decode: beam, alpha, brevity, ...
    "SamplingOptions": "clearformer.generate.sampling",  # how a language model samples its next token
    "TrainOptions": "clearformer.train.options",         # a translation run, one part per concern
    "LMOptions": "clearformer.train.lm",                 # a language-model run
    "UserError": "clearformer.errors",                   # what every bad input raises, with a one-line message
    "latest_checkpoint": "clearformer.store.runs",       # the run the last `clearformer train` wrote
    "load_model": "clearformer.load",                    # (model, tokenizer, meta) of a run folder
    "load_decoding_facts": "clearformer.load",           # its decoding facts (decoding.json): translate(facts=)
    "translate": "clearformer.generate.translate",       # sentences -> translations
    "load_translator": "clearformer.translator",         # a run folder, loaded once, on an engine: .translate(...)
    "Translation": "clearformer.generate.result",        # what .translate returns per input: text and notes
    "explain_translation": "clearformer.explain.translation",  # one sentence -> every recorded step
    "Recorder": "clearformer.record.trace",              # records every intermediate of what runs inside it
    "train_model": "clearformer.train.front",            # train (or --resume) a translation or LM run
}
ALIASES = {"train_model": "train"}  # `clearformer.train` is the training package; its function is `train`

__all__ = ["__version__", *PUBLIC]


def __getattr__(name: str):
    if name not in PUBLIC:
        raise AttributeError(f"module 'clearformer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(PUBLIC[name]), ALIASES.get(name, name))
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(PUBLIC))
