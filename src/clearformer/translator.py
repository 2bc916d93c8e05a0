"""A run folder opened for translation, once, by the engine chosen: the `Translator` every front calls.

    translator = load_translator("runs/small")                                  clearformer's own decoder
    translator = load_translator("runs/small", engine="ctranslate2", settings=EngineSettings(quantize="int8"))
    translator.translate(["I love you"], DecodingOptions(beam=4))          -> [Translation("Je t'aime")]

Above generate/ (the `Translator` protocol and `PyTorchTranslator`), interop/ (`CTranslate2Translator`) and
load/ (the run folder read back). `ENGINES` maps an engine's name (`--engine`) to its class: a command asks the
class what it takes and refuses (`decoding`, `check_settings`) before any work, then `open`s it; no command
compares engine names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clearformer.devices import resolve_device
from clearformer.errors import UserError
from clearformer.generate.facts import NO_FACTS, DecodingFacts
from clearformer.generate.layout import for_decoding
from clearformer.generate.translator import DEFAULT_SETTINGS, EngineSettings, PyTorchTranslator, Translator
from clearformer.interop.ct2_engine import CTranslate2Translator
from clearformer.load import load_decoding_facts, load_model
from clearformer.model.protocol import is_encoder_decoder
from clearformer.store.runs import resolve_checkpoint

ENGINES = {engine.name: engine for engine in (PyTorchTranslator, CTranslate2Translator)}

__all__ = ["ENGINES", "EngineSettings", "LoadedRun", "Translator", "engine_class", "load_run", "load_translator"]


@dataclass(frozen=True)
class LoadedRun:
    """An encoder-decoder run folder read back: the model (eval mode), its tokenizer (text <-> ids), the folder,
    meta.json and the run's decoding facts (decoding.json, generate/facts.py)."""

    model: object
    tokenizer: object
    directory: Path
    meta: dict = field(default_factory=dict)
    facts: DecodingFacts = NO_FACTS

    def open(self, engine: str = "pytorch", settings: EngineSettings = DEFAULT_SETTINGS,
             said: Callable[[str], None] | None = None) -> Translator:
        """This run's translator on `engine` (`said(line)`: what opening it did, e.g. an export)."""
        return engine_class(engine).open(self.model, self.tokenizer, self.directory, settings, said, self.facts)


def engine_class(name: str):
    """The class of the engine named `name` (a one-line error for an unknown name)."""
    if name not in ENGINES:
        raise UserError(f"unknown engine {name!r}; choose one of: {', '.join(ENGINES)}")
    return ENGINES[name]


def load_run(checkpoint: str | Path | None = None, device: str = "cpu") -> LoadedRun:
    """An encoder-decoder checkpoint (the folder, or None: the latest run) on `device` (cpu, cuda, cuda:N or
    auto); a one-line error for a language model or a tokenizer that does not match the config."""
    directory = resolve_checkpoint(str(checkpoint) if checkpoint is not None else None)
    model, tokenizer, meta = load_model(directory, resolve_device(device))
    config = model.config
    if config.n_encoder_layers == 0 or not is_encoder_decoder(model):
        raise UserError(f"{directory}: holds a decoder-only language model; translation needs an "
                        f"encoder-decoder checkpoint (try `clearformer lm`)")
    if config.src_vocab_size != len(tokenizer):
        raise UserError(f"{directory}: tokenizer has {len(tokenizer)} tokens but config.json says "
                        f"src_vocab_size={config.src_vocab_size}")
    # Decoding's layout, once, here (generate/layout.py): every engine and front reads this one model.
    return LoadedRun(for_decoding(model), tokenizer, Path(directory), meta if isinstance(meta, dict) else {},
                     load_decoding_facts(directory, tokenizer))


def load_translator(checkpoint: str | Path | None = None, engine: str = "pytorch",
                    settings: EngineSettings = DEFAULT_SETTINGS, device: str = "cpu",
                    said: Callable[[str], None] | None = None) -> Translator:
    """A run folder's translator: loaded once, then `translate(inputs, DecodingOptions)` as often as needed."""
    engine_class(engine).check_settings(settings)  # before the model loads
    return load_run(checkpoint, device).open(engine, settings, said)
