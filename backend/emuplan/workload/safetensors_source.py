"""safetensors checkpoints: only the header is read (an unsigned 64-bit little-endian length, then that
many bytes of JSON naming every tensor's dtype, shape and byte range). No tensor data is touched, so a
user may upload the header alone or a whole file.

The format keeps no registration order; tensors are listed in the order their data lies in the file,
which is how the writer emitted them.
"""

import struct
from math import prod
from pathlib import Path
from typing import BinaryIO

from emuplan import json_input
from emuplan.workload.inventory import ModelInventory, ParameterInfo

HEADER_LENGTH_BYTES = 8
# safetensors itself refuses headers above 100 MB.
MAX_HEADER_BYTES = 100_000_000

SAFETENSORS_DTYPES = {
    "F64": "float64",
    "F32": "float32",
    "F16": "float16",
    "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
}
_ITEM_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
               "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}  # fmt: skip


class SafetensorsError(ValueError):
    """A header that is truncated, not JSON, or describes tensors inconsistently."""


def read_safetensors_header(stream: BinaryIO, file_name: str = "upload.safetensors") -> tuple[dict, bytes]:
    """The parsed JSON header and the raw bytes (length prefix + JSON) that hold it."""
    prefix = stream.read(HEADER_LENGTH_BYTES)
    if len(prefix) == 0:
        raise SafetensorsError(f"{file_name}: the file is empty")
    if len(prefix) < HEADER_LENGTH_BYTES:
        raise SafetensorsError(
            f"{file_name}: truncated: {len(prefix)} bytes, but a safetensors file starts with an 8-byte header length"
        )
    (length,) = struct.unpack("<Q", prefix)
    if length == 0 or length > MAX_HEADER_BYTES:
        raise SafetensorsError(
            f"{file_name}: header length {length} is not between 1 and {MAX_HEADER_BYTES} bytes; "
            "is this a safetensors file?"
        )
    raw = stream.read(length)
    if len(raw) < length:
        raise SafetensorsError(f"{file_name}: truncated header: it declares {length} bytes but {len(raw)} follow")
    try:
        header = json_input.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise SafetensorsError(f"{file_name}: the header is not valid JSON ({error})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{file_name}: the header is not a JSON object")
    return header, prefix + raw


def _parameter(name: str, entry, file_name: str) -> tuple[int, ParameterInfo]:
    where = f"{file_name}: tensor {name!r}"
    if not isinstance(entry, dict):
        raise SafetensorsError(f"{where}: expected an object with dtype, shape and data_offsets")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in SAFETENSORS_DTYPES:
        raise SafetensorsError(f"{where}: dtype {dtype!r} is not one of {', '.join(SAFETENSORS_DTYPES)}")
    if not isinstance(shape, list) or not all(isinstance(size, int) and size >= 0 for size in shape):
        raise SafetensorsError(f"{where}: shape {shape!r} is not a list of non-negative integers")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(offset, int) for offset in offsets)
        or not 0 <= offsets[0] <= offsets[1]
    ):
        raise SafetensorsError(f"{where}: data_offsets {offsets!r} is not a [begin, end] byte range")
    expected = prod(shape) * _ITEM_BYTES[dtype]
    covered = offsets[1] - offsets[0]
    if covered != expected:
        raise SafetensorsError(
            f"{where}: data_offsets {offsets} cover {covered} bytes, but {dtype} {shape} needs {expected}"
        )
    return offsets[0], ParameterInfo(name=name, shape=shape, dtype=SAFETENSORS_DTYPES[dtype])


def inventory_from_safetensors_header(header: dict, name: str, file_name: str, data_bytes: int = 0) -> ModelInventory:
    """``data_bytes``: how many bytes follow the header. 0 means the header alone was given; any other
    count must hold every tensor, or the file was cut short."""
    placed = [_parameter(key, entry, file_name) for key, entry in header.items() if key != "__metadata__"]
    if not placed:
        raise SafetensorsError(f"{file_name}: the header lists no tensors")
    data_end = max(parameter.nbytes + begin for begin, parameter in placed)
    if 0 < data_bytes < data_end:
        raise SafetensorsError(
            f"{file_name}: truncated: the tensors need {data_end} bytes of data after the header, "
            f"but only {data_bytes} follow"
        )
    placed.sort(key=lambda item: item[0])
    return ModelInventory(name=name, source_kind="safetensors", parameters=[parameter for _, parameter in placed])


def read_safetensors(path: Path) -> ModelInventory:
    """``emuplan plan --model model.safetensors``: the header of a file on disk."""
    with path.open("rb") as stream:
        header, raw = read_safetensors_header(stream, path.name)
    data_bytes = path.stat().st_size - len(raw)
    return inventory_from_safetensors_header(header, path.stem, path.name, data_bytes)
