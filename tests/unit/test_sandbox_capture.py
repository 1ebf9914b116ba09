"""PyTorch source through the sandbox: the inventory under FakeTensorMode and the collectives PyTorch
itself issues under DDP, FSDP2 and DTensor tensor parallelism (torch's fake process group, 4 ranks)."""

import importlib.util
from itertools import pairwise

import pytest
import torch
from torch import nn

from ddp_world import ddp_step_collectives
from emuplan.measure.options import WorkloadSource
from emuplan.measure.workload import measurement_steps
from emuplan.sandbox.runner import SandboxError, SandboxPolicy
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanningError, PlanRequest
from emuplan.workload.inventory import ModelInventory
from emuplan.workload.planner import plan_workload
from emuplan.workload.pytorch_source import (
    CaptureSettings,
    PytorchSourceError,
    PytorchSourceOptions,
    PytorchSourceResult,
    capture_for_plan,
    inspect_pytorch_source,
    parse_input_shape,
)
from emuplan.workload.sources import resolve_model
from fsdp_world import fsdp2_step_collectives
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


def test_a_small_model_is_read_on_real_tensors_without_importing_torch_dynamo():
    """FakeTensorMode's first use imports torch._dynamo, which takes as long as importing torch: a
    small model that does nothing value-dependent is read without it (its forward checks)."""
    source = (
        "import sys\nfrom torch import nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n"
        "    def forward(self, x):\n"
        "        assert 'torch._dynamo' not in sys.modules, 'torch._dynamo was imported'\n"
        "        return self.fc(x)\n"
    )
    options = PytorchSourceOptions(model_class="Model", input_shape=[4])
    inventory = inspect_pytorch_source(source, "model.py", options, LIMITS).inventory
    assert [(p.name, p.shape) for p in inventory.parameters] == [("fc.weight", [2, 4]), ("fc.bias", [2])]
    assert [(a.module, a.shape) for a in inventory.activations] == [("fc", [2])]
    assert inventory.gradient_order == ["fc.bias", "fc.weight"]


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


def test_ddp_analytic_list_equals_the_capture_for_a_source_model():
    """Gradient order from the sandboxed run (head registered first, executed last), the frozen stem
    skipped, BatchNorm's running statistics broadcast before each forward: the plan equals DDP's capture."""
    result = inspect("head_first.py", "HeadFirst", "1024", CaptureSettings(world_size=4, strategies=["ddp"]))
    request = PlanRequest(model="head_first", strategy="data", mode="framework", gpus=4, param_dtype="float32")
    document = plan_workload(request, result.inventory)
    analytic = [(c.op.value, c.phase.value, c.bytes_total) for c in document.collectives]
    captured = [(c.op, c.phase, c.bytes) for c in result.captures[0].steady_step]
    # head + out_proj close the 1 MiB first bucket; norm and body are the second; the stem has none.
    # Broadcasts: running_mean + running_var (2 × 2048 × 4 B), then num_batches_tracked (int64).
    expected = [
        ("broadcast", "forward", 16384),
        ("broadcast", "forward", 8),
        ("all_reduce", "backward", 81960 + 16785408),
        ("all_reduce", "backward", 16384 + 16785408 + 8396800),
    ]
    assert analytic == expected
    assert captured == expected


