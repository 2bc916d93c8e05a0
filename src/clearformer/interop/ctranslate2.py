"""An exported Marian folder -> a CTranslate2 model directory, through CTranslate2's own converter.

CTranslate2's `TransformersConverter` reads the folder with Transformers and fills its Transformer
spec with the Bart/Marian loader. Its Marian loader assumes two conventions of Marian's own models that
a clearformer model does not follow: the decoder starts from a zero vector (Marian's <pad>, which it
then removes as the last vocabulary entry), and <pad> is the last id. A clearformer model starts
decoding from a learned <bos> and keeps <pad> at id 0. So the conversion uses a subclass of the
Marian loader that keeps the vocabulary whole and starts the decoder from the config's
`decoder_start_token_id`, as CTranslate2's Bart loader (which Marian's extends) does; every weight is
still read and written by CTranslate2's code. The subclass is registered for MarianConfig only for the
duration of the conversion.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from clearformer.errors import UserError
from clearformer.interop.hf import require
from clearformer.interop.marianmt import PLACEHOLDER_FILE
from clearformer.store.lock import is_empty


def start_token_loader():
    """CTranslate2's Marian loader, without Marian's zero-start and <pad>-last assumptions."""
    converters = require("ctranslate2", "exporting to CTranslate2").converters
    bart = converters.transformers.BartLoader

    class StartTokenMarianLoader(converters.transformers.MarianMTLoader):
        def get_model_spec(self, model):
            model.config.normalize_before = False  # post-norm, no LayerNorm on the embeddings
            model.config.normalize_embedding = False
            return bart.get_model_spec(self, model)

        def get_vocabulary(self, model, tokenizer):
            return bart.get_vocabulary(self, model, tokenizer)

        def set_config(self, config, model, tokenizer):
            bart.set_config(self, config, model, tokenizer)
            config.bos_token = config.decoder_start_token  # MarianTokenizer has no bos; the config needs a string

        def set_decoder(self, spec, decoder):
            bart.set_decoder(self, spec, decoder)

    return StartTokenMarianLoader()


@contextlib.contextmanager
def marian_loader(loader):
    from ctranslate2.converters import transformers as ct2_transformers

    registry = ct2_transformers._MODEL_LOADERS
    previous = registry.get("MarianConfig")
    registry["MarianConfig"] = loader
    try:
        yield
    finally:
        registry["MarianConfig"] = previous


def convert_marian_folder(marian_folder: Path, out: Path, quantization: str | None = None) -> Path:
    """Run CTranslate2's converter on a Marian folder written by `export_marian`."""
    ctranslate2 = require("ctranslate2", "exporting to CTranslate2")
    require("transformers", "exporting to CTranslate2")
    extra = [PLACEHOLDER_FILE] if (marian_folder / PLACEHOLDER_FILE).exists() else []  # a masking run's tokens
    converter = ctranslate2.converters.TransformersConverter(
        str(marian_folder), copy_files=["source.spm", "target.spm", *extra])
    if out.exists() and not is_empty(out):  # `export` holds the folder's lock file (store/lock.py)
        raise UserError(f"{out}: exists and is not empty")
    with marian_loader(start_token_loader()):
        try:
            converter.convert(str(out), quantization=quantization, force=True)
        except (ValueError, NotImplementedError) as error:
            shutil.rmtree(out, ignore_errors=True)
            raise UserError(f"CTranslate2 could not convert {marian_folder}: {str(error).splitlines()[0]}") from None
    return out
