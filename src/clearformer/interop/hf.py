"""Reading a Hugging Face Transformers folder without running its code or unpickling its files.

Weights come from `model.safetensors` (or the shards its index lists); a folder with only
`pytorch_model.bin` is read with `torch.load(weights_only=True)`, which loads tensors and refuses
any other object. Config fields are read one by one, each checked, with one-line errors naming the
field.
"""

from __future__ import annotations

from pathlib import Path

import torch

from clearformer.errors import UserError
from clearformer.store.safeio import read_json, read_json_object

EXTRA = "pip install 'clearformer[hf]'"


def require(module: str, purpose: str):
    """Import an optional dependency of the `hf` extra, or a one-line error saying how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"{purpose} needs the `{module}` package: {EXTRA}") from None


HUB_PREFIX = "hf:"  # `hf:Helsinki-NLP/opus-mt-en-fr`: the only spelling that downloads


def resolve_folder(source: str, patterns: list[str]) -> Path:
    """A local folder; or, for `hf:OWNER/NAME` only, that model on the Hugging Face Hub, downloaded.

    Anything without the prefix is a local folder, so a misspelt path is an error, never a Hub request."""
    if not source.startswith(HUB_PREFIX):
        path = Path(source)
        if not path.exists():
            raise UserError(f"{source}: no such folder (a model on the Hugging Face Hub is named "
                            f"{HUB_PREFIX}OWNER/NAME)")
        if not path.is_dir():
            raise UserError(f"{source}: not a folder saved by save_pretrained")
        return path
    source = source[len(HUB_PREFIX):]
    if not source or source.startswith((".", "/")) or source.count("/") > 1:
        raise UserError(f"{HUB_PREFIX}{source}: a Hub model is named {HUB_PREFIX}OWNER/NAME")
    hub = require("huggingface_hub", f"downloading {source}")
    try:
        folder = Path(hub.snapshot_download(source, allow_patterns=patterns))
        if not any(folder.glob("*.safetensors")):  # older repositories (many opus-mt) hold only the .bin
            folder = Path(hub.snapshot_download(source, allow_patterns=["pytorch_model.bin"]))
        return folder
    except Exception as error:  # network, unknown repository, authentication: say which, in one line
        raise UserError(f"{source}: not a local folder and not downloadable "
                        f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})") from None


def read_config(folder: Path) -> dict:
    return read_json_object(folder / "config.json", missing="missing (not a Transformers model folder?)")


class ConfigFields:
    """Typed access to a Transformers config.json: `fields.int("d_model")` or a one-line error."""

    def __init__(self, data: dict, path: Path) -> None:
        self.data = data
        self.path = path

    def get(self, name: str, kinds: tuple, default=None, required: bool = True):
        if name not in self.data or self.data[name] is None:
            if default is None and required:
                raise UserError(f"{self.path}: field {name!r} is missing")
            return default
        value = self.data[name]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise UserError(f"{self.path}: field {name!r} = {value!r} has the wrong type")
        return value

    def int(self, name: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.get(name, (int,), default)
        if value < minimum:
            raise UserError(f"{self.path}: field {name!r} = {value} must be at least {minimum}")
        return value

    def bool(self, name: str, default: bool) -> bool:
        return self.get(name, (bool,), default, required=False)

    def str(self, name: str, default: str | None = None) -> str:
        return self.get(name, (str,), default)

    def float(self, name: str, default: float) -> float:
        return float(self.get(name, (int, float), default, required=False))

    def expect(self, name: str, wanted, default=None) -> None:
        """A field clearformer supports only at one value (e.g. scale_attn_by_inverse_layer_idx=False)."""
        value = self.data.get(name, default)
        if value != wanted:
            raise UserError(f"{self.path}: field {name!r} = {value!r} is not supported (only {wanted!r})")


def read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a Transformers folder, from safetensors (or a tensors-only torch.load of a .bin)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    single, index = folder / "model.safetensors", folder / "model.safetensors.index.json"
    if single.exists():
        files = [single]
    elif index.exists():
        try:
            names = sorted(set(read_json(index)["weight_map"].values()))
        except (KeyError, AttributeError, TypeError) as error:
            raise UserError(f"{index}: unreadable shard index ({error})") from None
        files = [folder / Path(name).name for name in names]
    elif (folder / "pytorch_model.bin").exists():
        return read_torch_bin(folder / "pytorch_model.bin")
    else:
        raise UserError(f"{folder}: no model.safetensors (nor pytorch_model.bin)")
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        try:
            tensors.update(load_file(str(file)))
        except (SafetensorError, OSError, ValueError, RuntimeError) as error:
            raise UserError(f"{file}: damaged weights file ({str(error).splitlines()[0]})") from None
    return tensors


def read_torch_bin(path: Path) -> dict[str, torch.Tensor]:
    """A pickled state dict read with weights_only=True: tensors and plain containers only, never code."""
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # an unpickling refusal or a damaged file: one line either way
        raise UserError(f"{path}: refused or damaged (only plain tensors are read from .bin files: "
                        f"{str(error).splitlines()[0][:120]})") from None
    if not isinstance(data, dict) or not all(isinstance(t, torch.Tensor) for t in data.values()):
        raise UserError(f"{path}: not a state dict of tensors")
    return data


def take(tensors: dict[str, torch.Tensor], name: str, shape: tuple[int, ...], where: Path) -> torch.Tensor:
    """tensors[name] as float32, checked to exist, be floating point and have `shape`."""
    if name not in tensors:
        raise UserError(f"{where}: tensor {name!r} is missing")
    tensor = tensors[name]
    if not tensor.is_floating_point():
        raise UserError(f"{where}: tensor {name!r} has dtype {tensor.dtype}, not a floating type")
    if tuple(tensor.shape) != tuple(shape):
        raise UserError(f"{where}: tensor {name!r} has shape {tuple(tensor.shape)}, the config implies {shape}")
    return tensor.detach().to(torch.float32)
