"""One entry point from a user's model spec to a ``ModelInventory``.

``resolve_model`` dispatches on the spec: a preset name, or a file path by its suffix (``.json``,
``.onnx``, ``.safetensors`` in ``FILE_SOURCES``; ``.py`` through the sandbox).
"""

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from emuplan.workload.hf_config import read_hf_config
from emuplan.workload.inventory import ModelInventory
from emuplan.workload.presets import PRESETS
from emuplan.workload.safetensors_source import read_safetensors

# Only a PyTorch source needs the sandbox and pytorch_source (whose models and importlib.metadata a
# preset's plan would otherwise pay for): imported where a .py is read.
if TYPE_CHECKING:
    from emuplan.sandbox.runner import SandboxPolicy
    from emuplan.workload.pytorch_source import PytorchSourceOptions


# A model definition uploaded to the server, named in a plan's inputs as "model:<id>"
# (``services.model_definitions.stored_definition`` reads it back).
STORED_MODEL_PREFIX = "model:"


def stored_model_spec(model_definition_id: int) -> str:
    return f"{STORED_MODEL_PREFIX}{model_definition_id}"


class UnknownModelError(ValueError):
    """Neither a preset nor a file of a supported kind."""


def _read_onnx(path: Path) -> ModelInventory:
    # onnx takes longer to import than a plan takes to compute: only ONNX files pay for it.
    from emuplan.workload.onnx_source import read_onnx

    return read_onnx(path)


FILE_SOURCES: dict[str, Callable[[Path], ModelInventory]] = {
    ".json": read_hf_config,
    ".onnx": _read_onnx,
    ".safetensors": read_safetensors,
}
# PyTorch source runs only in the sandbox and needs the class to build and the input shape.
PYTORCH_SUFFIX = ".py"


@cache
def _preset_inventory(name: str) -> ModelInventory:
    # Built once per process: the planner only reads inventories.
    return PRESETS[name].build()


def resolve_model(
    spec: str,
    allow_files: bool = True,
    pytorch_options: "PytorchSourceOptions | None" = None,
    sandbox: "SandboxPolicy | None" = None,
) -> ModelInventory:
    """Preset name → its inventory; a path → its reader by suffix (``*.py`` through the sandbox, with
    ``pytorch_options``). Paths only when ``allow_files``."""
    if spec in PRESETS:
        return _preset_inventory(spec)
    path = Path(spec)
    suffix = path.suffix.lower()
    reader = FILE_SOURCES.get(suffix)
    if allow_files and reader is not None:
        return reader(path)
    if allow_files and suffix == PYTORCH_SUFFIX:
        from emuplan.sandbox.runner import SandboxPolicy
        from emuplan.workload.pytorch_source import read_pytorch_file

        return read_pytorch_file(path, pytorch_options, sandbox or SandboxPolicy())
    accepted = f"a preset ({', '.join(PRESETS)})"
    if allow_files:
        accepted += f" or a file ending in {', '.join([*FILE_SOURCES, PYTORCH_SUFFIX])}"
    raise UnknownModelError(f"model: unknown model {spec!r}; expected {accepted}")
