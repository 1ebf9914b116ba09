"""Every plan the planner accepts exports a bundle a simulator can finish: no cycles, every dependency
present, communicators issuing the same collectives in the same order, every send meeting its receive,
and a replay on ASTRA-sim's issue rules (``chakra_replay``) that ends."""

from collections import Counter
from pathlib import Path

import pytest
from chakra_replay import (
    Bundle,
    ReplayStuck,
    check_bundle,
    check_collective_orders,
    check_graphs,
    check_point_to_point,
    collective_key,
    replay,
)

from emuplan.workload.chakra import et_def_pb2 as et
from emuplan.workload.chakra.bundle import attribute, bundle_files
from emuplan.workload.chakra.schedule import ComputeModel, build_traces, simulated_comm_size
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.pytorch_source import PytorchSourceOptions
from emuplan.workload.sources import resolve_model

SEED_SOURCE = str(Path(__file__).parents[1] / "fixtures" / "models" / "seed_classifier.py")
FRAMEWORK = {"mode": "framework"}
GPT2 = {"model": "gpt2", "batch_size": 8, "seq_len": 1024}
MIXTRAL = {"model": "mixtral-8x7b", "mode": "framework", "seq_len": 1024}

PLANS = {
    "mlp data ddp": {"model": "fashion-mnist-mlp", **FRAMEWORK, "gpus": 4},
    "mlp tensor": {"model": "fashion-mnist-mlp", **FRAMEWORK, "strategy": "tensor", "gpus": 4},
    "mlp pipeline mb4": {"model": "fashion-mnist-mlp", **FRAMEWORK, "strategy": "pipeline", "gpus": 2,
                         "micro_batches": 4},
    "gpt2 data ddp": {**GPT2, "gpus": 4, "micro_batches": 1},
    "gpt2 tensor sp": {**GPT2, "strategy": "tensor", "gpus": 4, "sequence_parallel": True},
    "gpt2 pipeline mb1": {**GPT2, "strategy": "pipeline", "gpus": 4, "micro_batches": 1},
    "gpt2 hybrid mb4": {**GPT2, "strategy": "hybrid", "tp": 2, "pp": 2, "dp": 2, "micro_batches": 4},
    "gpt2 hybrid sp mb8": {**GPT2, "strategy": "hybrid", "tp": 2, "pp": 2, "dp": 2, "micro_batches": 8,
                           "sequence_parallel": True},
    "gpt2 fsdp2": {**GPT2, "gpus": 4, "micro_batches": 1, "dp_impl": "fsdp2"},
    "gpt2 fsdp2 mb4": {**GPT2, "batch_size": 16, "gpus": 4, "micro_batches": 4, "dp_impl": "fsdp2"},
    "gpt2 zero2 mb4": {**GPT2, "batch_size": 16, "gpus": 4, "micro_batches": 4, "dp_impl": "zero2"},
    "gpt2 zero3 mb4": {**GPT2, "batch_size": 16, "gpus": 4, "micro_batches": 4, "dp_impl": "zero3"},
    "gpt2 fsdp2 hybrid mb4": {**GPT2, "strategy": "hybrid", "tp": 2, "pp": 2, "dp": 2, "micro_batches": 4,
                              "dp_impl": "fsdp2"},
    "gpt2 zero1": {**GPT2, "gpus": 4, "micro_batches": 1, "dp_impl": "zero1"},
    "gpt2 zero1 pipeline mb4": {**GPT2, "strategy": "hybrid", "pp": 2, "dp": 2, "micro_batches": 4,
                                "dp_impl": "zero1"},
    "gpt2 zero3 sp": {**GPT2, "strategy": "hybrid", "tp": 2, "dp": 2, "micro_batches": 1, "dp_impl": "zero3",
                      "sequence_parallel": True},
    "mlp fsdp2": {"model": "fashion-mnist-mlp", **FRAMEWORK, "gpus": 4, "dp_impl": "fsdp2"},
    "mixtral ep8": {**MIXTRAL, "gpus": 8, "ep": 8, "batch_size": 8},
    "mixtral ep2 pp2 mb4": {**MIXTRAL, "strategy": "hybrid", "pp": 2, "dp": 4, "ep": 2, "batch_size": 8,
                            "micro_batches": 4},
    "mixtral tp2 ep2": {**MIXTRAL, "strategy": "hybrid", "tp": 2, "dp": 4, "ep": 2, "batch_size": 4},
    "mixtral tp2 pp2 ep2 mb8 fsdp2": {**MIXTRAL, "strategy": "hybrid", "tp": 2, "pp": 2, "dp": 2, "ep": 2,
                                      "batch_size": 16, "micro_batches": 8, "dp_impl": "fsdp2"},
    "mixtral tp2 no ep": {**MIXTRAL, "strategy": "tensor", "gpus": 2, "batch_size": 4},
    # DeepSeek-V3's expert-bias all-reduce over each stage's TP×DP group.
    "deepseek-v3 tp2 ep2": {"model": "deepseek-v3", "mode": "framework", "seq_len": 1024, "strategy": "hybrid",
                            "tp": 2, "dp": 4, "ep": 2, "batch_size": 4},
    "deepseek-v3 tp2 alone": {"model": "deepseek-v3", "mode": "framework", "seq_len": 1024, "strategy": "tensor",
                              "gpus": 2, "batch_size": 1},
}  # fmt: skip


