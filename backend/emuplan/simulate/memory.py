"""What ASTRA-sim's analytical backend holds for a plan, estimated before it starts, and the limit it runs under.

Its memory grows with the trace nodes it loads (every rank's whole graph) and with the square of the ranks (each
rank's system keeps state for every NPU). Peak RSS of the shared build (AstraSim_Analytical_Congestion_Unaware,
``/usr/bin/time``) on emuplan bundles:

=====================================  =====  ==============  ========
plan                                   ranks  nodes a rank    peak RSS
=====================================  =====  ==============  ========
fashion-mnist-mlp data                 4      14              11 MB
fashion-mnist-mlp data                 64     14              15 MB
fashion-mnist-mlp data                 256    14              41 MB
fashion-mnist-mlp data                 512    14              113 MB
fashion-mnist-mlp data                 1,024  14              384 MB
fashion-mnist-mlp TP2×PP2×DP64         256    20–22           51 MB
fashion-mnist-mlp TP2×PP2×DP128        512    20–22           149 MB
fashion-mnist-mlp TP2×PP2×DP256        1,024  20–22           506 MB
fashion-mnist-mlp TP8×PP2×DP64         1,024  20–22           430 MB
gpt2 TP2×PP2×DP2                       8      33,799–35,334   409 MB
=====================================  =====  ==============  ========

``estimated_bytes`` is fitted above every one of them: a base, ``NODE_BYTES`` per node of every rank (gpt2: 1.44
KB) and ``RANK_PAIR_BYTES`` per pair of ranks (the others, less their nodes: 380–470 B). Llama-3-70B
TP8×PP16×DP128 (16,384 ranks of ~460 nodes) comes to ~146 GB; the audit saw the binary pass 8 GB within 42 s.

The limit is the simulator's data segment (RLIMIT_DATA, set by util-linux ``prlimit`` before it execs the binary):
the memory it can write to, heap and anonymous mappings, not address space it only reserves. Past it an
allocation fails (``std::bad_alloc``) and the binary aborts.
"""

from collections.abc import Mapping

from emuplan.workload.chakra.schedule import TraceSet

BASE_BYTES = 16 * 1024**2
NODE_BYTES = 1_600
RANK_PAIR_BYTES = 500
MB = 1024**2


class SimulationTooLarge(ValueError):
    """A plan whose estimated simulator memory passes the limit: refused before anything starts (422)."""


def estimated_bytes(stage_nodes: Mapping[int, int], ranks_per_stage: Mapping[int, int]) -> int:
    """ASTRA-sim's peak memory for ``ranks_per_stage[s]`` ranks running ``stage_nodes[s]`` nodes each."""
    ranks = sum(ranks_per_stage.values())
    nodes = sum(stage_nodes[stage] * count for stage, count in ranks_per_stage.items())
    return BASE_BYTES + NODE_BYTES * nodes + RANK_PAIR_BYTES * ranks * ranks


def check_memory(traces: TraceSet, limit_bytes: int) -> int:
    """The estimate for ``traces`` (every rank's, as the simulator needs), or ``SimulationTooLarge`` past
    ``limit_bytes``, naming both."""
    ranks_per_stage: dict[int, int] = {}
    for rank in traces.ranks:
        stage = traces.role(rank).stage
        ranks_per_stage[stage] = ranks_per_stage.get(stage, 0) + 1
    stage_nodes = {stage: len(nodes) for stage, nodes in traces.stage_nodes.items()}
    estimate = estimated_bytes(stage_nodes, ranks_per_stage)
    if estimate > limit_bytes:
        nodes = sum(stage_nodes[stage] * count for stage, count in ranks_per_stage.items())
        raise SimulationTooLarge(
            f"gpus: ASTRA-sim would need about {estimate / MB:,.0f} MB for this plan ({len(traces.ranks):,} ranks, "
            f"{nodes:,} trace nodes in all; its memory grows with the nodes and the square of the ranks), more than "
            f"its limit of {limit_bytes / MB:,.0f} MB (EMUPLAN_SIMULATOR_MEMORY_MB); simulate a plan of fewer ranks"
        )
    return estimate
