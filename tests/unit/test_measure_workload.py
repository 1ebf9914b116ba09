"""Which collectives a measurement runs and the buffer sizes it hands torch.distributed (no processes)."""

import pytest

from emuplan.measure.options import WorkloadSource
from emuplan.measure.workload import (
    MeasurementError,
    group_size_notes,
    measurement_steps,
    planned_trials,
)
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model


def planned(op: str, bytes_total: int, *, group_size: int = 4, count: int = 1, phase: str = "backward", **extra):
    per_rank = bytes_total // group_size if op in ("all_gather", "reduce_scatter") else bytes_total
    return {
        "op": op,
        "bytes_total": bytes_total,
        "bytes_per_rank": per_rank,
        "dtype": "float32",
        "group_size": group_size,
        "count_per_step": count,
        "phase": phase,
        "parallel_dim": "dp",
        "label": f"{op} {bytes_total}",
        "ideal_time_us": 12.5,
        **extra,
    }


def kccb(collective: str, sizes: list[int], **extra) -> dict:
    return {"collective": collective, "data_sizes": sizes, "iterations": 8, **extra}


# The seed tutorials' three plans, shaped like the planner's document (DESIGN §1.1).
SEED_DATA = {"trials": 8, "collectives": [planned("all_reduce", 971048)], "kccb": kccb("all_reduce", [971048])}
SEED_TENSOR = {
    "trials": 8,
    "collectives": [planned("all_gather", 25755648, phase="forward")],
    "kccb": kccb("all_gather", [6438912], group_size=4),
}
SEED_PIPELINE = {
    "trials": 8,
    "collectives": [planned("all_reduce", size) for size in (803840, 131584, 33024, 2600)],
    "kccb": kccb("all_reduce", [2600, 33024, 131584, 803840]),
}


def sizes(steps) -> list[tuple[str, int, int, int]]:
    return [(step.op.value, step.bytes_total, step.input_bytes, step.output_bytes) for step in steps]


def test_seed_data_parallel_runs_one_all_reduce_of_the_gradient_bytes() -> None:
    steps = measurement_steps(SEED_DATA, 4)
    assert sizes(steps) == [("all_reduce", 971048, 971048, 971048)]
    assert steps[0].dtype == "float32"
    assert steps[0].ideal_time_us == 12.5


def test_seed_tensor_parallel_kccb_size_is_the_per_rank_piece_of_the_all_gather() -> None:
    steps = measurement_steps(SEED_TENSOR, 4)
    assert sizes(steps) == [("all_gather", 25755648, 6438912, 25755648)]
    assert steps[0].label == "all_gather 25755648"


def test_seed_pipeline_keeps_kccb_order_last_layer_first() -> None:
    steps = measurement_steps(SEED_PIPELINE, 4)
    assert [step.bytes_total for step in steps] == [2600, 33024, 131584, 803840]
    assert [step.label for step in steps] == [f"all_reduce {size}" for size in (2600, 33024, 131584, 803840)]
    assert planned_trials(SEED_PIPELINE) == 8


def test_stored_plan_json_wrapping_the_workload_is_accepted() -> None:
    assert sizes(measurement_steps({"id": 3, "workload": SEED_DATA}, 2)) == [("all_reduce", 971048, 971048, 971048)]


def test_kccb_list_without_matching_collective_uses_the_trial_group_size() -> None:
    document = {
        "trials": 2,
        "collectives": [],
        "kccb": [
            kccb("reduce_scatter", [1024], group_size=8),
            {"algorithm": "ALGO_BROADCAST_PARALLEL", "data_sizes": [300], "iterations": 2},
        ],
    }
    steps = measurement_steps(document, 8)
    assert sizes(steps) == [("reduce_scatter", 8192, 8192, 1024), ("broadcast", 300, 300, 300)]
    assert steps[0].label == "reduce_scatter 1024 B"


