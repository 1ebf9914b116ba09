"""An uploaded model file → its inventory and what to keep of it, whatever its kind.

The file's suffix decides how it is read: ``config.json`` (HuggingFace), ``.safetensors`` (header
only), ``.onnx``, ``.py`` (PyTorch source, run only in the sandbox). Pickle-based checkpoints are
refused without being opened: unpickling runs arbitrary code.
"""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from emuplan import json_input
from emuplan.errors import EmuplanError
from emuplan.sandbox.runner import SandboxPolicy, SandboxUnavailable
from emuplan.workload.hf_config import inventory_from_hf_config
from emuplan.workload.inventory import ModelInventory
from emuplan.workload.pytorch_source import PytorchSourceOptions, inspect_pytorch_source
from emuplan.workload.safetensors_source import inventory_from_safetensors_header, read_safetensors_header

PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")
ACCEPTED_SUFFIXES = (".json", ".safetensors", ".onnx", ".py")


class ModelFileError(EmuplanError, ValueError):
    """The file cannot be read as a model definition; the message names the file and the problem."""

    http_status = 400


class UnsupportedModelFile(ModelFileError):
    """A kind of file emuplan does not read (pickles on purpose)."""

    http_status = 415


@dataclass
class ModelFile:
    inventory: ModelInventory
    source_kind: str
    content: bytes  # what is stored: the upload, or for safetensors its header only
    options: dict = field(default_factory=dict)


def _suffix(file_name: str) -> str:
    return Path(file_name).suffix.lower()


def check_model_file_name(file_name: str) -> str:
    """The file's suffix, once it is one emuplan reads."""
    suffix = _suffix(file_name)
    if suffix in PICKLE_SUFFIXES:
        raise UnsupportedModelFile(
            f"{file_name}: PyTorch pickle checkpoints ({', '.join(PICKLE_SUFFIXES)}) are never opened, because "
            "unpickling runs arbitrary code. Upload the weights as .safetensors (only its header is read), the "
            "model as .onnx, its HuggingFace config.json, or its PyTorch source (.py)."
        )
    if suffix not in ACCEPTED_SUFFIXES:
        raise UnsupportedModelFile(
            f"{file_name}: unsupported model file; expected config.json, .safetensors, .onnx or .py (PyTorch source)"
        )
    return suffix


def _text(data: bytes, file_name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ModelFileError(f"{file_name}: not UTF-8 text (byte {error.start})") from None


def read_model_file(
    stream: BinaryIO,
    file_name: str,
    name: str | None,
    policy: SandboxPolicy,
    pytorch_options: PytorchSourceOptions | None = None,
) -> ModelFile:
    """Reads an uploaded model. ``pytorch_options`` (class, kwargs, input shape) are required for ``.py``.

    Every reason the file is not a usable model is a ``ModelFileError`` (each source's own error keeps
    its message); only a missing sandbox (``SandboxUnavailable``) is the server's problem instead."""
    try:
        return _read_model_file(stream, file_name, name, policy, pytorch_options)
    except (ModelFileError, SandboxUnavailable):
        raise
    except ValueError as error:
        raise ModelFileError(str(error)) from error


def _read_model_file(
    stream: BinaryIO,
    file_name: str,
    name: str | None,
    policy: SandboxPolicy,
    pytorch_options: PytorchSourceOptions | None,
) -> ModelFile:
    suffix = check_model_file_name(file_name)
    default_name = Path(file_name).stem
    if suffix == ".safetensors":
        header, raw = read_safetensors_header(stream, file_name)
        # Only the size of the tensor data matters (is the file whole?), never its bytes.
        data_bytes = stream.seek(0, os.SEEK_END) - len(raw)
        inventory = inventory_from_safetensors_header(header, name or default_name, file_name, data_bytes)
        return ModelFile(inventory, "safetensors", raw)
    data = stream.read()
    if not data:
        raise ModelFileError(f"{file_name}: the file is empty")
    if suffix == ".onnx":
        # onnx costs ~0.1 s and ~7 MB to import: only ONNX uploads load it (as sources.py does for files).
        from emuplan.workload.onnx_source import read_onnx_bytes

        return ModelFile(read_onnx_bytes(data, name or default_name, file_name), "onnx", data)
    if suffix == ".json":
        try:
            config = json_input.loads(_text(data, file_name))
        except json.JSONDecodeError as error:
            raise ModelFileError(f"{file_name}: not valid JSON ({error})") from None
        return ModelFile(inventory_from_hf_config(config, name, file_name), "hf_config", data)
    if pytorch_options is None:
        raise ModelFileError(f"{file_name}: a PyTorch source needs the model class and the input shape")
    result = inspect_pytorch_source(
        _text(data, file_name), file_name, pytorch_options, policy, name=name or pytorch_options.model_class
    )
    return ModelFile(result.inventory, "pytorch", data, pytorch_options.model_dump())
