"""safetensors headers → inventory, from the header alone or a whole file; bad headers named."""

import io
import json
import struct
from pathlib import Path

import pytest
import torch
from torch import nn

from emuplan.workload.safetensors_source import (
    SafetensorsError,
    inventory_from_safetensors_header,
    read_safetensors,
    read_safetensors_header,
)

DTYPE_CODES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.int64: "I64"}


def safetensors_bytes(tensors: dict[str, tuple[torch.dtype, list[int]]], with_data: bool = True) -> bytes:
    """A file as the safetensors writer lays it out; the data part is zeros."""
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = torch.empty(shape, dtype=dtype, device="meta").nbytes
        header[name] = {"dtype": DTYPE_CODES[dtype], "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + (bytes(offset) if with_data else b"")


def seed_tensors() -> dict[str, tuple[torch.dtype, list[int]]]:
    model = nn.Sequential()
    for name, fan_in, fan_out in [("fc1", 784, 256), ("fc2", 256, 128), ("fc3", 128, 64), ("fc4", 64, 10)]:
        model.add_module(name, nn.Linear(fan_in, fan_out, device="meta"))
    return {name: (p.dtype, list(p.shape)) for name, p in model.named_parameters()}


def inventory_of(data: bytes, file_name: str = "model.safetensors"):
    stream = io.BytesIO(data)
    header, raw = read_safetensors_header(stream, file_name)
    return inventory_from_safetensors_header(header, "model", file_name, len(data) - len(raw))


@pytest.mark.parametrize("with_data", [True, False], ids=["whole file", "header alone"])
def test_the_seed_classifier_checkpoint_gives_its_parameters_in_file_order(with_data: bool):
    inventory = inventory_of(safetensors_bytes(seed_tensors(), with_data))
    assert [(p.name, p.shape) for p in inventory.parameters] == [
        ("fc1.weight", [256, 784]), ("fc1.bias", [256]), ("fc2.weight", [128, 256]), ("fc2.bias", [128]),
        ("fc3.weight", [64, 128]), ("fc3.bias", [64]), ("fc4.weight", [10, 64]), ("fc4.bias", [10]),
    ]  # fmt: skip
    assert inventory.parameter_bytes == 971048
    assert inventory.source_kind == "safetensors"


def test_dtypes_are_translated_and_a_file_on_disk_is_read_by_its_header(tmp_path: Path):
    path = tmp_path / "tiny.safetensors"
    path.write_bytes(safetensors_bytes({"emb.weight": (torch.bfloat16, [50257, 768]), "step": (torch.int64, [])}))
    inventory = read_safetensors(path)
    assert inventory.name == "tiny"
    assert [(p.name, p.dtype, p.nbytes) for p in inventory.parameters] == [
        ("emb.weight", "bfloat16", 50257 * 768 * 2),
        ("step", "int64", 8),
    ]


GOOD = safetensors_bytes({"w": (torch.float32, [2, 2])})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "model.safetensors: the file is empty"),
        (b"\x10\x00\x00", "model.safetensors: truncated: 3 bytes, but a safetensors file starts with an 8-byte "
                          "header length"),
        (struct.pack("<Q", 10**12), "model.safetensors: header length 1000000000000 is not between 1 and "
                                    "100000000 bytes; is this a safetensors file?"),
        (GOOD[:20], f"model.safetensors: truncated header: it declares {len(GOOD) - 8 - 16} bytes but 12 follow"),
        (struct.pack("<Q", 5) + b"{nope", "model.safetensors: the header is not valid JSON"),
        (struct.pack("<Q", 2) + b"[]", "model.safetensors: the header is not a JSON object"),
        (struct.pack("<Q", 2) + b"{}", "model.safetensors: the header lists no tensors"),
        (GOOD[:-3], "model.safetensors: truncated: the tensors need 16 bytes of data after the header, but only 13 "
                    "follow"),
    ],
)  # fmt: skip
def test_broken_files_are_rejected_with_what_is_wrong(data: bytes, message: str):
    with pytest.raises(SafetensorsError) as caught:
        inventory_of(data)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"dtype": "Q7", "shape": [2], "data_offsets": [0, 8]}, "tensor 'w': dtype 'Q7' is not one of F64"),
        ({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}, "tensor 'w': shape [-2] is not a list"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}, "tensor 'w': data_offsets [8, 0] is not a"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0, 4]},
         "tensor 'w': data_offsets [0, 4] cover 4 bytes, but F32 [2] needs 8"),
    ],
)  # fmt: skip
def test_inconsistent_tensor_entries_are_named(entry: dict, message: str):
    with pytest.raises(SafetensorsError) as caught:
        inventory_from_safetensors_header({"w": entry}, "m", "m.safetensors")
    assert str(caught.value).startswith(f"m.safetensors: {message}")
