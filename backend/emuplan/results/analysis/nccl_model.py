"""NCCL's own cost model: the algorithm and protocol NCCL would pick for a collective, and the time it
expects, so that a run is judged against what a healthy system achieves rather than the wire rate.

Ported from NVIDIA/nccl at commit 1fc949c (2026; the model lives in ``src/tuning/`` since it left
``src/graph/tuning.cc``); each constant names the file and table it comes from. NCCL scores every
(algorithm, protocol) as ``time = latency + bytes / (1000 × bandwidth)`` (µs, GB/s; ``ncclTuningGetTime``)
and takes the fastest (``ncclTuningSelectBestTuning``). Ported: ring and tree (LL, LL128, Simple), NVLS on
one NVLink domain and NVLS-tree across domains (Simple); the per-architecture bandwidth caps, the protocol
factors, the base and per-hop latencies, the tree correction factors and the ring's plateau.

What NCCL measures at start-up and we cannot, so it is assumed (``Topology``'s docstring says which):
the graph search's channels and per-channel speed (``src/graph/search.cc``), the CPU (Intel x86: the
network overhead of 1 µs and the Intel rows of ``llMaxBws``), no extra network latency
(``graph.latencyInter`` 0), and no CollNet/SHARP or PAT (their switches and plugins are not described by a
platform). Calibrated on the published logs of ``../shared/fixtures/real-logs`` (docs/verdicts.md): the
8-channel NVLS graph reproduces 8×H100's 476 GB/s and GB300 NVL72's 930 GB/s.
"""

import math
from dataclasses import dataclass
from typing import Literal

from emuplan.workload.collectives import CollectiveOp, bus_bandwidth_gbps

Generation = Literal["volta", "ampere", "hopper", "blackwell"]
GENERATIONS: tuple[Generation, ...] = ("volta", "ampere", "hopper", "blackwell")
ScaleUpLink = Literal["nvlink", "pcie"]

NCCL_SOURCE = "NVIDIA/nccl @ 1fc949c, src/tuning/ (cost_model.cc, ring.cc, tree.cc, nvls.cc), src/graph/search.cc"

LL, LL128, SIMPLE = "LL", "LL128", "Simple"
PROTOCOLS = (LL, LL128, SIMPLE)
RING, TREE, NVLS, NVLS_TREE = "ring", "tree", "nvls", "nvls-tree"

# cost_model.cc, ncclTunerConstantsDefaults.baseLatencies (µs), per protocol LL / LL128 / Simple.
BASE_LATENCY_US = {TREE: (6.8, 14.0, 8.4), RING: (6.6, 14.0, 8.4), NVLS: (0, 0, 0), NVLS_TREE: (0, 0, 0)}
# cost_model.cc, hwLatencies (µs per hop): NVLink, PCI and network rows.
HW_LATENCY_US = {
    "nvlink": {TREE: (0.6, 1.25, 4.0), RING: (0.6, 1.9, 3.4), NVLS: (0, 0, 25), NVLS_TREE: (0, 0, 25)},
    "pcie": {TREE: (1.0, 1.9, 4.0), RING: (1.0, 2.5, 5.7)},
    "net": {TREE: (5.0, 8.5, 14), RING: (2.7, 4.0, 14.0), NVLS: (0, 0, 18), NVLS_TREE: (0, 0, 20.9)},
}
# cost_model.cc, per architecture and scale (1 node, 2 nodes, 4 and more), GB/s. llMaxBws is indexed by the
# GPU on one node and by the CPU beyond (its first row is Intel's: the CPU we assume).
LL_MAX_GBPS = {"volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0), "hopper": (141.0, 45.0, 35.0),
               "blackwell": (282.0, 90.0, 70.0)}  # fmt: skip
RING_LL128_PER_CHANNEL_GBPS = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 40.0}
TREE_LL128_PER_CHANNEL_GBPS = {"volta": (20.0, 20.0, 20.0), "ampere": (20.0, 20.0, 20.0),
                               "hopper": (36.7, 36.7, 29.0), "blackwell": (55.6, 31.67, 20.0)}  # fmt: skip
TREE_PER_CHANNEL_GBPS = {"volta": (26.5, 18.5, 10.0), "ampere": (24.0, 23.6, 17.8), "hopper": (38.7, 41.4, 36.0),
                         "blackwell": (70.0, 42.8, 24.0)}  # fmt: skip
