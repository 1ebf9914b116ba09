"""Gradient accumulation under FSDP2, as real ``fully_shard`` on a gloo group of 4 CPU processes runs it
(tests/fsdp_world.py), against the framework-mode plan and its Chakra trace: by default every micro-batch
all-gathers every unit (the root included) in forward, the non-root units again in backward, and
reduce-scatters every unit's gradients; ``set_requires_gradient_sync(False)`` before all but the last
micro-batch keeps the gathers and leaves one reduce-scatter per unit and step. Under
``torch.distributed.pipelining`` parameters stay unsharded after each backward and gradients are
reduce-scattered once."""

from collections import Counter

import pytest
import torch
from torch import nn

from emuplan.workload.chakra.schedule import ComputeModel, NodeKind, build_traces
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import PlanRequest
from emuplan.workload.inventory import SampleSpec
from emuplan.workload.plan_options import DataParallelImpl
from emuplan.workload.planner import plan_workload
from emuplan.workload.strategies.common import parameter_units
from emuplan.workload.strategies.data_parallel import data_parallel_collectives
from emuplan.workload.torch_module import inventory_from_module
from fsdp_world import fsdp2_pipeline_collectives, fsdp2_step_collectives

WORLD_SIZE = 4
MICRO_BATCHES = 4
TOKENS = 8


