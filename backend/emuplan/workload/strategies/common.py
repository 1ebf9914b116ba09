"""Building blocks every strategy shares: one collective record, and the model split into units."""

import re
from dataclasses import dataclass
from math import ceil

from emuplan.workload.collectives import PER_RANK_PIECE_OPS, CollectiveOp
from emuplan.workload.document import ParallelDim, Phase, PlannedCollective, PlanningError
from emuplan.workload.inventory import ModelInventory, ParameterInfo, dtype_bytes


def collective(
    op: CollectiveOp,
    bytes_total: int,
    group_size: int,
    dtype: str,
    phase: Phase,
    parallel_dim: ParallelDim,
    label: str,
    count_per_step: int = 1,
) -> PlannedCollective:
    """``bytes_total`` is nccl-tests' size; all-gather and reduce-scatter move one n-th of it per rank."""
    per_rank = ceil(bytes_total / group_size) if op in PER_RANK_PIECE_OPS else bytes_total
    return PlannedCollective(
        op=op,
        bytes_total=bytes_total,
        bytes_per_rank=per_rank,
        dtype=dtype,
        group_size=group_size,
        count_per_step=count_per_step,
        phase=phase,
        parallel_dim=parallel_dim,
        label=label,
    )


def numel_bytes(numel: int, dtype: str) -> int:
    return numel * dtype_bytes(dtype)


@dataclass(frozen=True)
class Unit:
    """A group of parameters that frameworks treat as one: a layer, or the root's leftovers."""

    name: str
    parameters: tuple[ParameterInfo, ...]
    is_root: bool = False

    @property
    def numel(self) -> int:
        return sum(p.numel for p in self.parameters)


# The name up to a component that is all digits: "model.layers.3" of "model.layers.3.mlp.up_proj.weight".
_LAYER_INDEX = re.compile(r"^((?:[^.]+\.)*?\d+)\.")


def parameter_units(inventory: ModelInventory) -> list[Unit]:
    """Split parameters the way ``fully_shard`` is applied per layer.

    Names with a numeric component (``model.layers.3.mlp...``, ``0.weight``) group by that layer,
    and everything else (embeddings, final norm, head) forms the root unit. A model without
    numbered layers (the seed's ``fc1``…``fc4``) groups by owning module. Order: first appearance.
    """
    numbered = any(_LAYER_INDEX.match(p.name) for p in inventory.parameters)
    groups: dict[str, list[ParameterInfo]] = {}
    for param in inventory.parameters:
        if numbered:
            match = _LAYER_INDEX.match(param.name)
            key = match.group(1) if match else ""
        else:
            key = param.name.rpartition(".")[0]
        groups.setdefault(key, []).append(param)
    return [
        Unit(name=key or "root", parameters=tuple(params), is_root=numbered and not key)
        for key, params in groups.items()
    ]


def split_evenly(items: list, parts: int, what: str) -> list[list]:
    """Contiguous split into ``parts`` chunks whose sizes differ by at most one (earlier chunks larger)."""
    if parts > len(items):
        raise PlanningError(f"pp: {parts} pipeline stages but the model has only {len(items)} {what}")
    base, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for index in range(parts):
        size = base + (1 if index < extra else 0)
        chunks.append(items[start : start + size])
        start += size
    return chunks