def test_kccb_export_and_measurement_come_from_the_capture_where_one_exists():
    """An inventory stored before gradient order and buffers were read (reverse registration order, no
    broadcasts) plans other buckets than DDP issues: the export and the measurement follow the capture."""
    options = PytorchSourceOptions(model_class="HeadFirst", input_shape=[1024])
    source = (MODELS / "head_first.py").read_text()
    stored = inspect_pytorch_source(source, "head_first.py", options, LIMITS).inventory
    stored = stored.model_copy(update={"gradient_order": [], "buffers": []})
    request = PlanRequest(model="head_first", strategy="data", mode="framework", gpus=4, param_dtype="float32")
    analytic = plan_workload(request, stored)
    assert analytic.kccb_source == "analytic"
    assert analytic.kccb.data_sizes == [16785408, 8396800 + 16384 + 16785408 + 81960]

    document = capture_for_plan(analytic, source, "head_first.py", options, LIMITS)
    assert document.kccb_source == "captured"
    assert [(t.algorithm, t.data_sizes) for t in document.kccb_list()] == [
        ("ALGO_BROADCAST_PARALLEL", [16384, 8]),
        ("ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING", [81960 + 16785408, 16384 + 16785408 + 8396800]),
    ]
    assert document.exported_collectives() == document.captured
    assert [c.bytes_total for c in document.collectives] == [16785408, 8396800 + 16384 + 16785408 + 81960]
    assert len(document.capture_differences) == 6
    assert "The KCCB export and a measurement of this plan use this captured list" in document.notes[-1]
    plan_json = document.model_dump(mode="json")
    for source_view in WorkloadSource:
        steps = measurement_steps(plan_json, 4, source_view)
        assert [(s.op.value, s.bytes_total) for s in steps] == [
            ("broadcast", 16384),
            ("broadcast", 8),
            ("all_reduce", 81960 + 16785408),
            ("all_reduce", 16384 + 16785408 + 8396800),
        ]


def test_a_mask_routed_mixture_of_experts_is_read_with_symbolic_sizes():
    """Each expert's input size depends on the router's choice: a shape environment keeps it symbolic
    (an unbacked size), so the model is read and captured instead of refused."""
    result = inspect("mask_moe.py", "MaskMoE", "64", CaptureSettings(world_size=2, strategies=["ddp", "fsdp2"]))
    assert [p.name for p in result.inventory.parameters] == [
        "norm.weight", "norm.bias", "router.weight", "router.bias",
        *(f"experts.{i}.{kind}" for i in range(4) for kind in ("weight", "bias")),
    ]  # fmt: skip
    # The experts' outputs have no per-sample shape; the layer norm's and the router's (called twice) have.
    assert [(a.module, a.shape) for a in result.inventory.activations] == [
        ("norm", [64]),
        ("router", [4]),
        ("router", [4]),
    ]
    ddp = next(c for c in result.captures if c.strategy == "ddp")
    assert [c.op for c in ddp.steady_step] == ["all_reduce"]
    fsdp = next(c for c in result.captures if c.strategy == "fsdp2")
    assert {c.op for c in fsdp.steady_step} == {"all_gather", "reduce_scatter"}


def test_a_branch_on_tensor_values_is_refused_naming_the_real_cause():
    with pytest.raises(SandboxError) as error:
        inspect("mask_moe.py", "ValueBranch", "8")
    assert error.value.kind == "data_dependent"
    assert error.value.message.startswith(
        "forward() (mask_moe.py, line 33) computes a shape or takes a branch from tensor values, which shape "
        "inference without data (FakeTensorMode) cannot follow: "
    )
    assert "input of shape" not in error.value.message


def test_fsdp2_and_tensor_parallel_of_a_source_are_the_capture_itself():
    """The analytic FSDP2 units and DTensor layout cannot know how the user's code wraps and runs its
    modules (issue 18's audit: norms, experts, routers, GQA attention), so for a source the capture is
    the plan: no analytic list beside it, nothing to disagree with."""
    options = PytorchSourceOptions(model_class="Classifier", input_shape=[1, 28, 28])
    source = (MODELS / "seed_classifier.py").read_text()
    inventory = inspect_pytorch_source(source, "seed_classifier.py", options, LIMITS).inventory
    request = PlanRequest(model="seed", strategy="tensor", mode="framework", gpus=4)
    document = capture_for_plan(plan_workload(request, inventory), source, "seed_classifier.py", options, LIMITS)
    assert document.collectives == document.captured
    assert [(c.op.value, c.phase.value, c.bytes_total) for c in document.collectives] == [
        ("all_reduce", "forward", 4194304),
        ("all_reduce", "forward", 327680),
        ("all_reduce", "backward", 4194304),
    ]
    assert (document.capture_differences, document.kccb_source) == ([], "captured")

    hybrid = PlanRequest(model="seed", strategy="hybrid", mode="framework", tp=2, pp=2, gpus=4)
    with pytest.raises(PytorchSourceError, match=r"^seed_classifier.py: FSDP2 and DTensor tensor parallelism of a "):
        capture_for_plan(plan_workload(hybrid, inventory), source, "seed_classifier.py", options, LIMITS)


