"""Model code can write the sandbox's answer itself: whatever it writes is checked as untrusted input.

Each upload below runs for real in bubblewrap; the forged answers go to the worker's answer
descriptor (fd 3) as the audit's did, and the real worker never gets to answer."""

import json

import pytest
from fastapi.testclient import TestClient

from emuplan.sandbox.runner import SandboxError, SandboxPolicy
from emuplan.workload.pytorch_source import CaptureSettings, PytorchSourceOptions, inspect_pytorch_source

pytestmark = pytest.mark.sandbox

GENUINE_PARAMETERS = [{"name": "fc.weight", "shape": [2, 4], "dtype": "float32"}]


def forging(answer: dict) -> bytes:
    """A model file that answers ``answer`` in the worker's place and exits before the worker can."""
    return f"import os\nos.write(3, {json.dumps(answer).encode()!r})\nos._exit(0)\n".encode()


def inventory(parameters: list[dict], name: str = "Tiny") -> dict:
    return {"name": name, "source_kind": "pytorch", "parameters": parameters}


def transformer(**numbers) -> dict:
    shape = {"family": "llama", "hidden_size": 64, "num_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 128,
             "tie_word_embeddings": False}  # fmt: skip
    return {**shape, **numbers}


KNOWN_DTYPES = (
    "'float64', 'float32', 'float16', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2', 'int64', 'int32', 'int16', "
    "'int8', 'uint8' or 'bool'"
)


def upload(client: TestClient, source: bytes, model_class: str = "Tiny"):
    return client.post(
        "/api/models",
        files={"file": ("model.py", source)},
        data={"model_class": model_class, "input_shape": "4", "name": "Tiny"},
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {"ok": True},
            "the sandbox's answer is not valid: inventory: Field required",
        ),
        (
            {"ok": True, "inventory": inventory([{"name": "w", "shape": [-7000], "dtype": "float32"}])},
            "the sandbox's answer is not valid: inventory.parameters.0.shape.0: Input should be greater than or "
            "equal to 0",
        ),
        (
            {"ok": True, "inventory": inventory([{"name": "w", "shape": [2**40, 2**40], "dtype": "float32"}])},
            "the sandbox's answer is not valid: inventory: Value error, the parameters take "
            "4835703278458516698824704 bytes, more than the 2^63 − 1 a KCCB data size can hold",
        ),
        (
            {"ok": True, "inventory": inventory(GENUINE_PARAMETERS, name="NoSuchClass")},
            "the sandbox's answer describes another model than the one asked for",
        ),
        (
            {"ok": True, "inventory": inventory(GENUINE_PARAMETERS), "planted": 1},
            "the sandbox's answer is not valid: planted: Extra inputs are not permitted",
        ),
        # The audit's forgeries that were stored: meaningless numbers and an unknown dtype.
        (
            {
                "ok": True,
                "inventory": {**inventory(GENUINE_PARAMETERS), "transformer": transformer(num_attention_heads=0)},
            },
            "the sandbox's answer is not valid: inventory.transformer.num_attention_heads: Input should be greater "
            "than or equal to 1",
        ),
        (
            {"ok": True, "inventory": {**inventory(GENUINE_PARAMETERS), "transformer": transformer(vocab_size=-100)}},
            "the sandbox's answer is not valid: inventory.transformer.vocab_size: Input should be greater than or "
            "equal to 1",
        ),
        (
            {"ok": True, "inventory": {**inventory(GENUINE_PARAMETERS), "transformer": transformer()}},
            "the sandbox's answer holds a transformer shape, which the sandbox never reports",
        ),
        (
            {"ok": True, "inventory": inventory([{"name": "w", "shape": [2, 4], "dtype": "bogus"}])},
            "the sandbox's answer is not valid: inventory.parameters.0.dtype: Input should be " + KNOWN_DTYPES,
        ),
    ],
)
def test_a_forged_answer_is_refused_with_400_and_nothing_stored(client: TestClient, answer: dict, message: str):
    response = upload(client, forging(answer))
    assert (response.status_code, response.json()) == (400, {"detail": message})
    assert client.get("/api/models").json() == []


def test_a_genuine_model_whose_parameters_overflow_int64_is_refused(client: TestClient):
    source = (
        b"import torch.nn as nn\n\n"
        b"class Huge(nn.Module):\n"
        b"    def __init__(self):\n"
        b"        super().__init__()\n"
        b"        self.layers = nn.Sequential(*[nn.Linear(2**29, 2**29) for _ in range(16)])\n\n"
        b"    def forward(self, x):\n"
        b"        return self.layers(x)\n"
    )
    response = client.post(
        "/api/models", files={"file": ("huge.py", source)}, data={"model_class": "Huge", "input_shape": "536870912"}
    )
    assert response.status_code == 400
    assert response.json()["detail"] == (
        "the sandbox's answer is not valid: inventory: Value error, the parameters take 18446744108069289984 bytes, "
        "more than the 2^63 − 1 a KCCB data size can hold"
    )


@pytest.mark.parametrize(
    ("collective", "message"),
    [
        ({"dtype": "bogus"}, "captures.0.steady_step.0.dtype: Input should be " + KNOWN_DTYPES),
        ({"per_rank_bytes": 4096}, "captures.0.steady_step.0: Value error, per_rank_bytes 4096 is more than the whole "
         "buffer's 1024"),
    ],
)  # fmt: skip
def test_a_forged_capture_with_meaningless_fields_is_refused(collective: dict, message: str) -> None:
    steady = {"op": "all_reduce", "phase": "backward", "bytes": 1024, "per_rank_bytes": 1024, "dtype": "float32",
              "torch_op": "allreduce_", **collective}  # fmt: skip
    captured = {"strategy": "ddp", "world_size": 4, "first_step": [], "steady_step": [steady]}
    answer = {"ok": True, "inventory": inventory(GENUINE_PARAMETERS), "captures": [captured]}
    options = PytorchSourceOptions(model_class="Tiny", input_shape=[4])
    with pytest.raises(SandboxError) as refused:
        inspect_pytorch_source(
            forging(answer).decode(), "model.py", options, SandboxPolicy(), capture=CaptureSettings(strategies=["ddp"])
        )
    assert (refused.value.kind, refused.value.message) == (
        "bad_answer",
        f"the sandbox's answer is not valid: {message}",
    )


def test_an_answer_without_the_captures_asked_for_is_refused() -> None:
    source = forging({"ok": True, "inventory": inventory(GENUINE_PARAMETERS), "captures": []}).decode()
    options = PytorchSourceOptions(model_class="Tiny", input_shape=[4])
    with pytest.raises(SandboxError) as refused:
        inspect_pytorch_source(
            source, "model.py", options, SandboxPolicy(), capture=CaptureSettings(strategies=["ddp"])
        )
    assert (refused.value.kind, refused.value.message) == (
        "bad_answer",
        "the sandbox's answer does not hold the captures that were asked for",
    )
