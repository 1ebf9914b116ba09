"""What a collective should take on given hardware: the expected time and bus bandwidth of the algorithm
NCCL would use, from the α-β cost of each level its ranks span.

Inputs are plain numbers (a platform profile supplies them): the scale-up level (NVLink/NVSwitch: GB/s
per GPU per direction and its per-step latency α), how many of the run's ranks share one scale-up domain,
and the scale-out level (the domain's NICs × their rate ÷ its GPUs, in GB/s per GPU, and its α).

Sources of the formulas:

- busbw = algbw × the bus factor, algbw = S / t (nccl-tests doc/PERFORMANCE.md; ``collectives.
  bus_bandwidth_factor``). S is nccl-tests' size, the whole buffer.
- Ring inside one domain: the α-β ring of ``collectives.ideal_time_s``: steps × α + factor × S / B
  (steps 2(n−1) for all-reduce, n−1 for all-gather and reduce-scatter).
- Across domains, NCCL's tuning model (NVIDIA/nccl src/graph/tuning.cc, ``ncclTopoTuneModel``) gives the
  latency of a ring as ``(nsteps − nInterSteps) × intraLat + nInterSteps × interLat``, the inter-domain
  steps being the ring's steps over the domains (2(d−1) for all-reduce, d−1 for all-gather and
  reduce-scatter), and its bandwidth as ``nChannels × bwInter``: the channels' share of every NIC a domain
  has. Every channel's ring leaves each domain once and carries the whole ring traffic (2(n−1)/n·S for
  all-reduce) over that hop, so busbw cannot pass what the domain's NICs carry together: its ranks × the
  per-GPU scale-out figure (8 × 400 Gbit/s on a DGX H100: 400 GB/s, not 50), nor the scale-up B.
- All-reduce across domains may also run as NCCL's double binary tree; NCCL takes the algorithm whose
  modelled time is shortest (``ncclTopoGetAlgoTime``: ``lat + bytes / bw``). Tree latency per tuning.cc:
  2 × ((ranks per domain − 1) × intraLat + log2(d) × interLat). Tree bandwidth: every byte goes up the
  chain inside a domain and back down (tuning.cc turns tree busBw into algBw with a ratio of 0.5), so
  algbw ≤ B_up / 2; between two domains each sends S out (half the data up one tree, the other half down
  the other), beyond two an inner domain also feeds two children, 2S (tuning.cc halves bwInter past two
  nodes for NVLS trees): algbw ≤ the domain's NICs ÷ 1 (two domains) or ÷ 2. This is why two-node logs pass
  the ring's ceiling: the 16-rank B200 log prints 702.91 GB/s busbw where 8 × 400 Gbit/s per node (DGX
  B200) carries 400 GB/s.
- All-to-all is NCCL's grouped send/recv, not a ring: each rank sends (k−1)/n of its buffer over the
  scale-up level (k ranks per domain) and (n−k)/n over its scale-out share, in parallel, after n−1 steps.

Not modelled: NVLS (NVLink SHARP, NCCL ≥ 2.17 on NVSwitch systems) and CollNet/SHARP, which reduce in the
switch and can pass these ceilings, and NCCL's protocol choice (LL, LL128, Simple): one α per level.
"""

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from emuplan.workload.collectives import (
    CollectiveOp,
    bus_bandwidth_factor,
    bus_bandwidth_gbps,
    ideal_time_s,
    normalise_op_name,
    ring_latency_steps,
)

if TYPE_CHECKING:
    from emuplan.workload.platforms import Platform


class FabricError(ValueError):
    """Hardware figures the expected curve cannot use; the message names the figure."""


@dataclass(frozen=True)
class Level:
    """One level of the fabric: its name (shown as the bound), GB/s per GPU per direction, and α."""

    name: str
    gbps: float
    latency_us: float


@dataclass(frozen=True)
class Fabric:
    """The levels a run's ranks sit on. ``ranks_per_domain``: the run's ranks in one scale-up domain (8 on a
    DGX node, up to 72 on a GB200 NVL72 rack); ``scale_out`` is needed when the ranks span domains."""

    scale_up: Level
    ranks_per_domain: int
    scale_out: Level | None = None

    def __post_init__(self) -> None:
        levels = [("scale_up", self.scale_up), ("scale_out", self.scale_out)]
        for where, level in levels:
            if level is None:
                continue
            if not level.gbps > 0:
                raise FabricError(f"{where}.gbps: must be positive, got {level.gbps}")
            if not level.latency_us >= 0:
                raise FabricError(f"{where}.latency_us: must not be negative, got {level.latency_us}")
        if self.ranks_per_domain < 1:
            raise FabricError(f"ranks_per_domain: must be at least 1, got {self.ranks_per_domain}")