@pytest.mark.parametrize(
    ("strategy", "count"), [({"dp_impl": "fsdp2"}, 4), ({"dp_impl": "ddp"}, 1), ({"strategy": "tensor"}, 4)]
)
def test_a_captured_micro_batch_counts_as_often_as_the_step_runs_it(strategy: dict, count: int):
    """The capture runs one micro-batch; FSDP2 gathers and reduce-scatters in every one of the step's 4 (as real
    FSDP2 does, tests/unit/test_fsdp_micro_batches.py) and tensor parallelism all-reduces in each, DDP
    all-reduces once (no_sync until the last), as the analytic plan counts them."""
    options = PytorchSourceOptions(model_class="Classifier", input_shape=[1, 28, 28])
    source = (MODELS / "seed_classifier.py").read_text()
    inventory = inspect_pytorch_source(source, "seed_classifier.py", options, LIMITS).inventory
    request = PlanRequest(**{"model": "seed", "mode": "framework", "gpus": 4, "micro_batches": 4, **strategy})
    document = capture_for_plan(plan_workload(request, inventory), source, "seed_classifier.py", options, LIMITS)
    assert {c.count_per_step for c in document.captured} == {count}
    assert document.capture_differences == []
    assert "one micro-batch of 4 (count_per_step counts the step)" in document.notes[-1]


# --- DDP's capture on a one-token sample, checked against real DDP on the whole sample --------------

SMALL_GPT2 = {"vocab": 4096, "positions": 64, "hidden": 512, "layers": 4, "heads": 8}


def fixture_class(fixture: str, class_name: str) -> type[nn.Module]:
    spec = importlib.util.spec_from_file_location(fixture.removesuffix(".py"), MODELS / fixture)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, class_name)


def small_gpt2() -> nn.Module:
    return fixture_class("gpt2.py", "GPT2")(**SMALL_GPT2)


def small_gpt2_tokens() -> torch.Tensor:
    return torch.randint(0, SMALL_GPT2["vocab"], (1, 64))


def length_routed() -> nn.Module:
    return fixture_class("length_routed.py", "LengthRouted")()


def length_routed_tokens() -> torch.Tensor:
    return torch.randint(0, 1000, (1, 16))


def token_mask_moe() -> nn.Module:
    return fixture_class("mask_moe.py", "TokenMaskMoE")()


def token_mask_moe_tokens() -> torch.Tensor:
    return torch.randint(0, 1000, (1, 32))


def ddp_capture(fixture: str, model_class: str, input_shape: str, **options) -> tuple[dict, dict[str, list[int]]]:
    """The DDP capture's settings, and its steady step as ``ddp_step_collectives`` reports real DDP's."""
    result = inspect(fixture, model_class, input_shape, CaptureSettings(world_size=2, strategies=["ddp"]), **options)
    assert {c.op for c in result.captures[0].steady_step} <= {"all_reduce", "broadcast"}
    steady = {
        "buckets": sizes(result, "ddp", "all_reduce", "backward"),
        "broadcasts": sizes(result, "ddp", "broadcast", "forward"),
    }
    return result.captures[0].settings, steady


def test_a_tied_gpt_is_captured_on_one_token_as_real_ddp_buckets_its_whole_sample():
    """lm_head shares wte's weight, whose gradient is ready last (after both uses): one token makes the
    gradients ready in the same order as 64, so the capture's two steps on one token issue what real DDP
    on a gloo group issues at its third step on 64 tokens."""
    settings, steady = ddp_capture("gpt2.py", "GPT2", "64", input_dtype="int64", model_kwargs=SMALL_GPT2)
    assert settings["sample_shape"] == [1]
    expected = {"buckets": [4200448, 29421568, 25339904], "broadcasts": []}
    assert steady == expected
    assert ddp_step_collectives(small_gpt2, small_gpt2_tokens) == expected


