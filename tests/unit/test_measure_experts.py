"""Measuring an expert-parallel plan's all-to-all trial on local gloo processes: all_to_all_single gets
the planned per-rank buffer, as nccl-tests' alltoall does."""

from emuplan.measure.launcher import LocalLauncher
from emuplan.measure.options import MeasurementOptions
from emuplan.measure.workload import group_size_notes, measurement_steps
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model

MIXTRAL_ALL_TO_ALL = 67_108_864  # 1 × 4096 tokens × top-2 × hidden 4096 × 2 bytes


def expert_parallel_trial_only() -> dict:
    """The mixtral-8x7b --ep 8 plan, with only its KCCB all-to-all trial's tokens (the DP buckets would need GBs;
    the routing probabilities' 16 KiB all-to-all is measured the same way)."""
    request = PlanRequest(model="mixtral-8x7b", mode="framework", ep=8)
    document = plan_workload(request, resolve_model("mixtral-8x7b")).model_dump(mode="json")
    (trial,) = [trial for trial in document["kccb"] if trial["collective"] == CollectiveOp.ALL_TO_ALL.value]
    return {**document, "kccb": {**trial, "data_sizes": [MIXTRAL_ALL_TO_ALL]}}


def test_the_all_to_all_trial_hands_each_rank_its_whole_buffer() -> None:
    document = expert_parallel_trial_only()
    (step,) = measurement_steps(document, world_size=2)
    assert (step.op, step.bytes_total, step.input_bytes, step.output_bytes, step.dtype) == (
        CollectiveOp.ALL_TO_ALL,
        MIXTRAL_ALL_TO_ALL,
        MIXTRAL_ALL_TO_ALL,
        MIXTRAL_ALL_TO_ALL,
        "bfloat16",
    )
    assert step.label == "MoE token dispatch + combine (per MoE layer ×2)"
    assert group_size_notes([step], 2) == [
        "the plan runs all_to_all over groups of 8 ranks; measured over all 2 ranks with the plan's bytes_total"
    ]

    options = MeasurementOptions(world_size=2, backend="gloo", iterations=1, warmup=0, timeout_s=120)
    (result,) = LocalLauncher([document], options, lambda event: None).run()
    assert [step["op"] for step in result.record["steps"]] == ["all_to_all"]
    assert result.record["handed_bytes"] == [[[MIXTRAL_ALL_TO_ALL, MIXTRAL_ALL_TO_ALL]]] * 2
    (row,) = result.csv_text.splitlines()[1:]
    assert row.split(",")[1:3] == ["all_to_all", str(MIXTRAL_ALL_TO_ALL)]