NVLS_TREE_PER_CHANNEL_GBPS = {"hopper": (0.0, 57.7, 45.5), "blackwell": (0.0, 96.0, 80.0)}
# nvls.cc, nvlsEfficiency: the share of the NVLink bandwidth NVLS reaches (none before Hopper).
NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}
# cost_model.cc, treeCorrectionFactor[protocol][log2(bytes / 64)]: trees run below the model at medium sizes.
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0,
     1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0,
     1.0, 1.0),
    (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9,
     0.9, 0.9),
)  # fmt: skip
# ring.cc, getNetOverhead: an Intel x86 host posts a network send in 1 µs (3 × for Simple).
NET_OVERHEAD_US = 1.0
# src/graph/topo.h, ncclTopoNVLinkBw: what NCCL counts one NVLink link as, GB/s, against the link's wire rate
# per direction (25 GB/s for NVLink 2–4, 50 for NVLink 5): A100's 12 links make 240 GB/s, H100's 18 make 370.8.
NVLINK_SHARE_OF_WIRE = {"volta": 20.0 / 25, "ampere": 20.0 / 25, "hopper": 20.6 / 25, "blackwell": 40.1 / 50}
# search.cc: the per-channel speeds the graph search tries, fastest first (GB/s), inside a node and across.
_INTRA_SPEEDS = {
    "default": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "hopper": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "blackwell": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
_INTER_SPEEDS = {
    "default": (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24),
    "hopper": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24),
    "blackwell": (96.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2),
}
# Assumed graphs (what the search settles on; NCCL prints them as "Pattern …, nChannels …, bw …"): NVLS runs one
# channel per GPU of an 8-GPU baseboard; rings and trees use 16 channels inside a domain and two per NIC
# across domains (at most 32, MAXCHANNELS).
NVLS_CHANNELS = 8
RING_CHANNELS = 16
MAX_CHANNELS = 32


class ModelError(ValueError):
    """Figures the model cannot use; the message names the figure."""


@dataclass(frozen=True)
class Topology:
    """What NCCL's model needs of the hardware a run spans.

    ``nodes`` are NCCL's nodes: the NVLink domains the ranks span (a GB200/GB300 NVL72 rack is one, as NCCL
    treats a multi-node NVLink domain), ``ranks_per_node`` the ranks in each. ``scale_up_gbps`` is what NCCL
    counts the GPU's scale-up link as (``NVLINK_SHARE_OF_WIRE`` of the wire rate for NVLink; the PCIe rate
    as given), ``nic_gbps`` one NIC's rate and ``nics_per_node`` the NICs of one NCCL node."""

    generation: Generation
    link: ScaleUpLink
    scale_up_gbps: float
    nvls: bool
    ranks: int
    nodes: int
    nic_gbps: float
    nics_per_node: int

    @property
    def ranks_per_node(self) -> int:
        return math.ceil(self.ranks / self.nodes)

    @property
    def scale(self) -> int:
        """NCCL's index2: one node, two, or four and more."""
        return min(self.nodes, 3) - 1


@dataclass(frozen=True)
class Estimate:
    """NCCL's modelled time of one collective, with the algorithm and protocol it would pick."""

    algorithm: str
    protocol: str
    latency_us: float
    algbw_gbps: float  # the bandwidth term's algorithm bandwidth (NCCL's ``bandwidths`` table)
    time_us: float

    def busbw_gbps(self, op: CollectiveOp, size_bytes: float, ranks: int) -> float:
        return bus_bandwidth_gbps(op, size_bytes, self.time_us * 1e-6, ranks)


def _speed_at_most(speeds: dict[str, tuple[float, ...]], generation: Generation, gbps: float) -> float:
    """The fastest speed of the architecture's search array not above ``gbps`` (the search's first fit)."""
    table = speeds.get(generation, speeds["default"])
    return next((speed for speed in table if speed <= gbps + 1e-9), table[-1])


def _steps(op: CollectiveOp, ranks: int) -> int:
    """cost_model.cc, ncclTuningGetNsteps."""
    if op is CollectiveOp.ALL_REDUCE:
        return 2 * (ranks - 1)
    if op in (CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER):
        return ranks - 1
    return ranks


def _ring_channels_across(topology: Topology) -> int:
    return min(2 * topology.nics_per_node, MAX_CHANNELS)


def _inter_channel_gbps(topology: Topology, channels: int) -> float:
    """One channel's share of a node's NICs, as the search's speed array rounds it down."""
    return _speed_at_most(_INTER_SPEEDS, topology.generation, topology.nics_per_node * topology.nic_gbps / channels)