def test_mask_routed_experts_built_with_zeros_bucket_as_real_ddp_with_random_weights():
    """The one-token trial builds the model with zeros for its random initial values: its router sends
    every token to the first expert, yet every expert's gradient is ready in the inventory's order (an
    expert with no rows still runs), so the trial is kept and equals real DDP with random weights."""
    settings, steady = ddp_capture("mask_moe.py", "TokenMaskMoE", "32", input_dtype="int64")
    assert settings["sample_shape"] == [1]
    # router + the 4 experts close the 1 MiB first bucket; the norm and the embedding are the second.
    expected = {
        "buckets": [(4 * 256 + 4) * 4 + 4 * (256 * 256 + 256) * 4, 2 * 256 * 4 + 1000 * 256 * 4],
        "broadcasts": [],
    }
    assert steady == expected
    assert ddp_step_collectives(token_mask_moe, token_mask_moe_tokens) == expected


def test_a_model_whose_gradient_order_follows_the_length_is_captured_on_its_whole_sample():
    """On one token the bias-free layer's gradient would be ready last and the first bucket would hold
    the other layer (1050624 B): the order differs from the inventory's, so the capture runs 16 tokens."""
    settings, steady = ddp_capture("length_routed.py", "LengthRouted", "16", input_dtype="int64")
    assert settings["sample_shape"] == [16]
    expected = {"buckets": [1048576, 1050624 + 2048000], "broadcasts": []}
    assert steady == expected
    assert ddp_step_collectives(length_routed, length_routed_tokens) == expected


def test_a_model_issuing_its_own_collectives_is_captured_on_its_whole_sample():
    """Its forward all-reduces its [1, 64, 32] activations (8192 B): a size one token would change."""
    result = inspect(
        "forward_all_reduce.py", "ForwardAllReduce", "64",
        CaptureSettings(world_size=2, strategies=["ddp"]), input_dtype="int64",
    )  # fmt: skip
    ddp = result.captures[0]
    assert ddp.settings["sample_shape"] == [64]
    expected = [("all_reduce", "forward", 8192), ("all_reduce", "backward", 32 * 32 * 4 + 32 * 4 + 1000 * 32 * 4)]
    assert [(c.op, c.phase, c.bytes) for c in ddp.first_step] == expected
    assert [(c.op, c.phase, c.bytes) for c in ddp.steady_step] == expected


# --- FSDP2's mixed precision and DDP's find_unused_parameters, against real runs on a gloo group ----


def two_blocks() -> nn.Module:
    return fixture_class("two_blocks.py", "TwoBlocks")()


def two_blocks_input() -> torch.Tensor:
    return torch.randn(2, 16, 256)


def test_fsdp2_with_bf16_parameters_and_fp32_gradients_gathers_in_bf16_and_reduce_scatters_in_fp32():
    """--param-dtype bfloat16 --grad-dtype float32 is FSDP2's MixedPrecisionPolicy(param_dtype=bfloat16,
    reduce_dtype=float32): each unit's parameters all-gathered in bf16, its gradients reduce-scattered in fp32,
    step for step as real FSDP2 on a gloo group of 2 processes issues them. The issue-30 audit's two-block model:
    26 collectives, 6,317,568 B per rank (all in fp32 they would be 9,475,072)."""
    options = PytorchSourceOptions(model_class="TwoBlocks", input_shape=[16, 256])
    source = (MODELS / "two_blocks.py").read_text()
    inventory = inspect_pytorch_source(source, "two_blocks.py", options, LIMITS).inventory
    request = PlanRequest(
        model="two_blocks", strategy="data", mode="framework", gpus=2, dp_impl="fsdp2",
        param_dtype="bfloat16", grad_dtype="float32",
    )  # fmt: skip
    document = capture_for_plan(plan_workload(request, inventory), source, "two_blocks.py", options, LIMITS)
    planned = [(c.op.value, c.phase.value, c.dtype, c.bytes_total) for c in document.collectives]
    # Each Linear is a unit (parameters: qkv 256 × 768 + 768, proj 256 × 256 + 256, up 256 × 1024 + 1024, down
    # 1024 × 256 + 256); the root holds the five LayerNorms (10 × 256).
    numel = {"qkv": 197_376, "proj": 65_792, "up": 263_168, "down": 262_400}
    root = 2_560

    def gather(phase: str, elements: int) -> tuple[str, str, str, int]:
        return ("all_gather", phase, "bfloat16", 2 * elements)

    def scatter(elements: int) -> tuple[str, str, str, int]:
        return ("reduce_scatter", "backward", "float32", 4 * elements)

    forward = [gather("forward", root), *(gather("forward", numel[u]) for u in ["qkv", "proj", "up", "down"] * 2)]
    # Backward walks the units in reverse, gathering each (not the root, kept from forward) and prefetching the
    # next one's gather before reduce-scattering the gradients of the one just done; the root's go last.
    reverse = [numel[u] for u in ["down", "up", "proj", "qkv"] * 2]
    backward = [gather("backward", reverse[0])]
    for done, following in pairwise(reverse):
        backward += [gather("backward", following), scatter(done)]
    backward += [scatter(reverse[-1]), scatter(root)]
    assert planned == forward + backward
    assert (len(planned), sum(c.bytes_per_rank * c.count_per_step for c in document.collectives)) == (26, 6_317_568)
    assert (document.capture_differences, document.kccb_source) == ([], "captured")
    real = fsdp2_step_collectives(two_blocks, two_blocks_input, "bfloat16", "float32")
    ops = {"_allgather_base_.default": "all_gather", "_reduce_scatter_base_.default": "reduce_scatter"}
    assert [(ops[op], phase, dtype, size) for op, phase, dtype, size in real] == planned