def test_nccl_tests_buffer_convention_for_every_op_of_the_collectives_list() -> None:
    document = {
        "trials": 1,
        "kccb": kccb("all_reduce", [4096]),
        "collectives": [
            planned("all_reduce", 4096, count=2),
            planned("all_gather", 8192),
            planned("reduce_scatter", 8192),
            planned("broadcast", 1001),
            planned("reduce", 512),
            planned("all_to_all", 4096),
            planned("send_recv", 2048, group_size=2, phase="forward", label="stage 2 → 3 activation"),
            planned("send_recv", 2048, group_size=2, phase="backward"),
        ],
    }
    steps = measurement_steps(document, 4, WorkloadSource.COLLECTIVES)
    assert sizes(steps) == [
        ("all_reduce", 4096, 4096, 4096),
        ("all_reduce", 4096, 4096, 4096),
        ("all_gather", 8192, 2048, 8192),
        ("reduce_scatter", 8192, 8192, 2048),
        ("broadcast", 1001, 1001, 1001),
        ("reduce", 512, 512, 512),
        ("all_to_all", 4096, 4096, 4096),
        ("send_recv", 2048, 2048, 2048),
        ("send_recv", 2048, 2048, 2048),
    ]
    # 1001 bytes are not whole float32 elements: they go on the wire as bytes.
    assert [step.dtype for step in steps][4:6] == ["uint8", "float32"]
    # Stages from the planner's label; without one, backward goes from rank 1 back to rank 0.
    assert [(step.sender, step.receiver) for step in steps][-2:] == [(2, 3), (1, 0)]
    assert group_size_notes(steps, 4) == []  # send/recv pairs (group 2) involve their two stages only
    wider = measurement_steps({"collectives": [planned("all_gather", 64, group_size=8)]}, 4, WorkloadSource.COLLECTIVES)
    assert group_size_notes(wider, 4) == [
        "the plan runs all_gather over groups of 8 ranks; measured over all 4 ranks with the plan's bytes_total"
    ]


@pytest.mark.parametrize(
    ("document", "world_size", "source", "message"),
    [
        (
            {"kccb": kccb("all_gather", [10], group_size=3), "collectives": []},
            4,
            WorkloadSource.KCCB,
            "plan.kccb[0].data_sizes[0]: all_gather of 30 bytes does not split into 4 equal per-rank pieces",
        ),
        (
            {"kccb": kccb("all_gather", [10]), "collectives": []},
            4,
            WorkloadSource.KCCB,
            "plan.kccb[0].data_sizes[0]: 10 bytes of all_gather is a per-rank piece, but the trial names no group_size",
        ),
        (
            {"kccb": kccb("gossip", [10])},
            4,
            WorkloadSource.KCCB,
            "plan.kccb[0].collective: unknown collective 'gossip'",
        ),
        ({"kccb": kccb("all_reduce", [])}, 4, WorkloadSource.KCCB, "plan.kccb[0].data_sizes: expected a non-empty"),
        (
            {"kccb": kccb("all_reduce", ["1k"])},
            4,
            WorkloadSource.KCCB,
            "plan.kccb[0].data_sizes[0]: expected an integer byte count, got '1k'",
        ),
        ({"kccb": kccb("all_reduce", [0])}, 4, WorkloadSource.KCCB, "all_reduce of 0 bytes cannot be measured"),
        (
            {"collectives": [planned("send_recv", 64)]},
            1,
            WorkloadSource.COLLECTIVES,
            "plan.collectives[0]: send/recv between pipeline stages needs a world size of at least 2",
        ),
        (
            {"collectives": [planned("send_recv", 64, label="stage 4 → 5 activation")]},
            4,
            WorkloadSource.COLLECTIVES,
            "plan.collectives[0]: send/recv from stage 4 to stage 5 needs at least 6 ranks; measuring with 4",
        ),
        (
            {"collectives": [planned("all_reduce", 64, count=0)]},
            2,
            WorkloadSource.COLLECTIVES,
            "plan.collectives[0].count_per_step: expected a positive integer, got 0",
        ),
        ({"kccb": "ring"}, 2, WorkloadSource.KCCB, "plan: 'kccb' must be an object or a non-empty list"),
    ],
)
def test_unmeasurable_plans_are_refused_naming_the_field(document, world_size, source, message) -> None:
    with pytest.raises(MeasurementError) as raised:
        measurement_steps(document, world_size, source)
    assert message in str(raised.value)


def test_op_named_only_by_kai_algorithm() -> None:
    document = {"kccb": {"algorithm": "ALGO_ALL_REDUCE_DOUBLE_BINARY_TREE", "data_sizes": [64], "iterations": 3}}
    assert measurement_steps(document, 2)[0].op is CollectiveOp.ALL_REDUCE
    assert planned_trials(document) == 3


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("data", [("all_reduce", 971048, 971048, 971048)]),
        ("tensor", [("all_gather", 25755648, 6438912, 25755648)]),
        ("pipeline", [("all_reduce", size, size, size) for size in (2600, 33024, 131584, 803840)]),
    ],
)
def test_the_planners_seed_plans_measure_the_seed_sizes(strategy: str, expected: list) -> None:
    request = PlanRequest(model="fashion-mnist-mlp", strategy=strategy)
    document = plan_workload(request, resolve_model("fashion-mnist-mlp", allow_files=False)).model_dump(mode="json")
    assert sizes(measurement_steps(document, 4)) == expected
    assert planned_trials(document) == 8
