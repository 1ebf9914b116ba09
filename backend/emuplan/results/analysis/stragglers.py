"""Stragglers: which rank and which host hold a collective up, and by how much, from per-rank times.

Input is a per-rank times table (``canonical.RANK_TIMES_SCHEMA``): every rank's time for every call (one
sample: one iteration of one (collective, size, variant)). Per call, the *median rank* is the median of the ranks'
times. Per rank, over all the calls it took part in:

- ``mean_us`` / ``max_us``: its typical and worst time for a call;
- ``over_median``: its summed time ÷ the median rank's summed time over the same calls ("× the median
  rank"; 1 for a typical rank; sums weight each call by its length, so large sizes count most);
- ``lost_us``: its summed time − the median rank's (the time the slowest rank costs beyond a typical one:
  a collective ends only when its last rank does); negative for ranks faster than the median;
- ``slowest_calls``: in how many calls it was the slowest rank;
- ``median_mean_us``: the median rank's mean time over those same calls.

A host's time for a call is that of its slowest rank (a host is done when its last rank is); hosts get the
same figures against the median host. The slowest rank (host) is the one with the largest ``over_median``.
"""

import warnings

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from emuplan.results.canonical import rank_times_table, text_column

# Why a rank's row is what it is, for the three sources of per-rank times.
FLOW_BASIS = (
    "from the iteration's first flow start to the end of the last flow it receives (a rank is done when all "
    "its data has arrived)"
)


