"""PyTorch source through the sandbox: the inventory under FakeTensorMode and the collectives PyTorch
itself issues under DDP, FSDP2 and DTensor tensor parallelism (torch's fake process group, 4 ranks)."""

import pytest
import torch
from torch import nn

from emuplan.sandbox.runner import SandboxError, SandboxPolicy
from emuplan.workload.pytorch_source import (
    CaptureSettings,
    PytorchSourceError,
    PytorchSourceOptions,
    PytorchSourceResult,
    inspect_pytorch_source,
    parse_input_shape,
)
from emuplan.workload.sources import resolve_model
from paths import MODELS
from seed_model import assert_is_the_seed_classifier

pytestmark = pytest.mark.sandbox

LIMITS = SandboxPolicy(timeout_s=60)


def inspect(fixture: str, model_class: str, input_shape: str, capture: CaptureSettings | None = None, **kwargs):
    options = PytorchSourceOptions(model_class=model_class, input_shape=parse_input_shape(input_shape), **kwargs)
    # syntax_error.txt is kept out of the linter's way; it is uploaded under a .py name.
    file_name = fixture.replace(".txt", ".py")
    return inspect_pytorch_source((MODELS / fixture).read_text(), file_name, options, LIMITS, capture=capture)


def sizes(result: PytorchSourceResult, strategy: str, op: str, phase: str, step: str = "steady_step") -> list[int]:
    captured = next(c for c in result.captures if c.strategy == strategy)
    return [c.bytes for c in getattr(captured, step) if c.op == op and c.phase == phase]


@pytest.fixture(scope="module")
def seed() -> PytorchSourceResult:
    return inspect("seed_classifier.py", "Classifier", "1,28,28", CaptureSettings(world_size=4, batch_size=8192))


def test_the_seed_inventory_lists_parameters_in_registration_order(seed: PytorchSourceResult):
    assert_is_the_seed_classifier(seed.inventory)
    assert seed.inventory.source_kind == "pytorch"


def test_ddp_all_reduces_the_seeds_gradients_in_one_bucket(seed: PytorchSourceResult):
    assert sizes(seed, "ddp", "all_reduce", "backward", "first_step") == [971048]
    assert sizes(seed, "ddp", "all_reduce", "backward") == [971048]


def test_fsdp2_gathers_padded_shards_forward_and_reduce_scatters_backward(seed: PytorchSourceResult):
    assert sizes(seed, "fsdp2", "all_gather", "forward") == [803840, 131584, 33024, 3120]
    assert sizes(seed, "fsdp2", "reduce_scatter", "backward") == [3120, 33024, 131584, 803840]
    # Resharded after forward, each unit is gathered again for backward, last layer first.
    assert sizes(seed, "fsdp2", "all_gather", "backward") == [3120, 33024, 131584, 803840]
    fsdp = next(c for c in seed.captures if c.strategy == "fsdp2")
    assert [c.per_rank_bytes for c in fsdp.steady_step if c.phase == "forward"] == [200960, 32896, 8256, 780]


def test_dtensor_tensor_parallel_all_reduces_row_parallel_outputs(seed: PytorchSourceResult):
    assert sizes(seed, "tensor", "all_reduce", "forward") == [4194304, 327680]
    assert sizes(seed, "tensor", "all_reduce", "backward") == [4194304]
    tensor = next(c for c in seed.captures if c.strategy == "tensor")
    assert tensor.settings["plan"] == {
        "fc1": "ColwiseParallel",
        "fc2": "RowwiseParallel",
        "fc3": "ColwiseParallel",
        "fc4": "RowwiseParallel",
    }


def test_ddp_buckets_of_a_deep_linear_model_match_pytorchs_own_assignment():
    result = inspect("deep_linear.py", "DeepLinear", "1024", CaptureSettings(world_size=4, batch_size=4))
    # Iteration 0 reduces everything in one bucket; from then on buckets follow gradient-ready order.
    assert sizes(result, "ddp", "all_reduce", "backward", "first_step") == [25231400]
    assert sizes(result, "ddp", "all_reduce", "backward") == [4239400, 20992000]

    model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(6)], nn.Linear(1024, 10))
    reversed_parameters = list(reversed(list(model.parameters())))
    buckets, _ = torch.distributed._compute_bucket_assignment_by_size(
        reversed_parameters, [1024 * 1024, 25 * 1024 * 1024]
    )
    expected = [sum(reversed_parameters[i].numel() * 4 for i in bucket) for bucket in buckets]
    assert sizes(result, "ddp", "all_reduce", "backward") == expected
    ddp = next(c for c in result.captures if c.strategy == "ddp")
    assert (ddp.settings["first_bucket_bytes"], ddp.settings["bucket_bytes"]) == (1024 * 1024, 25 * 1024 * 1024)