def _ring_bus_gbps(topology: Topology) -> float:
    """ring.cc: nChannels × bw, inside a node (the scale-up link) or across (the NICs). Across nodes a ring
    enters each node through a NIC and leaves through another, so a GPU's scale-up link carries ppn − 1 of
    every ppn hops: the NICs bound it unless that share of the link is slower."""
    if topology.nodes == 1:
        return topology.scale_up_gbps
    channels = _ring_channels_across(topology)
    across = channels * _inter_channel_gbps(topology, channels)
    ppn = topology.ranks_per_node
    return across if ppn == 1 else min(across, topology.scale_up_gbps * ppn / (ppn - 1))


def _ring(op: CollectiveOp, topology: Topology, protocol: str) -> tuple[float, float]:
    """ring.cc, ncclTuningRingModelInit: (latency µs, algbw GB/s)."""
    p = PROTOCOLS.index(protocol)
    bus = _ring_bus_gbps(topology)
    if protocol == LL:
        bus = min(LL_MAX_GBPS[topology.generation if topology.nodes == 1 else "volta"][topology.scale], bus * 0.5)
    if protocol == LL128:
        bus = min(bus * 0.92, RING_CHANNELS * RING_LL128_PER_CHANNEL_GBPS[topology.generation])
    steps = _steps(op, topology.ranks)
    intra_hw = HW_LATENCY_US[topology.link][RING][p]
    if op in (CollectiveOp.BROADCAST, CollectiveOp.REDUCE):
        # Channels that differ (NVSwitch systems): a chunk's latency per step, Simple taking the tree's.
        per_step = HW_LATENCY_US[topology.link][TREE if protocol == SIMPLE else RING][p]
        return BASE_LATENCY_US[RING][p] + steps * per_step, bus * topology.ranks / steps
    inter_lat = intra_hw if topology.nodes == 1 else HW_LATENCY_US["net"][RING][p]
    intra_lat = intra_hw
    if topology.nodes > 1:
        intra_lat = max(intra_hw, NET_OVERHEAD_US * (3 if protocol == SIMPLE else 1))
    inter_steps = (
        0 if topology.nodes == 1 else 2 * (topology.nodes - 1) if op is CollectiveOp.ALL_REDUCE else topology.nodes - 1
    )
    latency = BASE_LATENCY_US[RING][p] + (steps - inter_steps) * intra_lat + inter_steps * inter_lat
    return latency, bus * topology.ranks / steps


def _tree(topology: Topology, protocol: str) -> tuple[float, float]:
    """tree.cc, ncclTuningTreeModelInit (all-reduce only): (latency µs, algbw GB/s)."""
    p = PROTOCOLS.index(protocol)
    generation, scale = topology.generation, topology.scale
    if topology.nodes == 1:
        channels, bus = RING_CHANNELS, topology.scale_up_gbps
    else:
        channels = _ring_channels_across(topology)
        # tree.cc: min(inter, intra) × nChannels
        bus = min(channels * _inter_channel_gbps(topology, channels), topology.scale_up_gbps)
    bus = min(bus * 0.92, channels * TREE_PER_CHANNEL_GBPS[generation][scale])
    if protocol == LL:
        bus = min(bus / 3.8, LL_MAX_GBPS[generation if topology.nodes == 1 else "volta"][scale])
    if protocol == LL128:
        factor = 7.0 / 9.0 if topology.nodes == 1 else 120.0 / 128.0
        bus = min(bus * factor, channels * TREE_LL128_PER_CHANNEL_GBPS[generation][scale])
    if generation in ("hopper", "blackwell"):
        bus *= 0.85  # from Hopper on the search keeps the plain TREE pattern (maxTreePattern)
    intra_lat = HW_LATENCY_US[topology.link][TREE][p]
    inter_lat = intra_lat if topology.nodes == 1 else HW_LATENCY_US["net"][TREE][p]
    hops = topology.nodes.bit_length() - 1  # log2i
    latency = BASE_LATENCY_US[TREE][p] + 2 * ((topology.ranks_per_node - 1) * intra_lat + hops * inter_lat)
    return latency, bus * 0.5