def export(request: dict, inventory=None) -> dict[str, bytes]:
    inventory = inventory or resolve_model(request["model"])
    document = plan_workload(PlanRequest(**request), inventory)
    return bundle_files(document, build_traces(document, inventory, ComputeModel.from_options()), "a test plan")


@pytest.mark.parametrize("request_fields", PLANS.values(), ids=PLANS.keys())
def test_every_plan_replays_to_the_end(request_fields: dict) -> None:
    assert check_bundle(export(request_fields)) > 0


@pytest.fixture(scope="module")
def seed_source_inventory():
    """The seeds' Classifier read from its PyTorch source once (the sandboxed capture takes seconds)."""
    options = PytorchSourceOptions(model_class="Classifier", input_shape=[1, 28, 28])
    return resolve_model(SEED_SOURCE, pytorch_options=options)


SOURCE_PLANS = {
    "data ddp": {"gpus": 4},
    "tensor": {"strategy": "tensor", "gpus": 2},
    "pipeline mb4": {"strategy": "pipeline", "gpus": 2, "micro_batches": 4},
    "hybrid fsdp2 mb8": {"strategy": "hybrid", "pp": 2, "dp": 2, "micro_batches": 8, "dp_impl": "fsdp2"},
    "zero2": {"gpus": 4, "dp_impl": "zero2"},
}


@pytest.mark.parametrize("request_fields", SOURCE_PLANS.values(), ids=SOURCE_PLANS.keys())
def test_a_pytorch_source_replays_to_the_end(seed_source_inventory, request_fields: dict) -> None:
    assert check_bundle(export({"model": SEED_SOURCE, **FRAMEWORK, **request_fields}, seed_source_inventory)) > 0


def test_reduce_scatter_carries_its_whole_input_and_all_gather_one_piece() -> None:
    """GPT-2 sequence parallel over 4 ranks: each layer half's output, 1 × 1024 tokens × 768 × 2 bytes,
    is reduce-scattered (comm_size the whole 1.5 MiB input) and all-gathered (comm_size one rank's quarter)."""
    bundle = Bundle.read(export(PLANS["gpt2 tensor sp"]))
    sizes = {
        (attribute(node, "comm_type"), attribute(node, "comm_size"), attribute(node, "bytes_total"))
        for node in bundle.ranks[0]
        if node.type == et.COMM_COLL_NODE and "transformer.h.0 attention" in node.name
    }
    assert sizes == {(et.ALL_GATHER, 393216, 1572864), (et.REDUCE_SCATTER, 1572864, 1572864)}


COMM_TYPES = {"all_reduce": et.ALL_REDUCE, "all_gather": et.ALL_GATHER, "reduce_scatter": et.REDUCE_SCATTER,
              "all_to_all": et.ALL_TO_ALL, "broadcast": et.BROADCAST}  # fmt: skip


def planned_and_traced(name: str) -> tuple[list, list]:
    """The plan's collectives, each count_per_step times in its order, and rank 0's, both as (comm_type, comm_size);
    point-to-point sends are not collectives."""
    request = PLANS[name]
    inventory = resolve_model(request["model"])
    document = plan_workload(PlanRequest(**request), inventory)
    files = bundle_files(document, build_traces(document, inventory, ComputeModel.from_options()), "a test plan")
    # Rank 0 runs stage 0's collectives.
    listed = document.stages[0].collectives if document.stages else document.collectives
    planned = [
        (COMM_TYPES[item.op.value], simulated_comm_size(item))
        for item in listed
        if item.op is not CollectiveOp.SEND_RECV
        for _ in range(item.count_per_step)
    ]
    traced = [collective_key(node) for node in Bundle.read(files).ranks[0] if node.type == et.COMM_COLL_NODE]
    return planned, traced


