"""The vocabulary of collectives shared by planning and analysis: operation names, the nccl-tests
byte and bus-bandwidth conventions, and the α-β ideal-time model.

Sizes here are always nccl-tests' ``size``: the whole buffer (for all-gather and reduce-scatter that is
n × the per-rank piece). Bandwidths are in GB/s with GB = 1e9 bytes.
"""

from enum import StrEnum


class CollectiveOp(StrEnum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


# All-gather and reduce-scatter move one n-th of the whole buffer per rank: their ``bytes_per_rank``,
# and the data size KCCB takes for them (the seed tutorial's 6438912 is a quarter of 25755648).
PER_RANK_PIECE_OPS = (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER)

# Spellings seen in result files and logs, folded by normalise_op_name().
_OP_ALIASES = {
    "allreduce": CollectiveOp.ALL_REDUCE,
    "allgather": CollectiveOp.ALL_GATHER,
    "reducescatter": CollectiveOp.REDUCE_SCATTER,
    "broadcast": CollectiveOp.BROADCAST,
    "bcast": CollectiveOp.BROADCAST,
    "reduce": CollectiveOp.REDUCE,
    "alltoall": CollectiveOp.ALL_TO_ALL,
    "alltoallv": CollectiveOp.ALL_TO_ALL,
    "sendrecv": CollectiveOp.SEND_RECV,
    "send": CollectiveOp.SEND_RECV,
    "recv": CollectiveOp.SEND_RECV,
    "p2p": CollectiveOp.SEND_RECV,
}


def normalise_op_name(name: str) -> CollectiveOp | None:
    """'AllReduce', 'all_reduce', 'Ring all-reduce', 'all_reduce_perf' → CollectiveOp.ALL_REDUCE; None if unknown."""
    folded = "".join(ch for ch in name.lower() if ch.isalnum())
    for prefix in ("ring", "tree", "nccl"):
        folded = folded.removeprefix(prefix)
    folded = folded.removesuffix("perf")
    return _OP_ALIASES.get(folded)


def bus_bandwidth_factor(op: CollectiveOp, ranks: int) -> float:
    """nccl-tests' busbw = algbw × factor (doc/PERFORMANCE.md)."""
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    if op is CollectiveOp.ALL_REDUCE:
        return 2 * (ranks - 1) / ranks
    if op in (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_TO_ALL):
        return (ranks - 1) / ranks
    return 1.0


def algorithm_bandwidth_gbps(size_bytes: float, seconds: float) -> float:
    return size_bytes / seconds / 1e9


def bus_bandwidth_gbps(op: CollectiveOp, size_bytes: float, seconds: float, ranks: int) -> float:
    return algorithm_bandwidth_gbps(size_bytes, seconds) * bus_bandwidth_factor(op, ranks)


def ring_latency_steps(op: CollectiveOp, ranks: int) -> int:
    """The α terms of a ring over ``ranks`` ranks: the steps it takes one after the other (NCCL's
    ``nsteps``, src/graph/tuning.cc): 2(n−1) for all-reduce (reduce-scatter then all-gather), n−1 for
    all-gather, reduce-scatter and all-to-all, one for broadcast, reduce and send/recv; none on one rank."""
    if ranks == 1 and op is not CollectiveOp.SEND_RECV:
        return 0
    if op is CollectiveOp.ALL_REDUCE:
        return 2 * (ranks - 1)
    if op in (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER, CollectiveOp.ALL_TO_ALL):
        return ranks - 1
    return 1


def ideal_time_s(op: CollectiveOp, size_bytes: float, ranks: int, link_gbps: float, latency_us: float) -> float:
    """α-β time of a ring algorithm over ``ranks`` ranks, each with one link of ``link_gbps`` Gbit/s:
    ``ring_latency_steps`` × α + the bus factor × S/B, that is

    all-reduce 2(n−1)α + 2(n−1)/n·S/B; all-gather, reduce-scatter, all-to-all (n−1)α + (n−1)/n·S/B;
    broadcast, reduce and send/recv α + S/B.
    """
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    if link_gbps <= 0:
        raise ValueError(f"link speed must be positive, got {link_gbps} Gbit/s")
    if ranks == 1 and op is not CollectiveOp.SEND_RECV:
        return 0.0
    bytes_per_second = link_gbps * 1e9 / 8
    return (
        ring_latency_steps(op, ranks) * latency_us * 1e-6
        + bus_bandwidth_factor(op, ranks) * size_bytes / bytes_per_second
    )