class Accumulating(nn.Module):
    """Three numbered Linear layers (one FSDP2 unit each) between an embedding and a bare head parameter, which
    stay with the root: the planner's units (``parameter_units``) are the ones ``fully_shard`` makes."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.layers = nn.ModuleList([nn.Linear(16, 32), nn.Linear(32, 24), nn.Linear(24, 16)])
        self.head = nn.Parameter(torch.randn(5, 16))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(tokens)
        for layer in self.layers:
            hidden = torch.relu(layer(hidden))
        return hidden @ self.head.T


def accumulating_input() -> torch.Tensor:
    return torch.randint(0, 50, (2, TOKENS))


# Bytes in fp32 with every tensor's dim 0 padded to a multiple of 4: the root holds the embedding (50 → 52 rows
# × 16) and the head (5 → 8 rows × 16); the layers 32 × 16 + 32, 24 × 32 + 24 and 16 × 24 + 16.
ROOT, LAYERS = 4 * (52 * 16 + 8 * 16), [4 * 544, 4 * 792, 4 * 400]
FORWARD = [("all_gather", "forward", ROOT), *(("all_gather", "forward", size) for size in LAYERS)]
# Backward walks the layers in reverse, prefetching the next one's gather before reduce-scattering the
# gradients of the one just done; the root, gathered since forward, reduce-scatters last.
BACKWARD = [
    ("all_gather", "backward", LAYERS[2]),
    ("all_gather", "backward", LAYERS[1]),
    ("reduce_scatter", "backward", LAYERS[2]),
    ("all_gather", "backward", LAYERS[0]),
    ("reduce_scatter", "backward", LAYERS[1]),
    ("reduce_scatter", "backward", LAYERS[0]),
    ("reduce_scatter", "backward", ROOT),
]
GATHERS_ONLY = [call for call in BACKWARD if call[0] == "all_gather"]
C10D_OPS = {"_allgather_base_.default": "all_gather", "_reduce_scatter_base_.default": "reduce_scatter"}


def real_step(sync_last_only: bool) -> list[tuple[str, str, int]]:
    """One step of 4 micro-batches on 4 gloo processes: (op, phase, whole-buffer bytes) in issue order."""
    calls = fsdp2_step_collectives(
        Accumulating, accumulating_input, "float32", "float32", WORLD_SIZE, MICRO_BATCHES, sync_last_only
    )
    assert {dtype for _, _, dtype, _ in calls} == {"float32"}
    return [(C10D_OPS[op], phase, size) for op, phase, _, size in calls]


@pytest.fixture(scope="module")
def planned():
    with torch.device("meta"):
        model = Accumulating()
    inventory = inventory_from_module(model, "Accumulating", "test", SampleSpec(shape=[TOKENS], dtype="int64"))
    request = PlanRequest(
        model="Accumulating", mode="framework", strategy="data", dp_impl="fsdp2", gpus=WORLD_SIZE,
        batch_size=WORLD_SIZE * MICRO_BATCHES, micro_batches=MICRO_BATCHES, param_dtype="float32",
    )  # fmt: skip
    return plan_workload(request, inventory), inventory


def test_by_default_every_micro_batch_gathers_and_reduce_scatters_every_unit(planned) -> None:
    """28 all-gathers (4 forward + 3 backward per micro-batch) and 16 reduce-scatters per step, 70,912 bytes
    gathered and 43,136 reduce-scattered (whole buffers): what the plan counts, and the order it lists them
    is what each micro-batch issues."""
    real = real_step(sync_last_only=False)
    assert real == (FORWARD + BACKWARD) * MICRO_BATCHES
    document, _ = planned
    assert [(c.op.value, c.phase.value, c.bytes_total) for c in document.collectives] == FORWARD + BACKWARD
    assert {c.count_per_step for c in document.collectives} == {MICRO_BATCHES}
    per_step = Counter()
    for c in document.collectives:
        per_step[c.op.value] += c.count_per_step
        per_step[f"{c.op.value} bytes"] += c.count_per_step * c.bytes_total
    assert per_step == Counter({"all_gather": 28, "all_gather bytes": 70_912, "reduce_scatter": 16,
                                "reduce_scatter bytes": 43_136})  # fmt: skip
    assert Counter(op for op, _, _ in real) == Counter(all_gather=28, reduce_scatter=16)
    note = next(note for note in document.notes if note.startswith("Gradient accumulation"))
    assert "reduce-scattered in every micro-batch's backward (4 per step)" in note
    assert "FSDP2's default" in note


def test_the_chakra_trace_issues_what_fsdp2_issues_micro_batch_by_micro_batch(planned) -> None:
    document, inventory = planned
    traces = build_traces(document, inventory, ComputeModel.from_options())
    traced = [
        (node.op.value, node.bytes_total)
        for node in traces.stage_nodes[0]
        if node.kind is NodeKind.COLLECTIVE and node.op in (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER)
    ]
    assert traced == [(op, size) for op, _, size in FORWARD + BACKWARD] * MICRO_BATCHES


def test_with_gradient_sync_off_until_the_last_micro_batch_only_the_gathers_repeat(planned) -> None:
    """``set_requires_gradient_sync(False)`` before micro-batches 0-2: 28 all-gathers still, 4 reduce-scatters,
    all in the last micro-batch's backward; the plan's note names it as the way that differs."""
    real = real_step(sync_last_only=True)
    assert real == (FORWARD + GATHERS_ONLY) * (MICRO_BATCHES - 1) + FORWARD + BACKWARD
    assert Counter(op for op, _, _ in real) == Counter(all_gather=28, reduce_scatter=4)
    document, _ = planned
    note = next(note for note in document.notes if note.startswith("Gradient accumulation"))
    assert "set_requires_gradient_sync(False) on all but the last micro-batch would reduce-scatter once" in note


STAGE_LAYERS = [[(16, 32), (32, 24)], [(24, 40), (40, 16)]]


class PipelineStageModule(nn.Module):
    """One pipeline stage: two Linear layers (a unit each) and a root parameter of its own."""

    def __init__(self, stage_index: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(10, 3))
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in STAGE_LAYERS[stage_index]])

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        hidden = hidden * self.scale.sum()
        for layer in self.layers:
            hidden = layer(hidden)
        return hidden


def pipeline_input() -> torch.Tensor:
    return torch.randn(2 * MICRO_BATCHES, 16)


@pytest.mark.parametrize("schedule", ["Schedule1F1B", "ScheduleGPipe"])
def test_under_pipelining_each_layer_is_gathered_once_more_than_the_micro_batches_and_reduced_once(
    schedule: str,
) -> None:
    """2 stages × 2 replicas, 4 micro-batches: each stage gathers its root once and each layer 4 + 1 times
    (11 all-gathers), and reduce-scatters each unit once (3), in either schedule: what the planner's
    data_parallel_collectives counts for the stage, on the units it makes of the stage's module."""
    real = fsdp2_pipeline_collectives(
        PipelineStageModule, pipeline_input, [2 * MICRO_BATCHES, 16], MICRO_BATCHES, schedule
    )
    for stage_index, calls in enumerate(real):
        with torch.device("meta"):
            module = PipelineStageModule(stage_index)
        inventory = inventory_from_module(module, "stage", "test", SampleSpec(shape=[STAGE_LAYERS[stage_index][0][0]]))
        planned = data_parallel_collectives(
            DataParallelImpl.FSDP2, parameter_units(inventory), {p.name: 0 for p in inventory.parameters}, 2,
            "float32", "float32", None, micro_batches=MICRO_BATCHES, pp=2, stage=stage_index,
        )  # fmt: skip
        counted = Counter()
        for c in planned:
            counted[(c.op.value, c.bytes_total)] += c.count_per_step
        sharded = Counter((C10D_OPS[op], size) for op, _, _, size in calls if op in C10D_OPS)
        assert sharded == counted
        assert Counter(op for op, _ in sharded.elements()) == Counter(all_gather=11, reduce_scatter=3)
        # The root, 10 × 3 fp32 (dim 0 already a multiple of 2), is gathered and reduce-scattered once.
        assert (sharded[("all_gather", 120)], sharded[("reduce_scatter", 120)]) == (1, 1)
