"""One entry point from a user's model spec to a ``ModelInventory``.

``resolve_model`` dispatches on the spec: a preset name, or a file path by its suffix. New sources
(``.py`` through the sandbox, ``.onnx``, ``.safetensors``) add one entry to ``FILE_SOURCES``.
"""

from collections.abc import Callable
from functools import cache
from pathlib import Path

from emuplan.workload.hf_config import read_hf_config
from emuplan.workload.inventory import ModelInventory
from emuplan.workload.presets import PRESETS


class UnknownModelError(ValueError):
    """Neither a preset nor a file of a supported kind."""


FILE_SOURCES: dict[str, Callable[[Path], ModelInventory]] = {
    ".json": read_hf_config,
}


@cache
def _preset_inventory(name: str) -> ModelInventory:
    # Built once per process: the planner only reads inventories.
    return PRESETS[name].build()


def resolve_model(spec: str, allow_files: bool = True) -> ModelInventory:
    """Preset name → its inventory; ``*.json`` path → HuggingFace config. Paths only when ``allow_files``."""
    if spec in PRESETS:
        return _preset_inventory(spec)
    path = Path(spec)
    reader = FILE_SOURCES.get(path.suffix.lower())
    if allow_files and reader is not None:
        return reader(path)
    accepted = f"a preset ({', '.join(PRESETS)})"
    if allow_files:
        accepted += f" or a file ending in {', '.join(FILE_SOURCES)}"
    raise UnknownModelError(f"model: unknown model {spec!r}; expected {accepted}")