def rank_times_from_flows(flows: pa.Table) -> pa.Table | None:
    """Per (iteration, receiving endpoint): the end of its last incoming flow − the iteration's first start
    (its longest incoming flow when the flows have no start times); the iteration's sample is its place
    among the iterations (``tabular.iterations_from_flows`` makes one sample per iteration, in order).
    None with fewer than two endpoints.

    Millions of flows: the iterations and endpoints become integer codes (hashing, no sort), each
    iteration's first start a ``fmin.at``, and the last byte per (iteration, endpoint) one group-by on a
    single integer key."""
    dst = text_column(flows["dst"], flows.num_rows)
    if flows.num_rows == 0 or len(pc.unique(dst.indices)) < 2:
        return None
    iterations = pc.dictionary_encode(flows["iteration"].combine_chunks())
    iteration_code = iterations.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    # Codes follow first appearance; samples follow the iterations' order.
    sample_of_code = np.argsort(np.argsort(iterations.dictionary.to_numpy()))
    start = flows["start_us"].to_numpy(zero_copy_only=False).astype(np.float64)
    finish = flows["fct_us"].to_numpy().astype(np.float64)
    if not np.isnan(start).all():
        first_start = np.full(len(iterations.dictionary), np.nan)
        np.fmin.at(first_start, iteration_code, start)
        finish = start + finish - first_start[iteration_code]
    endpoints = len(dst.dictionary)
    last = (
        pa.table({"cell": iteration_code * endpoints + dst.indices.to_numpy(zero_copy_only=False),
                  "finish_us": pa.array(finish, from_pandas=True)})
        .group_by("cell")
        .aggregate([("finish_us", "max")])
    )  # fmt: skip
    cell = last["cell"].to_numpy()
    return rank_times_table(
        duration_us=last["finish_us_max"].to_numpy(zero_copy_only=False),
        sample=sample_of_code[cell // endpoints],
        rank=pa.DictionaryArray.from_arrays(pa.array((cell % endpoints).astype(np.int32)), dst.dictionary),
        host="",
    )


MEASURED_BASIS = (
    "from the first rank entering the call to this rank leaving it, on rank 0's clock (the call's completion "
    "time is the largest of these)"
)


def rank_times_from_timestamps(start_ns: np.ndarray, end_ns: np.ndarray, hosts: list[str]) -> pa.Table:
    """Our own measurements: per rank and call, its end − the first rank's start (µs). Timestamps are shaped
    (ranks, iterations, calls); the call's sample is its row in the per-iteration CSV (iteration × calls +
    call, ``measure.timings.per_iteration_csv``)."""
    ranks, iterations, calls = start_ns.shape
    finish_us = (end_ns - start_ns.min(axis=0)) / 1000.0
    rows = iterations * calls
    return rank_times_table(
        duration_us=finish_us.reshape(ranks * rows),
        sample=np.tile(np.arange(rows, dtype=np.int64), ranks),
        rank=pa.DictionaryArray.from_arrays(np.repeat(np.arange(ranks, dtype=np.int32), rows),
                                            pa.array([str(rank) for rank in range(ranks)])),
        host=pa.DictionaryArray.from_arrays(np.repeat(np.arange(ranks, dtype=np.int32), rows), pa.array(hosts)),
    )  # fmt: skip


def natural_key(name: str) -> tuple:
    """'2' before '10'; names that are not numbers after the numbers, alphabetically."""
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def column_sums(times: np.ndarray) -> dict[str, np.ndarray]:
    """What the figures of every column (rank or host) of a calls × columns matrix (NaN: not in that call)
    add up from, call by call: sums over calls, so that the calls may come a block at a time
    (``results.streaming.streamed``); ``max_us`` is a maximum."""
    present = ~np.isnan(times)
    # A block of calls may miss a rank altogether (NaN sums, maxima), which the next block fills in.
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(times, axis=1)
        return {
            "total": np.nansum(times, axis=0),
            "median_total": np.where(present, median[:, None], 0.0).sum(axis=0),
            "calls": present.sum(axis=0),
            "slowest_calls": np.bincount(np.nanargmax(times, axis=1), minlength=times.shape[1]),
            "max_us": np.nanmax(times, axis=0),
        }


def add_column_sums(sums: dict[str, np.ndarray], more: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``column_sums`` of two blocks of calls together."""
    return {key: np.fmax(value, more[key]) if key == "max_us" else value + more[key] for key, value in sums.items()}


def _per_column(sums: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    total, median_total, calls = sums["total"], sums["median_total"], sums["calls"]
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "calls": calls,
            "mean_us": total / calls,
            "max_us": sums["max_us"],
            "over_median": np.where(median_total > 0, total / median_total, np.nan),
            "lost_us": total - median_total,
            "slowest_calls": sums["slowest_calls"],
            "median_mean_us": median_total / calls,
        }


def column_entries(sums: dict[str, np.ndarray], names: list[str], extra: list[dict]) -> tuple[list[dict], int]:
    """One entry per column, in the order given, and the index of the slowest (largest × median)."""
    figures = _per_column(sums)
    entries = []
    for index, name in enumerate(names):
        over = figures["over_median"][index]
        entries.append(
            {
                "name": name,
                **extra[index],
                "calls": int(figures["calls"][index]),
                "mean_us": float(figures["mean_us"][index]),
                "max_us": float(figures["max_us"][index]),
                "over_median": None if np.isnan(over) else float(over),
                "lost_us": float(figures["lost_us"][index]),
                "slowest_calls": int(figures["slowest_calls"][index]),
                "median_mean_us": float(figures["median_mean_us"][index]),
            }
        )
    ranked = np.where(np.isnan(figures["over_median"]), -np.inf, figures["over_median"])
    return entries, int(np.argmax(ranked))


def rank_headline(entries: list[dict], slowest: int) -> dict | None:
    if len(entries) < 2 or entries[slowest]["over_median"] is None:
        return None
    entry = entries[slowest]
    return {
        "name": entry["name"],
        **({"host": entry["host"]} if "host" in entry else {}),
        "over_median": entry["over_median"],
        "lost_us": entry["lost_us"],
        "lost_per_call_us": entry["lost_us"] / entry["calls"],
        "calls": entry["calls"],
        "mean_us": entry["mean_us"],
        "median_mean_us": entry["median_mean_us"],
    }


def summarise_stragglers(rank_times: pa.Table | None, *, unit: str = "rank", basis: str = "") -> dict | None:
    """Per-rank and per-host figures (module docstring) and the slowest of each; None without two ranks."""
    if rank_times is None or rank_times.num_rows == 0:
        return None
    rows = rank_times.num_rows
    rank_column = text_column(rank_times["rank"], rows)
    rank_codes = rank_column.indices.to_numpy(zero_copy_only=False)
    used, first_row = np.unique(rank_codes, return_index=True)
    if len(used) < 2:
        return None
    names = [rank_column.dictionary[int(code)].as_py() for code in used]
    order = sorted(range(len(names)), key=lambda i: natural_key(names[i]))
    position = np.empty(int(used.max()) + 1, dtype=np.int64)
    position[used[order]] = np.arange(len(order))
    columns = position[rank_codes]
    names = [names[i] for i in order]
    first_row = first_row[order]

    _, calls = np.unique(rank_times["sample"].to_numpy(), return_inverse=True)
    times = np.full((int(calls.max()) + 1, len(names)), np.nan)
    np.fmax.at(times, (calls, columns), rank_times["duration_us"].to_numpy())

    hosts_of_rows = rank_times["host"].combine_chunks().cast(pa.string()).to_pylist()
    rank_hosts = [hosts_of_rows[row] for row in first_row]
    ranks, slowest_rank = column_entries(column_sums(times), names, [{"host": host} for host in rank_hosts])
    result = {
        "unit": unit,
        "basis": basis,
        "calls": int(times.shape[0]),
        "ranks": ranks,
        "slowest_rank": rank_headline(ranks, slowest_rank),
        "hosts": [],
        "slowest_host": None,
    }
    host_names = sorted({host for host in rank_hosts if host}, key=natural_key)
    if host_names:
        members = [[i for i, host in enumerate(rank_hosts) if host == name] for name in host_names]
        host_times = np.stack([np.fmax.reduce(times[:, columns], axis=1) for columns in members], axis=1)
        extra = [{"ranks": [names[i] for i in columns]} for columns in members]
        hosts, slowest_host = column_entries(column_sums(host_times), host_names, extra)
        result["hosts"] = hosts
        result["slowest_host"] = rank_headline(hosts, slowest_host)
    return result


def straggler_headline(stragglers: dict | None) -> dict | None:
    """What the run row keeps (lists and the run list stay small): everything but the per-rank lists."""
    if stragglers is None:
        return None
    return {key: value for key, value in stragglers.items() if key not in ("ranks", "hosts")} | {
        "rank_count": len(stragglers["ranks"]),
        "host_count": len(stragglers["hosts"]),
    }