@dataclass(frozen=True)
class Expected:
    """The expected figures of one collective at one size (busbw in the nccl-tests convention)."""

    time_us: float
    latency_us: float  # the α part of time_us
    busbw_gbps: float
    algorithm: str  # "ring", "tree" or "pairwise" (all-to-all)
    bounding_level: str  # the level whose bandwidth sets the ceiling
    formula: str

    def as_dict(self) -> dict:
        return asdict(self)


def expected_collective(op: CollectiveOp, size_bytes: float, ranks: int, fabric: Fabric) -> Expected:
    """The expected time and busbw of ``op`` on ``size_bytes`` (the whole buffer) over ``ranks`` ranks."""
    if ranks < 2:
        raise FabricError(f"ranks: a collective needs at least 2 ranks to be expected anything, got {ranks}")
    if not size_bytes > 0:
        raise FabricError(f"size_bytes: must be positive, got {size_bytes}")
    domains = math.ceil(ranks / fabric.ranks_per_domain)
    if domains == 1:
        return _one_domain(op, size_bytes, ranks, fabric.scale_up)
    if fabric.scale_out is None:
        raise FabricError(
            f"scale_out: {ranks} ranks at {fabric.ranks_per_domain} per scale-up domain span {domains} domains, "
            "and the fabric has no scale-out level"
        )
    per_domain = fabric.ranks_per_domain
    if op is CollectiveOp.ALL_TO_ALL:
        return _pairwise(size_bytes, ranks, per_domain, fabric.scale_up, fabric.scale_out)
    candidates = [_ring_across(op, size_bytes, ranks, domains, per_domain, fabric.scale_up, fabric.scale_out)]
    if op is CollectiveOp.ALL_REDUCE:
        candidates.append(_tree(size_bytes, ranks, domains, per_domain, fabric.scale_up, fabric.scale_out))
    return min(candidates, key=lambda expected: expected.time_us)


def pct_of_expected(measured_busbw_gbps: float | None, expected_busbw_gbps: float | None) -> float | None:
    """Measured busbw as a percentage of the expected busbw; None when either is unknown."""
    if measured_busbw_gbps is None or expected_busbw_gbps is None or expected_busbw_gbps <= 0:
        return None
    return measured_busbw_gbps / expected_busbw_gbps * 100.0


def fabric_of(platform: "Platform", ranks: int, hosts: int | None) -> Fabric:
    """The levels a run of ``ranks`` ranks on ``hosts`` nodes of ``platform`` spans. Its ranks per scale-up
    domain: the ranks per node (all ranks on one node when hosts are unknown and they fit one) times the
    nodes one domain holds (1 on a DGX, 18 on a GB200 NVL72), never more than the run has."""
    nodes_per_domain = platform.scale_up_domain_gpus // platform.gpus_per_node
    per_node = math.ceil(ranks / hosts) if hosts else min(ranks, platform.gpus_per_node)
    return Fabric(
        scale_up=Level(platform.scale_up_fabric, platform.scale_up_gb_s, platform.scale_up_alpha_us),
        ranks_per_domain=max(1, min(ranks, per_node * nodes_per_domain)),
        scale_out=Level(platform.scale_out_fabric, platform.scale_out_gb_s, platform.scale_out_alpha_us),
    )


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


def _result(
    op: CollectiveOp,
    size_bytes: float,
    ranks: int,
    latency_s: float,
    time_s: float,
    algorithm: str,
    level: str,
    formula: str,
) -> Expected:
    return Expected(
        time_us=time_s * 1e6,
        latency_us=latency_s * 1e6,
        busbw_gbps=bus_bandwidth_gbps(op, size_bytes, time_s, ranks),
        algorithm=algorithm,
        bounding_level=level,
        formula=formula,
    )


def _one_domain(op: CollectiveOp, size_bytes: float, ranks: int, up: Level) -> Expected:
    steps, factor = ring_latency_steps(op, ranks), bus_bandwidth_factor(op, ranks)
    time_s = ideal_time_s(op, size_bytes, ranks, up.gbps * 8, up.latency_us)
    formula = (
        f"ring over {ranks} ranks in one {up.name} domain (α-β ring, collectives.ideal_time_s): "
        f"{steps} × α + {factor:g} × S ÷ B, α = {up.latency_us:g} µs, B = {up.gbps:g} GB/s ({up.name})"
    )
    return _result(op, size_bytes, ranks, steps * up.latency_us * 1e-6, time_s, "ring", up.name, formula)


