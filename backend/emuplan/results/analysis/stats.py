"""Statistics, ECDF grids and delay series of a run — computed once at import and cached as JSON.

Groups are (collective, data size, variant). Per group: count, min, mean, std (sample, ddof=1), the
percentiles p50 p90 p95 p99 p99.9 (nearest rank: the value at rank ⌈p·n⌉, always an observed sample),
max, p99/p50, algbw/busbw (nccl-tests convention: size / mean time, GB = 1e9 B, busbw = algbw × factor;
the file's own figures when the rank count is unknown), and the ideal α-β time with the % of it reached
(ideal / mean × 100) when a plan gives the network, else the % the file reports (KAI ``Ideal (%)``).

The ECDF grid is the sorted sample at ~2000 evenly spaced ranks plus min, max and the ranks of the tail
percentiles, so a chart drawn from it shows the exact tail. The delay series (``delay_series``) keeps every
trial above the group's p99.9 and each bucket's fastest and slowest trial: no spike disappears.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tsdownsample import MinMaxDownsampler

from emuplan.results.analysis.stragglers import (
    FLOW_BASIS,
    rank_times_from_flows,
    straggler_headline,
    summarise_stragglers,
)
from emuplan.workload.collectives import (
    algorithm_bandwidth_gbps,
    bus_bandwidth_gbps,
    ideal_time_s,
    normalise_op_name,
)
from emuplan.workload.document import PlanDocument, PlannedCollective, collective_of_size

PERCENTILES: dict[str, float] = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}
CURVE_POINTS = 2000
# Cap on all curve points of one run, so a file with hundreds of sizes still caches a modest summary.
RUN_POINT_BUDGET = 64000
MIN_CURVE_POINTS = 100
SLOWEST_KEPT = 20


@dataclass(frozen=True)
class NetworkModel:
    """What the ideal time needs beyond the samples: the plan's network and its collectives. ``link_gbps``
    None: no link was given (only the server's fallback), so no ideal time is computed."""

    link_gbps: float | None
    latency_us: float
    collectives: list[PlannedCollective] = field(default_factory=list)

    @classmethod
    def from_plan(cls, document: PlanDocument) -> "NetworkModel":
        return cls(document.network.link_gbps, document.network.latency_us, document.collectives)

    def planned(self, op: str, size_bytes: int) -> PlannedCollective | None:
        """The plan's collective this op and data size (KCCB's or the whole buffer) stand for."""
        collective = normalise_op_name(op)
        return collective_of_size(self.collectives, collective, size_bytes) if collective else None


def nearest_rank_index(count: int, percentile: float) -> int:
    return max(0, min(count - 1, int(np.ceil(percentile / 100.0 * count)) - 1))


def describe(sorted_values: np.ndarray) -> dict:
    """count, min, mean, std, percentiles, max, p99/p50 of an ascending array (µs)."""
    count = len(sorted_values)
    std = float(sorted_values.std(ddof=1)) if count > 1 else 0.0
    return describe_ranks(count, sorted_values.__getitem__, float(sorted_values.mean()), std)


def described_ranks(count: int) -> list[int]:
    """The ranks (0-based, ascending order) whose values ``describe_ranks`` reads."""
    return [0, count - 1, *(nearest_rank_index(count, percentile) for percentile in PERCENTILES.values())]


def describe_ranks(count: int, value_at, mean_us: float, std_us: float) -> dict:
    """``describe`` of ``count`` values given by ``value_at(rank)`` (0-based, ascending) for the ranks
    ``described_ranks`` lists, with their mean and sample standard deviation: what a sorted array gives,
    and what an out-of-core sort streamed past once gives (``results.streaming.streamed``)."""
    stats = {"count": count, "min_us": float(value_at(0)), "mean_us": mean_us, "std_us": std_us}
    for name, percentile in PERCENTILES.items():
        stats[f"{name}_us"] = float(value_at(nearest_rank_index(count, percentile)))
    stats["max_us"] = float(value_at(count - 1))
    stats["p99_over_p50"] = stats["p99_us"] / stats["p50_us"] if stats["p50_us"] > 0 else None
    return stats


def ecdf_ranks(count: int, points: int = CURVE_POINTS) -> np.ndarray:
    """The ranks (0-based, ascending) an ECDF grid of ``count`` values takes: ~``points`` evenly spaced, min,
    max and the tail percentiles' (every value when there are fewer)."""
    if count <= points:
        return np.arange(count)
    tails = [nearest_rank_index(count, p) for p in PERCENTILES.values()]
    return np.unique(
        np.concatenate([np.linspace(0, count - 1, points).round().astype(np.int64), [0, count - 1], tails])
    )


def ecdf_grid(sorted_values: np.ndarray, points: int = CURVE_POINTS) -> dict:
    """x (µs) and cumulative probability at evenly spaced ranks + min, max and the tail percentiles."""
    ranks = ecdf_ranks(len(sorted_values), points)
    return ecdf_of(sorted_values[ranks], ranks, len(sorted_values))


def ecdf_of(values: np.ndarray, ranks: np.ndarray, count: int) -> dict:
    """The ECDF grid of the ``values`` at ``ranks`` (``ecdf_ranks``) of ``count`` sorted values."""
    return {"x": values.round(3).tolist(), "p": ((ranks + 1) / count).round(7).tolist()}


# At most this share of a delay series' points go to the trials above p99.9 (the slowest of them when there
# are more: a group of over a million trials); the rest draw each bucket's fastest and slowest trial.
SPIKE_SHARE = 4


def delay_series(
    iterations: np.ndarray, durations: np.ndarray, points: int = CURVE_POINTS, spike_floor: float | None = None
) -> dict:
    """Completion time per iteration (ascending) in at most ``points`` points: every trial above ``spike_floor``
    (default: the nearest-rank p99.9) at its own iteration and time, up to ``points // SPIKE_SHARE`` of them (the
    slowest), and the fastest and slowest trial of each of the buckets the iterations are cut into.

    Min/max per bucket alone (or MinMaxLTTB, which chooses one of them per bucket) draws only the taller of two
    spikes a bucket apart; a chart ~1000 px wide has no room between them, but its hover and its zoom do."""
    if len(durations) <= points:
        return {"x": iterations.tolist(), "y": durations.round(3).tolist()}
    if spike_floor is None:
        rank = nearest_rank_index(len(durations), PERCENTILES["p99_9"])
        spike_floor = np.partition(durations, rank)[rank]
    spikes = np.flatnonzero(durations > spike_floor)
    spike_room = points // SPIKE_SHARE
    if len(spikes) > spike_room:
        spikes = spikes[np.argpartition(durations[spikes], -spike_room)[-spike_room:]]
    envelope = MinMaxDownsampler().downsample(
        iterations.astype(np.float64), durations, n_out=(points - len(spikes)) // 2 * 2
    )
    index = np.union1d(envelope.astype(np.int64), spikes)
    return {"x": iterations[index].tolist(), "y": durations[index].round(3).tolist()}


def group_label(collective: str, size_bytes: int | None, variant: str) -> str:
    parts = [collective, f"{size_bytes} B" if size_bytes is not None else "size unknown"]
    if variant:
        parts.append(variant)
    return " · ".join(parts)


def _group_codes(samples: pa.Table) -> tuple[np.ndarray, list[tuple[str, int | None, str]]]:
    """A small integer per (collective, size, variant) for every row, and the keys.

    Each key column is dictionary-encoded (text columns already are), the three codes are combined into
    one integer and numbered: linear passes, no sort of the whole table.
    """
    encoded = []
    for name in ("collective", "size_bytes", "variant"):
        column = samples[name].combine_chunks()
        is_dictionary = pa.types.is_dictionary(column.type)
        encoded.append(column if is_dictionary else column.dictionary_encode(null_encoding="encode"))
    widths = [len(column.dictionary) for column in encoded]
    span = int(np.prod(widths))
    # The narrowest integer that holds every combined code: less memory to go through.
    combined = np.zeros(samples.num_rows, dtype=np.min_scalar_type(min(span, 1 << 63) - 1))
    for column, width in zip(encoded, widths, strict=True):
        if width > 1:  # a key column with one value adds nothing to the code
            combined *= width
            np.add(combined, column.indices.to_numpy(zero_copy_only=False), out=combined, casting="unsafe")
    if span <= 1 << 20:
        # Dense combined codes: a histogram finds the used ones without hashing or sorting.
        used = np.flatnonzero(np.bincount(combined, minlength=span))
        if len(used) == span:
            codes = combined  # every combination occurs: the codes are the group numbers already
        else:
            position = np.zeros(span, dtype=combined.dtype)
            position[used] = np.arange(len(used))
            codes = position[combined]
    else:
        groups = pa.array(combined).dictionary_encode()
        used = groups.dictionary.to_numpy()
        codes = groups.indices.to_numpy(zero_copy_only=False)
    keys = []
    for code in used:
        parts = []
        for column, width in zip(reversed(encoded), reversed(widths), strict=True):
            parts.append(column.dictionary[int(code % width)].as_py())
            code //= width
        keys.append(tuple(reversed(parts)))
    # Few groups → 16-bit codes, for which numpy's stable argsort is a radix sort.
    return codes.astype(np.uint16 if len(keys) < 65536 else np.int64, copy=False), keys


def curve_points(group_count: int) -> int:
    """Points of each group's ECDF grid and delay series: fewer when there are many groups."""
    return max(MIN_CURVE_POINTS, min(CURVE_POINTS, RUN_POINT_BUDGET // (2 * group_count)))


# The figures a file may report per sample, averaged per group.
REPORTED_FIGURES = ("algbw_gbps", "busbw_gbps", "ideal_pct")


def group_entry(key: tuple[str, int | None, str], described: dict) -> dict:
    """A group's statistics entry: its key and label, then ``describe``'s figures."""
    collective, size_bytes, variant = key
    label = group_label(collective, size_bytes, variant)
    return {"label": label, "collective": collective, "size_bytes": size_bytes, "variant": variant, **described}


def reported_figures(means: list[float | None]) -> dict:
    """The group's means of ``REPORTED_FIGURES`` (None where the file has none) under their summary names."""
    algbw, busbw, ideal = means
    return {"reported_algbw_gbps": algbw, "reported_busbw_gbps": busbw, "reported_pct_of_ideal": ideal}


def summarise(
    samples: pa.Table,
    *,
    ranks: int | None = None,
    network: NetworkModel | None = None,
    flows: pa.Table | None = None,
    reported_avg_busbw: dict[str, float] | None = None,
    elements: dict[tuple[str, int], tuple[int, str]] | None = None,
    printed: dict[tuple[str, int, str], dict[str, str]] | None = None,
    wrong: dict[tuple[str, int, str], int] | None = None,
    rank_times: pa.Table | None = None,
    rank_unit: str = "rank",
    rank_basis: str = "",
) -> dict:
    """The cached summary of one run: ``groups`` (statistics; nccl-tests' ``wrong`` count where the file has
    that column), ``ecdf`` and ``delay`` (per group, same order),
    ``overall`` statistics with ``overall_ecdf`` (all samples together: what comparisons test), ``flows``
    (flow-completion statistics and ECDF) for per-flow uploads, and ``stragglers`` (per-rank and per-host
    figures, ``results.analysis.stragglers``) when the file times every rank or has flows to several endpoints.
    A group timed once whose cells the file printed (nccl-tests) keeps their text as ``printed``."""
    durations = samples["duration_us"].to_numpy()
    iterations = samples["iteration"].to_numpy()
    codes, keys = _group_codes(samples)
    points = curve_points(len(keys))
    reported = {name: samples[name] for name in REPORTED_FIGURES}
    groups, ecdfs, delays = [], [], []
    # Every group's sorted samples one after another: sorting that merges the groups' runs (timsort).
    all_sorted = np.empty_like(durations)
    filled = 0
    for (collective, size_bytes, variant), rows in zip(keys, _rows_by_group(codes, len(keys)), strict=True):
        values = durations[rows] if rows is not None else durations
        ordered = all_sorted[filled : filled + len(values)]
        ordered[:] = values
        ordered.sort()
        filled += len(values)
        stats = group_entry((collective, size_bytes, variant), describe(ordered))
        if elements and (collective, size_bytes) in elements:
            stats["elements"], stats["dtype"] = elements[(collective, size_bytes)]
        if printed and len(values) == 1 and (collective, size_bytes, variant) in printed:
            stats["printed"] = printed[(collective, size_bytes, variant)]
        if wrong and (collective, size_bytes, variant) in wrong:
            stats["wrong"] = wrong[(collective, size_bytes, variant)]
        reported_means = [_group_mean(reported[name], rows) for name in REPORTED_FIGURES]
        stats.update(reported_figures(reported_means))
        stats.update(group_rates(stats, network, ranks))
        groups.append(stats)
        ecdfs.append(ecdf_grid(ordered, points))
        group_iterations = iterations[rows] if rows is not None else iterations
        if len(group_iterations) > 1 and np.any(np.diff(group_iterations) < 0):
            by_iteration = np.argsort(group_iterations, kind="stable")
            group_iterations, values = group_iterations[by_iteration], values[by_iteration]
        if len(values) > 1:
            stats.update(_slowest_and_first(group_iterations, values, ordered))
        delays.append(delay_series(group_iterations, values, points, spike_floor=stats["p99_9_us"]))
    if len(groups) > 1:
        all_sorted.sort(kind="stable")
    summary = {
        "sample_count": samples.num_rows,
        "overall": describe(all_sorted),
        "overall_ecdf": ecdf_grid(all_sorted),
        "groups": groups,
        "ecdf": ecdfs,
        "delay": delays,
        "reported_avg_busbw_gbps": dict(reported_avg_busbw or {}),
    }
    if flows is not None and flows.num_rows:
        fct = np.sort(flows["fct_us"].to_numpy())
        summary["flows"] = {"label": "flow completion", **describe(fct), "ecdf": ecdf_grid(fct)}
        if rank_times is None:
            rank_times, rank_unit, rank_basis = rank_times_from_flows(flows), "endpoint", FLOW_BASIS
    stragglers = summarise_stragglers(rank_times, unit=rank_unit, basis=rank_basis)
    if stragglers is not None:
        summary["stragglers"] = stragglers
    return summary


# Up to this many groups, one pass over the codes per group finds its rows faster than sorting the codes.
SCANNED_GROUPS = 16


def _rows_by_group(codes: np.ndarray, count: int) -> list[np.ndarray | None]:
    """The row numbers of each group, ascending (None: the one group is every row)."""
    if count == 1:
        return [None]
    if count <= SCANNED_GROUPS:
        return [np.flatnonzero(codes == code) for code in range(count)]
    order = np.argsort(codes, kind="stable")
    return np.split(order, np.searchsorted(codes[order], np.arange(1, count)))


def _group_mean(column: pa.ChunkedArray, rows: np.ndarray | None) -> float | None:
    """The mean of a file's own figure over a group's rows, nulls skipped; None when it has none."""
    if column.null_count == len(column):
        return None
    return pc.mean(column if rows is None else column.take(pa.array(rows))).as_py()


def _slowest_and_first(iterations: np.ndarray, durations: np.ndarray, ordered: np.ndarray) -> dict:
    """The ``SLOWEST_KEPT`` slowest trials (iteration, µs), slowest first (ties: the earlier first), and the
    first iteration's time. ``ordered``: the durations sorted, whose tail gives the slowest times, so one
    comparison finds their rows."""
    kept = min(SLOWEST_KEPT, len(durations))
    candidates = np.flatnonzero(durations >= ordered[-kept])
    slowest = candidates[np.argsort(-durations[candidates], kind="stable")[:kept]]
    return {
        "slowest": [{"iteration": int(iterations[i]), "duration_us": float(durations[i])} for i in slowest],
        "first": {"iteration": int(iterations[0]), "duration_us": float(durations[0])},
    }


def group_rates(group: dict, network: NetworkModel | None, ranks: int | None) -> dict:
    """algbw, busbw, ideal time and % of ideal of a group at its mean and (suffix ``_p50``) at its median.

    Computed from the size and the time when the rank count is known, else the file's own figures
    (nccl-tests, KAI). A spike moves the mean, not the median: both are given, each named.
    """
    collective = group["collective"]
    whole_bytes, group_size = _planned_shape(network, collective, group["size_bytes"], ranks)
    factor = _reported_bus_factor(group)
    rates = {}
    for suffix, time_key in (("", "mean_us"), ("_p50", "p50_us")):
        figures = _bandwidths(collective, whole_bytes, group[time_key], group_size)
        if figures["busbw_gbps"] is None and figures["algbw_gbps"] is not None and factor is not None:
            figures.update(
                busbw_gbps=figures["algbw_gbps"] * factor, bandwidth_source="computed, the file's bus factor"
            )
        elif figures["busbw_gbps"] is None and group.get("reported_busbw_gbps") is not None and suffix == "":
            figures = {
                "algbw_gbps": group.get("reported_algbw_gbps"),
                "busbw_gbps": group["reported_busbw_gbps"],
                "bandwidth_source": "reported",
            }
        figures.update(_ideal(collective, whole_bytes, group[time_key], group_size, network))
        if figures["pct_of_ideal"] is None and group.get("reported_pct_of_ideal") is not None and suffix == "":
            figures.update(pct_of_ideal=group["reported_pct_of_ideal"], ideal_source="reported")
        rates.update({f"{key}{suffix}": value for key, value in figures.items()})
    return rates


def _reported_bus_factor(group: dict) -> float | None:
    """busbw ÷ algbw as the file states them, for a group of several calls whose rank count the run lacks (an NCCL
    Inspector dump of communicators of several sizes): nccl-tests' algbw is the size ÷ the row's time and busbw that
    × the bus factor, so averaging each call's algbw and busbw would put figures beside the mean time that do not
    follow from it. Every call of a group shares one factor, so the ratio of their means is it. None for a group of
    one call (whose printed figures are kept as printed) or without both figures."""
    algbw, busbw = group.get("reported_algbw_gbps"), group.get("reported_busbw_gbps")
    if group.get("count", 0) < 2 or not algbw or busbw is None:
        return None
    return busbw / algbw


def _planned_shape(
    network: NetworkModel | None, collective: str, size_bytes: int | None, ranks: int | None
) -> tuple[int | None, int | None]:
    """(whole buffer bytes, ranks in the group) of a group, the plan filling in what the file leaves out.

    nccl-tests sizes are whole buffers; a file may state the per-rank piece (KCCB's all-gather and
    reduce-scatter size), which the plan's collective of that piece turns back into the whole buffer.
    """
    entry = network.planned(collective, size_bytes) if network and size_bytes is not None else None
    if entry is None:
        return size_bytes, ranks
    return entry.bytes_total, ranks or entry.group_size


def _bandwidths(collective: str, whole_bytes: int | None, mean_us: float, group_size: int | None) -> dict:
    empty = {"algbw_gbps": None, "busbw_gbps": None, "bandwidth_source": None}
    op = normalise_op_name(collective)
    if whole_bytes is None or mean_us <= 0:
        return empty
    mean_s = mean_us * 1e-6
    algbw = algorithm_bandwidth_gbps(whole_bytes, mean_s)
    if op is None or group_size is None:
        return {"algbw_gbps": algbw, "busbw_gbps": None, "bandwidth_source": "computed"}
    return {
        "algbw_gbps": algbw,
        "busbw_gbps": bus_bandwidth_gbps(op, whole_bytes, mean_s, group_size),
        "bandwidth_source": "computed",
    }


def _ideal(
    collective: str, whole_bytes: int | None, mean_us: float, group_size: int | None, network: NetworkModel | None
) -> dict:
    empty = {"ideal_time_us": None, "pct_of_ideal": None, "ideal_source": None}
    op = normalise_op_name(collective)
    if network is None or network.link_gbps is None or op is None or whole_bytes is None or group_size is None:
        return empty
    if mean_us <= 0:
        return empty
    ideal_us = ideal_time_s(op, whole_bytes, group_size, network.link_gbps, network.latency_us) * 1e6
    return {"ideal_time_us": ideal_us, "pct_of_ideal": ideal_us / mean_us * 100.0, "ideal_source": "plan"}


def collectives_in(summary: dict) -> list[str]:
    """The collectives of a summary's groups, in their order."""
    return list(dict.fromkeys(group["collective"] for group in summary["groups"]))


def has_bandwidth_chart(summary: dict) -> bool:
    """Bandwidth against data size says something from two sizes with a bandwidth on (per-iteration runs of
    several sizes; size sweeps have their own busbw-vs-size chart, ``FigureKind.SWEEP``)."""
    return len({g["size_bytes"] for g in summary["groups"] if g.get("algbw_gbps") is not None}) > 1


def strip_curves(summary: dict) -> dict:
    """The summary without its ECDF and delay arrays and per-rank lists: what the run row keeps for lists
    and statistics tables (the per-rank lists stay beside the curves)."""
    result = {k: v for k, v in summary.items() if k not in ("ecdf", "delay", "overall_ecdf")}
    if "flows" in result:
        result["flows"] = {k: v for k, v in result["flows"].items() if k != "ecdf"}
    if "stragglers" in result:
        result["stragglers"] = straggler_headline(result["stragglers"])
    return result


def non_finite_figure(document, path: str = "") -> str | None:
    """The path of the first NaN or infinite number in a summary ('groups[0].stats.mean_us'), else None.

    Inputs are bounded so that none arises; this is what guarantees it for every figure derived from
    them, before a run is stored (JSON has no infinity, so a stored one would fail every later read)."""
    if isinstance(document, float):
        return None if math.isfinite(document) else path
    if isinstance(document, dict):
        items = ((f"{path}.{key}" if path else str(key), value) for key, value in document.items())
    elif isinstance(document, list | tuple):
        if document and isinstance(document[0], float | int) and _all_finite_numbers(document):
            return None  # an ECDF grid or delay series: thousands of numbers, checked at once
        items = ((f"{path}[{index}]", value) for index, value in enumerate(document))
    else:
        return None
    for item_path, value in items:
        found = non_finite_figure(value, item_path)
        if found is not None:
            return found
    return None


def _all_finite_numbers(values: list | tuple) -> bool:
    """True when every item is a finite number; False for anything else (then checked item by item)."""
    try:
        return bool(np.isfinite(np.asarray(values, dtype=np.float64)).all())
    except (TypeError, ValueError):
        return False
