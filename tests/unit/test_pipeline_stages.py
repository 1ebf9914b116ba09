"""Every pipeline stage counted: the plan lists each stage's collectives, the Chakra traces run exactly those on
every rank of the stage, and the step cost costs each stage from the same list, the step being the stage that
takes longest. Replayed against each other for GPT-2 TP2×PP2×DP2 and Llama-2-7B over 4 stages."""

from collections import Counter

import pytest
from chakra_replay import COMMUNICATION, Bundle

from emuplan.results.analysis.step_cost import step_cost
from emuplan.results.formats import NCCL_TESTS
from emuplan.workload.chakra import et_def_pb2 as et
from emuplan.workload.chakra.bundle import attribute, bundle_files
from emuplan.workload.chakra.schedule import ComputeModel, build_traces, role_of, simulated_comm_size
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model

PLANS = {
    "gpt2 tp2 pp2 dp2": {"model": "gpt2", "strategy": "hybrid", "tp": 2, "pp": 2, "dp": 2, "batch_size": 8,
                         "micro_batches": 4, "seq_len": 1024},
    "llama-2-7b pp4": {"model": "llama-2-7b", "strategy": "pipeline", "gpus": 4, "batch_size": 4,
                       "micro_batches": 4, "seq_len": 512},
}  # fmt: skip
COMM_TYPES = {et.ALL_REDUCE: CollectiveOp.ALL_REDUCE, et.ALL_GATHER: CollectiveOp.ALL_GATHER,
              et.REDUCE_SCATTER: CollectiveOp.REDUCE_SCATTER, et.ALL_TO_ALL: CollectiveOp.ALL_TO_ALL,
              et.BROADCAST: CollectiveOp.BROADCAST}  # fmt: skip
OPS = list(CollectiveOp)


def fake_time_us(op: CollectiveOp, size: int) -> float:
    """A distinct time for every (collective, size), so a collective counted on the wrong stage shows."""
    return 1.0 + OPS.index(op) + size / 1000


def planned_and_bundle(name: str):
    request = PLANS[name]
    inventory = resolve_model(request["model"])
    document = plan_workload(PlanRequest(mode="framework", **request), inventory)
    files = bundle_files(document, build_traces(document, inventory, ComputeModel.from_options()), "a test plan")
    return document, Bundle.read(files)


def traced(nodes) -> Counter:
    """A rank's communication as (collective, size the simulators read, whole buffer); sends and receives as
    send_recv, each end of a transfer counted."""
    found = Counter()
    for node in nodes:
        size = attribute(node, "comm_size") if node.type in COMMUNICATION else None
        if node.type == et.COMM_COLL_NODE:
            found[(COMM_TYPES[attribute(node, "comm_type")], size, attribute(node, "bytes_total"))] += 1
        elif node.type in COMMUNICATION:  # a point-to-point node's size is its whole message
            found[(CollectiveOp.SEND_RECV, size, size)] += 1
    return found


def listed(items) -> Counter:
    found = Counter()
    for item in items:
        size = item.bytes_total if item.op is CollectiveOp.SEND_RECV else simulated_comm_size(item)
        found[(item.op, size, item.bytes_total)] += item.count_per_step
    return found


@pytest.mark.parametrize("name", PLANS)
def test_traces_plan_and_step_cost_agree_stage_by_stage(name: str) -> None:
    document, bundle = planned_and_bundle(name)
    assert [stage.stage for stage in document.stages] == list(range(document.inputs.pp))
    for rank, nodes in bundle.ranks.items():
        stage = document.stages[role_of(document.inputs, rank).stage]
        assert traced(nodes) == listed(stage.collectives), f"rank {rank}, stage {stage.stage}"
    # A run measuring every (collective, size) the plan has: each stage costs what its traced nodes take.
    groups = [
        {"collective": op.value, "size_bytes": size, "variant": "out-of-place", "p50_us": fake_time_us(op, size),
         "p99_us": None}
        for op, size in {(item.op, item.bytes_total) for stage in document.stages for item in stage.collectives}
    ]  # fmt: skip
    cost = step_cost(document, groups, source_format=NCCL_TESTS, ranks=None, sweep=True)
    per_stage = {}
    for rank, nodes in bundle.ranks.items():
        stage = role_of(document.inputs, rank).stage
        per_stage[stage] = sum(fake_time_us(op, whole) * n for (op, _, whole), n in traced(nodes).items())
    assert [entry["p50_us"] for entry in cost["stages"]] == pytest.approx([per_stage[s] for s in sorted(per_stage)])
    longest = max(per_stage, key=per_stage.get)
    assert cost["bounding_stage"] == longest
    assert cost["step"]["p50_us"] == pytest.approx(per_stage[longest])
    assert [entry["bounds_step"] for entry in cost["stages"]] == [s == longest for s in sorted(per_stage)]


def test_gpt2_last_stage_lists_its_own_collectives_and_the_first_bounds_the_step() -> None:
    """The last stage's LM head and vocab-parallel cross-entropy (3 fp32 all-reduces of 1 × 1024 tokens × 4 B per
    micro-batch) are in the plan, not only in the traces; stage 0, with the embedding's gradient bucket, takes
    longest at the α-β model: its collectives are the plan's, and so the KCCB trials'."""
    document, _ = planned_and_bundle("gpt2 tp2 pp2 dp2")
    last = {item.label: (item.bytes_total, item.count_per_step) for item in document.stages[1].collectives}
    assert last["vocab-parallel cross-entropy (max, target logit, sum exp)"] == (4096, 12)
    assert last["LM head input gradient"] == (1024 * 768 * 2, 4)
    first = {item.label for item in document.stages[0].collectives}
    assert "vocab-parallel cross-entropy (max, target logit, sum exp)" not in first
    assert [stage.bounds_step for stage in document.stages] == [True, False]
    assert document.collectives == document.stages[0].collectives
    assert sum(stage.collectives_per_step for stage in document.stages) == 114 + 125
    kccb_sizes = {size for trial in document.kccb_list() for size in trial.data_sizes}
    assert 4096 not in kccb_sizes
    assert document.notes[-2].startswith(
        "Pipeline: the collectives listed (and the KCCB trials and step cost built from them) are stage 0's, the stage "
        "whose communication takes longest at the α-β model (34.14 ms per step; the other stages 27.81 ms)"
    )
