"""Pipeline stages and their point-to-point traffic.

Each step, every one of the m micro-batches crosses each of the p − 1 stage boundaries twice: its
activation forward and the activation's gradient backward, so 2·m·(p − 1) sends of micro_batch ×
activation shape × bytes. A 1F1B or GPipe schedule leaves a bubble of (p − 1) / m.
"""

from dataclasses import dataclass

from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import ParallelDim, Phase, PlannedCollective
from emuplan.workload.strategies.common import Unit, collective, split_evenly

# Root parameters that sit with the first stage; the rest (final norm, LM head) sit with the last.
_FIRST_STAGE_ROOT = ("embed_tokens", "wte", "wpe")


@dataclass(frozen=True)
class Stage:
    index: int
    units: list[Unit]

    @property
    def numel(self) -> int:
        return sum(unit.numel for unit in self.units)


def one_f_one_b(stage: int, stages: int, micro_batches: int) -> list[tuple[Phase, int]]:
    """Megatron's 1F1B order on one stage: warm-up forwards, then one forward one backward, then cool-down."""
    warmup = min(stages - stage - 1, micro_batches)
    order = [(Phase.FORWARD, j) for j in range(warmup)]
    for i in range(micro_batches - warmup):
        order += [(Phase.FORWARD, warmup + i), (Phase.BACKWARD, i)]
    return order + [(Phase.BACKWARD, j) for j in range(micro_batches - warmup, micro_batches)]


def split_stages(units: list[Unit], stages: int) -> list[Stage]:
    """Layers split evenly; a root unit's embeddings go to the first stage, its head to the last."""
    layers = [unit for unit in units if not unit.is_root]
    chunks = split_evenly(layers, stages, "layers")
    result = [Stage(index=i, units=list(chunk)) for i, chunk in enumerate(chunks)]
    for root in (unit for unit in units if unit.is_root):
        first = tuple(p for p in root.parameters if any(part in p.name for part in _FIRST_STAGE_ROOT))
        last = tuple(p for p in root.parameters if p not in first)
        if first:
            result[0].units.insert(0, Unit(name="root (embeddings)", parameters=first, is_root=True))
        if last:
            result[-1].units.append(Unit(name="root (final norm, head)", parameters=last, is_root=True))
    return result


def pipeline_collectives(
    boundary_bytes: list[int], micro_batches: int, dtype: str, stage: int
) -> list[PlannedCollective]:
    """The activations and gradients ``stage`` sends or receives: across the boundaries on either side of it
    (boundary k joins stage k and k + 1), forward and backward."""
    adjacent = [(k, size) for k, size in enumerate(boundary_bytes) if stage in (k, k + 1)]
    forward = [
        collective(
            CollectiveOp.SEND_RECV,
            size,
            2,
            dtype,
            Phase.FORWARD,
            ParallelDim.PP,
            f"stage {k} → {k + 1} activation",
            micro_batches,
        )
        for k, size in adjacent
    ]
    backward = [
        collective(
            CollectiveOp.SEND_RECV,
            size,
            2,
            dtype,
            Phase.BACKWARD,
            ParallelDim.PP,
            f"stage {k + 1} → {k} activation gradient",
            micro_batches,
        )
        for k, size in reversed(adjacent)
    ]
    return forward + backward


def bubble_fraction(stages: int, micro_batches: int) -> float:
    return (stages - 1) / micro_batches
