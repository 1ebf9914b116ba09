"""A mixture of experts written as PyTorch source: read and captured where the fake process group can run
it (DDP, FSDP2), and expert parallelism refused with the reason."""

import pytest

from emuplan.sandbox.runner import SandboxPolicy
from emuplan.workload.document import PlanningError, PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.pytorch_source import (
    CaptureSettings,
    PytorchSourceOptions,
    capture_for_plan,
    inspect_pytorch_source,
    parse_input_shape,
)
from paths import MODELS

pytestmark = pytest.mark.sandbox

LIMITS = SandboxPolicy(timeout_s=60)
OPTIONS = PytorchSourceOptions(model_class="MaskMoE", input_shape=parse_input_shape("64"))


def test_a_mask_routed_moe_source_plans_from_its_capture_and_refuses_expert_parallelism() -> None:
    source = (MODELS / "mask_moe.py").read_text()
    result = inspect_pytorch_source(
        source, "mask_moe.py", OPTIONS, LIMITS, capture=CaptureSettings(world_size=2, strategies=["ddp"])
    )
    request = PlanRequest(model="mask_moe", mode="framework", gpus=2, param_dtype="float32")
    document = capture_for_plan(plan_workload(request, result.inventory), source, "mask_moe.py", OPTIONS, LIMITS)
    # norm 2 × 64, router 4 × 64 + 4, experts 4 × (64 × 64 + 64), fp32: one DDP bucket, as captured.
    gradients = (2 * 64 + 4 * 64 + 4 + 4 * (64 * 64 + 64)) * 4
    assert document.kccb_source == "captured"
    assert [(c.op.value, c.bytes_total) for c in document.captured] == [("all_reduce", gradients)]
    with pytest.raises(
        PlanningError,
        match=r"^ep: mask_moe is PyTorch source, whose routing is its own code: PyTorch has no expert-parallel "
        r"wrapper to capture it with",
    ):
        plan_workload(request.model_copy(update={"ep": 2}), result.inventory.model_copy(update={"name": "mask_moe"}))