def unused_branch() -> nn.Module:
    return fixture_class("unused_branch.py", "UnusedBranch")()


def unused_branch_input() -> torch.Tensor:
    return torch.randn(2, 512)


@pytest.fixture(scope="module")
def unused_branch_source() -> tuple[str, PytorchSourceOptions, ModelInventory]:
    options = PytorchSourceOptions(model_class="UnusedBranch", input_shape=[512])
    source = (MODELS / "unused_branch.py").read_text()
    return source, options, inspect_pytorch_source(source, "unused_branch.py", options, LIMITS).inventory


@pytest.mark.parametrize(
    ("bucket_cap_mb", "buckets"), [(None, [1_598_504, 1_048_576]), (1, [23_592, 1_574_912, 1_048_576])]
)
def test_find_unused_parameters_keeps_the_buckets_ddp_filled_in_registration_order(
    unused_branch_source, bucket_cap_mb: float | None, buckets: list[int]
):
    """Registered: fc1 (1,048,576 + 2,048 B), unused (1,572,864 + 3,072), fc2 (20,480 + 40). With
    find_unused_parameters=True DDP never rebuilds the buckets it filled in that order at construction (fc1's
    weight closes the 1 MiB first one) and launches them last-filled first; after them it all-reduces its map
    of the 6 parameters used, one int32 each: what the plan lists, the capture records and real DDP on a gloo
    group of 2 processes sends."""
    source, options, inventory = unused_branch_source
    request = PlanRequest(
        model="unused_branch", strategy="data", mode="framework", gpus=2,
        find_unused_parameters=True, bucket_cap_mb=bucket_cap_mb,
    )  # fmt: skip
    document = capture_for_plan(plan_workload(request, inventory), source, "unused_branch.py", options, LIMITS)
    planned = [(c.dtype, c.bytes_total) for c in document.collectives if c.op is CollectiveOp.ALL_REDUCE]
    assert planned == [*(("float32", size) for size in buckets), ("int32", 24)]
    assert (document.capture_differences, document.kccb_source) == ([], "captured")
    real = ddp_step_collectives(
        unused_branch, unused_branch_input, bucket_cap_mb=bucket_cap_mb, find_unused_parameters=True
    )
    assert real == {"buckets": buckets, "broadcasts": [], "used_map": [24]}


def test_ddp_of_a_model_with_unused_parameters_is_refused_with_ddps_reason_without_the_option(unused_branch_source):
    """Real DDP without find_unused_parameters stops at the second step; the plan says why instead of
    listing buckets DDP never sends."""
    _, _, inventory = unused_branch_source
    request = PlanRequest(model="unused_branch", strategy="data", mode="framework", gpus=2)
    with pytest.raises(PlanningError, match=r"^find_unused_parameters: unused.weight, unused.bias got no gradient"):
        plan_workload(request, inventory)
    with pytest.raises(Exception, match="Expected to have finished reduction in the prior iteration"):
        ddp_step_collectives(unused_branch, unused_branch_input)
