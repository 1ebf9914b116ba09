"""What a collective should take on given hardware: the time and bus bandwidth a healthy system reaches, as
NCCL's own cost model (``results.analysis.nccl_model``) expects it for the algorithm and protocol NCCL would pick.

A platform profile supplies the hardware (``fabric_of``): the GPU generation, the scale-up link (NVLink, with or
without NVLink SHARP, or PCIe) and how many of the run's ranks share one NVLink domain, and the NICs beyond
it. busbw is nccl-tests' (doc/PERFORMANCE.md; ``collectives.bus_bandwidth_factor``): algbw = S / t × the bus
factor, S the whole buffer.

All-to-all is NCCL's grouped send/recv, outside its tuning model: each rank sends (k−1)/n of its buffer over the
scale-up link (k ranks per domain) and (n−k)/n over its share of the NICs, in parallel, after n−1 steps of the
network's (or NVLink's) per-hop LL latency.
"""

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from emuplan.results.analysis import nccl_model
from emuplan.results.analysis.nccl_model import NVLINK_SHARE_OF_WIRE, ModelError, Topology
from emuplan.workload.collectives import CollectiveOp, bus_bandwidth_gbps, normalise_op_name

if TYPE_CHECKING:
    from emuplan.workload.platforms import Platform


class FabricError(ValueError):
    """Hardware figures the expected curve cannot use; the message names the figure."""


@dataclass(frozen=True)
class Fabric:
    """The hardware a run's ranks span, as NCCL's model sees it, and the names pages give its two levels."""

    topology: Topology
    scale_up_name: str
    scale_out_name: str


@dataclass(frozen=True)
class Expected:
    """The expected figures of one collective at one size (busbw in the nccl-tests convention)."""

    time_us: float
    latency_us: float  # the latency part of time_us
    busbw_gbps: float
    algorithm: str  # NCCL's: "ring", "tree", "nvls", "nvls-tree", or "pairwise" (all-to-all)
    protocol: str  # "LL", "LL128" or "Simple"
    bounding_level: str  # the level whose bandwidth sets the ceiling
    formula: str

    def as_dict(self) -> dict:
        return asdict(self)


def expected_collective(op: CollectiveOp, size_bytes: float, ranks: int, fabric: Fabric) -> Expected:
    """The expected time and busbw of ``op`` on ``size_bytes`` (the whole buffer) over ``ranks`` ranks."""
    topology = fabric.topology
    if ranks != topology.ranks:
        raise FabricError(f"ranks: the fabric was laid out for {topology.ranks} ranks, asked for {ranks}")
    if op is CollectiveOp.ALL_TO_ALL:
        return _pairwise(size_bytes, fabric)
    try:
        estimate = nccl_model.best(op, size_bytes, topology)
    except ModelError as error:
        raise FabricError(str(error)) from None
    level = fabric.scale_up_name if topology.nodes == 1 else fabric.scale_out_name
    domains = "one scale-up domain" if topology.nodes == 1 else f"{topology.nodes} domains of {topology.ranks_per_node}"
    formula = (
        f"NCCL {estimate.algorithm}/{estimate.protocol} over {ranks} ranks in {domains}: "
        f"{estimate.latency_us:.1f} µs + S ÷ {estimate.algbw_gbps:.1f} GB/s algbw ({nccl_model.NCCL_SOURCE})"
    )
    return Expected(
        time_us=estimate.time_us,
        latency_us=estimate.latency_us,
        busbw_gbps=estimate.busbw_gbps(op, size_bytes, ranks),
        algorithm=estimate.algorithm,
        protocol=estimate.protocol,
        bounding_level=level,
        formula=formula,
    )


def pct_of_expected(measured_busbw_gbps: float | None, expected_busbw_gbps: float | None) -> float | None:
    """Measured busbw as a percentage of the expected busbw; None when either is unknown."""
    if measured_busbw_gbps is None or expected_busbw_gbps is None or expected_busbw_gbps <= 0:
        return None
    return measured_busbw_gbps / expected_busbw_gbps * 100.0