@pytest.mark.parametrize(
    "name", ["gpt2 data ddp", "gpt2 fsdp2", "gpt2 zero1", "gpt2 zero3 sp", "mlp fsdp2", "mixtral tp2 ep2"]
)
def test_one_micro_batch_plans_trace_every_planned_collective(name: str) -> None:
    """DDP's buffer broadcast, FSDP2's and ZeRO's gathers and scatters, MoE's expert-tensor-parallel gathers
    and sequence parallel's layer-norm all-reduce: rank 0 runs each planned collective as often as the plan
    counts it, at the size the simulators read."""
    planned, traced = planned_and_traced(name)
    assert Counter(traced) == Counter(planned)


@pytest.mark.parametrize(
    ("name", "gathers", "scatters"),
    [
        # FSDP2 (no pipelining) and ZeRO-3: root + 12 layers forward, 12 backward, 13 reduce-scatters, × 4; ZeRO-3
        # gathers its persistent parameters (biases, norms) once more, after the optimizer step.
        ("gpt2 fsdp2 mb4", 100, 52),
        ("gpt2 zero3 mb4", 101, 52),
        # ZeRO-2: its 7 buckets reduce-scattered in every micro-batch, the updated parameters gathered once.
        ("gpt2 zero2 mb4", 7, 28),
        # Under pipelining FSDP2 keeps parameters unsharded after backward: each of the stage's 6 layers is
        # gathered 4 + 1 times, its root once, and the 7 units reduce-scattered once (perform_reduce_grad).
        ("gpt2 fsdp2 hybrid mb4", 31, 7),
    ],
)
def test_accumulating_plans_trace_every_micro_batch_s_collectives_as_the_plan_counts_them(
    name: str, gathers: int, scatters: int
) -> None:
    planned, traced = planned_and_traced(name)
    assert Counter(traced) == Counter(planned)
    kinds = Counter(comm_type for comm_type, _ in traced)  # no sequence parallel: all gathers and scatters are DP's
    assert (kinds[et.ALL_GATHER], kinds[et.REDUCE_SCATTER]) == (gathers, scatters)


def test_fsdp2_gathers_and_scatters_in_the_order_fsdp2_issues_them() -> None:
    """Root then layers forward; backward the last layer's gather, then each next layer's prefetched gather
    before the current layer's reduce-scatter; the root's gradients last (the planner's order)."""
    planned, traced = planned_and_traced("gpt2 fsdp2")
    assert traced == planned
    assert [comm_type for comm_type, _ in traced[:13]] == [et.ALL_GATHER] * 13  # root + 12 layers
    assert [comm_type for comm_type, _ in traced[13:17]] == [
        et.ALL_GATHER,
        et.ALL_GATHER,
        et.REDUCE_SCATTER,
        et.ALL_GATHER,
    ]


def test_the_oracle_catches_a_cycle_a_lost_receive_a_collective_of_another_size_and_a_deadlock() -> None:
    files = export(PLANS["gpt2 hybrid mb4"])
    looped = Bundle.read(files)
    looped.ranks[0][5].data_deps.append(5)
    with pytest.raises(AssertionError, match=r"^rank 0: dependency cycle \[5, 5\]$"):
        check_graphs(looped)
    lost = Bundle.read(files)
    lost.ranks[2] = [node for node in lost.ranks[2] if node.type != et.COMM_RECV_NODE]
    with pytest.raises(AssertionError, match="^unmatched: sends"):
        check_point_to_point(lost)
    resized = Bundle.read(files)
    first = next(node for node in resized.ranks[1] if node.type == et.COMM_COLL_NODE)
    next(attr for attr in first.attr if attr.name == "comm_size").int64_val += 2
    with pytest.raises(AssertionError, match="^group 1: rank 1 differs from rank 0$"):
        check_collective_orders(resized)
    # Stage 0 sends micro-batch 0's activation only once it has its gradient back: no cycle on either rank,
    # but neither can go on.
    deadlocked = Bundle.read(files)
    send = next(node for node in deadlocked.ranks[0] if node.type == et.COMM_SEND_NODE)
    send.data_deps.append(next(node for node in deadlocked.ranks[0] if node.type == et.COMM_RECV_NODE).id)
    check_graphs(deadlocked)
    with pytest.raises(ReplayStuck, match="^replay stuck at "):
        replay(deadlocked)