def test_an_explicit_bucket_cap_also_caps_the_first_bucket():
    # torch 2.13: the 1 MiB first bucket exists only while bucket_cap_mb is left at its default.
    result = inspect("deep_linear.py", "DeepLinear", "1024", CaptureSettings(world_size=4, bucket_cap_mb=25))
    assert sizes(result, "ddp", "all_reduce", "backward") == [25231400]


def test_a_gpt2_sized_source_is_read_without_allocating_its_weights():
    result = inspect("gpt2.py", "GPT2", "1024", input_dtype="int64")
    # GPT-2 small as HuggingFace counts it (tied embeddings once), from 124M fake parameters.
    assert result.inventory.parameter_count == 124439808 == resolve_model("gpt2").parameter_count
    assert [p.name for p in result.inventory.parameters][:3] == ["wte.weight", "wpe.weight", "h.0.ln_1.weight"]
    assert result.inventory.activations[-1].model_dump() == {
        "module": "lm_head",
        "module_type": "Linear",
        "shape": [1024, 50257],
        "dtype": "float32",
    }


def test_constructor_kwargs_reach_the_model():
    result = inspect("deep_linear.py", "DeepLinear", "64", model_kwargs={"layers": 2, "width": 64, "classes": 3})
    assert result.inventory.parameter_count == 2 * (64 * 64 + 64) + 64 * 3 + 3
    assert result.captures == []


@pytest.mark.parametrize(
    ("sequence_parallel", "expected"),
    [
        (False, [("all_reduce", "forward", 65536, 65536), ("all_reduce", "backward", 65536, 65536)]),
        # Megatron's sequence parallelism: the same b·s·h bytes as all-gather + reduce-scatter pairs.
        (True, [("all_gather", "forward", 65536, 16384), ("reduce_scatter", "forward", 65536, 16384),
                ("all_gather", "backward", 65536, 16384), ("reduce_scatter", "backward", 65536, 16384)]),
    ],
)  # fmt: skip
def test_sequence_parallel_turns_all_reduces_into_gathers_and_scatters(sequence_parallel, expected):
    capture = CaptureSettings(world_size=4, batch_size=8, sequence_parallel=sequence_parallel, strategies=["tensor"])
    result = inspect("mlp_block.py", "MLPBlock", "32,64", capture)
    (tensor,) = result.captures
    # b·s·h·4 bytes = 8 × 32 × 64 × 4 = 65536
    assert [(c.op, c.phase, c.bytes, c.per_rank_bytes) for c in tensor.steady_step] == expected
    norm = {"norm": "SequenceParallel"} if sequence_parallel else {}
    assert tensor.settings["plan"] == {"up": "ColwiseParallel", "down": "RowwiseParallel", **norm}


def test_a_failing_upload_is_reported_with_its_line():
    # Every kind of bad source goes through the API in tests/api/test_models.py; here the typed error.
    with pytest.raises(SandboxError) as caught:
        inspect("syntax_error.txt", "Broken", "4")
    assert (caught.value.kind, caught.value.line) == ("syntax_error", 4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "input shape '' must list at least one positive size, e.g. 1,28,28"),
        ("1,x", "input shape '1,x' is not a comma-separated list of integers, e.g. 1,28,28"),
        ("0,4", "input shape '0,4' must list at least one positive size, e.g. 1,28,28"),
    ],
)
def test_input_shapes_are_checked_before_anything_runs(text, message):
    with pytest.raises(PytorchSourceError) as caught:
        parse_input_shape(text)
    assert str(caught.value) == message
    assert parse_input_shape("[1, 28, 28]") == [1, 28, 28]