def _ring_across(
    op: CollectiveOp, size_bytes: float, ranks: int, domains: int, per_domain: int, up: Level, out: Level
) -> Expected:
    inter_steps = ring_latency_steps(op, domains)
    intra_steps = ring_latency_steps(op, ranks) - inter_steps
    factor = bus_bandwidth_factor(op, ranks)
    domain_out_gbps = per_domain * out.gbps
    # With one rank per domain every hop is a scale-out one: the scale-up level bounds nothing.
    if per_domain > 1 and up.gbps <= domain_out_gbps:
        ceiling, level = up.gbps, up.name
    else:
        ceiling, level = domain_out_gbps, out.name
    latency_s = (intra_steps * up.latency_us + inter_steps * out.latency_us) * 1e-6
    bandwidth = f"min(B_up, {per_domain} × B_out)" if per_domain > 1 else "B_out"
    time_s = latency_s + factor * size_bytes / (ceiling * 1e9)
    formula = (
        f"ring over {ranks} ranks in {domains} {up.name} domains (NCCL tuning.cc): {intra_steps} × α_up + "
        f"{inter_steps} × α_out + {factor:g} × S ÷ {bandwidth}, α_up = {up.latency_us:g} µs, "
        f"α_out = {out.latency_us:g} µs, B_up = {up.gbps:g} GB/s ({up.name}), B_out = {out.gbps:g} GB/s per GPU "
        f"({out.name}): bound {ceiling:g} GB/s by {level}"
    )
    return _result(op, size_bytes, ranks, latency_s, time_s, "ring", level, formula)


def _tree(size_bytes: float, ranks: int, domains: int, per_domain: int, up: Level, out: Level) -> Expected:
    chain_gbps = up.gbps / 2
    sent_per_byte = 1 if domains == 2 else 2
    between_gbps = per_domain * out.gbps / sent_per_byte
    # One rank per domain: no chain inside it.
    if per_domain > 1 and chain_gbps <= between_gbps:
        ceiling, level = chain_gbps, up.name
    else:
        ceiling, level = between_gbps, out.name
    hops = domains.bit_length() - 1  # tuning.cc's log2i: the floor of log2
    latency_s = 2 * ((per_domain - 1) * up.latency_us + hops * out.latency_us) * 1e-6
    between = f"{per_domain} × B_out ÷ {sent_per_byte}"
    bandwidth = f"min(B_up ÷ 2, {between})" if per_domain > 1 else f"({between})"
    time_s = latency_s + size_bytes / (ceiling * 1e9)
    formula = (
        f"double binary tree over {domains} {up.name} domains of {per_domain} ranks (NCCL tuning.cc): "
        f"2 × ({per_domain - 1} × α_up + {hops} × α_out) + S ÷ {bandwidth}, α_up = {up.latency_us:g} µs, "
        f"α_out = {out.latency_us:g} µs, B_up = {up.gbps:g} GB/s ({up.name}), B_out = {out.gbps:g} GB/s per GPU "
        f"({out.name}): algbw bound {ceiling:g} GB/s by {level}"
    )
    return _result(CollectiveOp.ALL_REDUCE, size_bytes, ranks, latency_s, time_s, "tree", level, formula)


def _pairwise(size_bytes: float, ranks: int, per_domain: int, up: Level, out: Level) -> Expected:
    inside_s = (per_domain - 1) / ranks * size_bytes / (up.gbps * 1e9)
    across_s = (ranks - per_domain) / ranks * size_bytes / (out.gbps * 1e9)
    level = up.name if inside_s > across_s else out.name
    latency_s = (ranks - 1) * out.latency_us * 1e-6
    time_s = latency_s + max(inside_s, across_s)
    formula = (
        f"pairwise send/recv over {ranks} ranks, {per_domain} per {up.name} domain (NCCL all-to-all): "
        f"{ranks - 1} × α_out + max({per_domain - 1}/{ranks} × S ÷ B_up, {ranks - per_domain}/{ranks} × S ÷ B_out), "
        f"α_out = {out.latency_us:g} µs, B_up = {up.gbps:g} GB/s ({up.name}), B_out = {out.gbps:g} GB/s per GPU "
        f"({out.name}): bound by {level}"
    )
    return _result(CollectiveOp.ALL_TO_ALL, size_bytes, ranks, latency_s, time_s, "pairwise", level, formula)