def fabric_of(platform: "Platform", ranks: int, hosts: int | None) -> Fabric:
    """What a run of ``ranks`` ranks on ``hosts`` nodes of ``platform`` spans: its ranks per node (all on one
    node when hosts are unknown and they fit one), the NVLink domains those nodes fill (NCCL's nodes: one per
    DGX, one per NVL72 rack) and the NICs of each."""
    if ranks < 2:
        raise FabricError(f"ranks: a collective needs at least 2 ranks to be expected anything, got {ranks}")
    per_node = math.ceil(ranks / hosts) if hosts else min(ranks, platform.gpus_per_node)
    hosts = math.ceil(ranks / per_node)
    nodes_per_domain = platform.scale_up_domain_gpus // platform.gpus_per_node
    domains = math.ceil(hosts / nodes_per_domain)
    scale_up = platform.scale_up_gb_s
    if platform.scale_up_link == "nvlink":
        scale_up *= NVLINK_SHARE_OF_WIRE[platform.gpu_generation]
    topology = Topology(
        generation=platform.gpu_generation,
        link=platform.scale_up_link,
        scale_up_gbps=scale_up,
        nvls=platform.nvls,
        ranks=ranks,
        nodes=domains,
        nic_gbps=platform.nic_gbit_s / 8,
        nics_per_node=platform.nics_per_node * min(hosts, nodes_per_domain),
    )
    return Fabric(topology, platform.scale_up_fabric, platform.scale_out_fabric)


def healthy_time_us(platform: "Platform") -> Callable[[CollectiveOp, int, int], float | None]:
    """(op, whole-buffer size, group size) → the time a healthy ``platform`` takes, µs (its group laid out from the
    first node on); None where the platform cannot say (a group it does not fit)."""

    def time_us(op: CollectiveOp, size_bytes: int, group_size: int) -> float | None:
        try:
            return expected_collective(op, size_bytes, group_size, fabric_of(platform, group_size, None)).time_us
        except FabricError:
            return None

    return time_us


def measured_time_us(group: dict, sweep: bool) -> float:
    """The time a group is judged by: a sweep's size by its mean (nccl-tests' own), a distribution by p50."""
    return group["mean_us"] if sweep else group["p50_us"]


def measured_busbw_gbps(group: dict, sweep: bool, ranks: int) -> float | None:
    """busbw from the time (``measured_time_us``), not from a file's cell: the cells carry two decimals, and
    0.01 GB/s printed for 0.006 would read as far above any expectation."""
    op = normalise_op_name(group["collective"])
    time_us = measured_time_us(group, sweep)
    if op is None or time_us <= 0 or not group.get("size_bytes"):
        return None
    return bus_bandwidth_gbps(op, group["size_bytes"], time_us * 1e-6, ranks)


def group_expectation(group: dict, sweep: bool, ranks: int, fabric: Fabric) -> tuple[Expected, float | None] | None:
    """What ``fabric`` expects of a group (collective, size) over ``ranks`` ranks, and the % of it the group
    reached; None for a collective or size nothing is expected of. FabricError when the fabric does not fit."""
    op = normalise_op_name(group["collective"])
    if op is None or not group.get("size_bytes") or ranks < 2:
        return None
    expected = expected_collective(op, group["size_bytes"], ranks, fabric)
    return expected, pct_of_expected(measured_busbw_gbps(group, sweep, ranks), expected.busbw_gbps)


def _pairwise(size_bytes: float, fabric: Fabric) -> Expected:
    topology = fabric.topology
    ranks, per_domain = topology.ranks, topology.ranks_per_node
    out_gbps = topology.nics_per_node * topology.nic_gbps / per_domain
    inside_s = (per_domain - 1) / ranks * size_bytes / (topology.scale_up_gbps * 1e9)
    across_s = (ranks - per_domain) / ranks * size_bytes / (out_gbps * 1e9)
    level = fabric.scale_up_name if inside_s >= across_s else fabric.scale_out_name
    hop_us = nccl_model.HW_LATENCY_US["net" if topology.nodes > 1 else topology.link][nccl_model.RING][0]
    latency_s = (ranks - 1) * hop_us * 1e-6
    time_s = latency_s + max(inside_s, across_s)
    formula = (
        f"pairwise send/recv over {ranks} ranks, {per_domain} per {fabric.scale_up_name} domain (NCCL all-to-all, "
        f"outside its tuning model): {ranks - 1} × {hop_us:g} µs + max({per_domain - 1}/{ranks} × S ÷ "
        f"{topology.scale_up_gbps:.1f} GB/s, {ranks - per_domain}/{ranks} × S ÷ {out_gbps:.1f} GB/s): bound by {level}"
    )
    return Expected(
        time_us=time_s * 1e6,
        latency_us=latency_s * 1e6,
        busbw_gbps=bus_bandwidth_gbps(CollectiveOp.ALL_TO_ALL, size_bytes, time_s, ranks),
        algorithm="pairwise",
        protocol="Simple",
        bounding_level=level,
        formula=formula,
    )