def _nvls(op: CollectiveOp, topology: Topology) -> tuple[float, float] | None:
    """nvls.cc, ncclTuningNvlsModelInit (Simple only): NVLS inside one NVLink domain (all-reduce, all-gather,
    reduce-scatter), NVLS-tree across domains (all-reduce); None where NCCL would not run it."""
    if not topology.nvls or topology.generation not in NVLS_EFFICIENCY or topology.ranks_per_node < 2:
        return None
    tree = topology.nodes > 1
    if tree and op is not CollectiveOp.ALL_REDUCE:
        return None  # multi-node NVLS all-gather and reduce-scatter need CollNet
    if op not in (CollectiveOp.ALL_REDUCE, CollectiveOp.ALL_GATHER, CollectiveOp.REDUCE_SCATTER):
        return None
    speed = _speed_at_most(_INTRA_SPEEDS, topology.generation, topology.scale_up_gbps / NVLS_CHANNELS)
    intra = speed * NVLS_EFFICIENCY[topology.generation] * (NVLS_CHANNELS - 1) / NVLS_CHANNELS
    ppn = topology.ranks_per_node
    intra *= 2.0 if op is CollectiveOp.ALL_REDUCE else (ppn - 1) / ppn
    per_channel = intra
    if tree:
        inter = _inter_channel_gbps(topology, NVLS_CHANNELS) * (2 if topology.nodes <= 2 else 1)
        per_channel = min(intra, inter, NVLS_TREE_PER_CHANNEL_GBPS[topology.generation][topology.scale])
    steps = _steps(op, topology.ranks)
    algbw = per_channel * NVLS_CHANNELS * topology.ranks / steps
    intra_lat = HW_LATENCY_US["nvlink"][NVLS_TREE if tree else NVLS][2]
    if not tree:
        return intra_lat, algbw
    hops = topology.nodes.bit_length() - 1
    return intra_lat + 2 * hops * HW_LATENCY_US["net"][NVLS_TREE][2], algbw


def _ll128_enabled(topology: Topology) -> bool:
    """cost_model.cc, isLL128Enabled: only where the GPUs reach each other over NVLink (intra path ≤ NVB)."""
    return topology.link == "nvlink"


def candidates(op: CollectiveOp, size_bytes: float, topology: Topology) -> list[Estimate]:
    """Every (algorithm, protocol) NCCL would consider for ``op`` on ``size_bytes`` (nccl-tests' size, the
    whole buffer), with its modelled time (ring.cc/tree.cc/nvls.cc …ModelSim)."""
    if topology.ranks < 2:
        raise ModelError(f"ranks: a collective needs at least 2 ranks, got {topology.ranks}")
    if not size_bytes > 0:
        raise ModelError(f"size_bytes: must be positive, got {size_bytes}")
    protocols = [p for p in PROTOCOLS if p != LL128 or _ll128_enabled(topology)]
    log_size = (int(size_bytes) >> 6).bit_length() - 1
    estimates = []
    for protocol in protocols:
        latency, algbw = _ring(op, topology, protocol)
        channel_bytes = size_bytes / (RING_CHANNELS * topology.ranks)
        plateau = protocol == SIMPLE and topology.nodes > 1 and op is CollectiveOp.ALL_REDUCE and channel_bytes >= 64
        if plateau:  # ring.cc: the ring's plateau effect
            latency *= 1.9 if topology.generation == "volta" else 1.4
        estimates.append(_estimate(RING, protocol, latency, algbw, size_bytes))
        if op is CollectiveOp.ALL_REDUCE:
            latency, algbw = _tree(topology, protocol)
            if 0 <= log_size < len(TREE_CORRECTION[0]):
                algbw *= TREE_CORRECTION[PROTOCOLS.index(protocol)][log_size]
            estimates.append(_estimate(TREE, protocol, latency, algbw, size_bytes))
    nvls = _nvls(op, topology)
    if nvls is not None:
        estimates.append(_estimate(NVLS_TREE if topology.nodes > 1 else NVLS, SIMPLE, *nvls, size_bytes))
    return estimates


def best(op: CollectiveOp, size_bytes: float, topology: Topology) -> Estimate:
    """The (algorithm, protocol) NCCL picks: the shortest modelled time."""
    return min(candidates(op, size_bytes, topology), key=lambda estimate: estimate.time_us)


def _estimate(algorithm: str, protocol: str, latency_us: float, algbw_gbps: float, size_bytes: float) -> Estimate:
    return Estimate(
        algorithm=algorithm,
        protocol=protocol,
        latency_us=latency_us,
        algbw_gbps=algbw_gbps,
        time_us=latency_us + size_bytes / (1000 * algbw_gbps),
    )
