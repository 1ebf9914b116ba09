"""Several runs side by side: statistics with deltas against a baseline run, and a two-sample
Kolmogorov–Smirnov test for every pair of runs — all from the summaries cached at import.

Only like is compared with like: a run that shares no (collective, data size) with the baseline gets no
ratios, a pair of runs sharing none gets no KS test, and ``notice`` says so. Each delta says whether the
change is ``better`` or ``worse`` (``verdict``): higher is better for bandwidth and % of ideal, lower for
times and p99/p50; counts have no direction. algbw and busbw are the file's own cells where it printed them
(nccl-tests), as on the run page, so a page shows the log's 846.82, not our 846.809 from its rounded time;
each group carries the cells' printed text (``printed``).

The KS test compares the runs' overall completion-time distributions, and again per (collective, data
size, variant) group the two runs share. When both runs have at most
``CURVE_POINTS`` samples the cached ECDF grid holds every sample and ``scipy.stats.ks_2samp`` runs on
them exactly. For larger runs the statistic D = sup |F₁ − F₂| is taken over the union of both grids
(each ECDF is exact at its own grid points, so D is low by at most one grid step, ≈ 1/2000), and the
p-value is the asymptotic Kolmogorov distribution at D·√(n₁n₂/(n₁+n₂)) — the ``method`` field says which.
"""

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from emuplan.results.analysis import file_or_ours

DELTA_METRICS = (
    "count", "min_us", "mean_us", "std_us", "p50_us", "p90_us", "p95_us", "p99_us", "p99_9_us", "max_us",
    "p99_over_p50", "algbw_gbps", "busbw_gbps", "pct_of_ideal",
)  # fmt: skip

LOWER_IS_BETTER = frozenset(
    {"min_us", "mean_us", "std_us", "p50_us", "p90_us", "p95_us", "p99_us", "p99_9_us", "max_us", "p99_over_p50"}
)
HIGHER_IS_BETTER = frozenset({"algbw_gbps", "busbw_gbps", "pct_of_ideal"})
FILE_FIGURES = frozenset({"algbw_gbps", "busbw_gbps"})


@dataclass(frozen=True)
class RunSummary:
    """What a comparison needs of one run (the store hands these over; no database here)."""

    id: int
    name: str
    strategy: str | None
    origin: str
    summary: dict


def ks_two_sample(grid_a: dict, count_a: int, grid_b: dict, count_b: int) -> dict:
    # SciPy costs ~65 MB and ~1 s to import; only comparisons need it, so the server and the CLI load it here.
    from scipy import stats as scipy_stats

    x_a, x_b = np.asarray(grid_a["x"]), np.asarray(grid_b["x"])
    if len(x_a) == count_a and len(x_b) == count_b:
        result = scipy_stats.ks_2samp(x_a, x_b)
        return {"statistic": float(result.statistic), "pvalue": float(result.pvalue), "method": "exact"}
    p_a, p_b = np.asarray(grid_a["p"]), np.asarray(grid_b["p"])
    points = np.union1d(x_a, x_b)

    def ecdf_at(x: np.ndarray, p: np.ndarray) -> np.ndarray:
        index = np.searchsorted(x, points, side="right") - 1
        return np.where(index >= 0, p[np.clip(index, 0, None)], 0.0)

    statistic = float(np.max(np.abs(ecdf_at(x_a, p_a) - ecdf_at(x_b, p_b))))
    effective = count_a * count_b / (count_a + count_b)
    pvalue = float(scipy_stats.kstwobign.sf(statistic * np.sqrt(effective)))
    return {"statistic": statistic, "pvalue": pvalue, "method": "asymptotic from ECDF grids"}


def verdict(metric: str, value: float, reference: float) -> str | None:
    """'better', 'worse' or 'same' for this metric's direction; None for metrics without one (counts)."""
    if metric not in LOWER_IS_BETTER and metric not in HIGHER_IS_BETTER:
        return None
    if value == reference:
        return "same"
    return "better" if (value < reference) == (metric in LOWER_IS_BETTER) else "worse"


def _deltas(stats: dict, baseline: dict) -> dict:
    result = {}
    for metric in DELTA_METRICS:
        figure = file_or_ours if metric in FILE_FIGURES else dict.get
        value, reference = figure(stats, metric), figure(baseline, metric)
        if value is None or reference is None:
            result[metric] = {"value": value, "baseline": reference, "delta": None, "ratio": None, "verdict": None}
        else:
            result[metric] = {
                "value": value,
                "baseline": reference,
                "delta": value - reference,
                "ratio": value / reference if reference else None,
                "verdict": verdict(metric, value, reference),
            }
    return result


def sizes_of(summary: dict) -> set[tuple[str, int | None]]:
    """The (collective, data size) pairs a run has, variants aside."""
    return {(group["collective"], group["size_bytes"]) for group in summary["groups"]}


def _size_order(group: dict) -> tuple:
    size = group["size_bytes"]
    return (group["collective"], size is None, size or 0, group["variant"])


def compare_runs(runs: list[RunSummary], baseline_id: int | None = None) -> dict:
    """Statistics table with deltas against the baseline (first run by default) and KS tests per pair."""
    if not runs:
        raise ValueError("runs: choose at least one run to compare")
    ids = [run.id for run in runs]
    if baseline_id is None:
        baseline_id = ids[0]
    if baseline_id not in ids:
        raise ValueError(f"baseline: run {baseline_id} is not one of the compared runs {ids}")
    baseline = runs[ids.index(baseline_id)]
    baseline_groups = {group["label"]: group for group in baseline.summary["groups"]}
    baseline_sizes = sizes_of(baseline.summary)
    table, unrelated = [], []
    for run in runs:
        comparable = bool(sizes_of(run.summary) & baseline_sizes)
        if not comparable:
            unrelated.append(run)
        groups = [
            {
                "label": group["label"],
                "stats": _deltas(group, baseline_groups[group["label"]])
                if group["label"] in baseline_groups
                else _deltas(group, {}),
                "printed": group.get("printed"),
            }
            for group in sorted(run.summary["groups"], key=_size_order)
        ]
        table.append(
            {
                "run_id": run.id,
                "name": run.name,
                "strategy": run.strategy,
                "origin": run.origin,
                "comparable": comparable,
                # All groups together only mean something against a run measuring the same sizes.
                "overall": _deltas(run.summary["overall"], baseline.summary["overall"] if comparable else {}),
                "groups": groups,
            }
        )
    notice = None
    if unrelated:
        names = ", ".join(f"#{run.id} {run.name}" for run in unrelated)
        notice = (
            f"{names} share{'s' if len(unrelated) == 1 else ''} no (collective, data size) with the baseline "
            f"#{baseline.id} {baseline.name}: no ratios against it and no Kolmogorov–Smirnov test, which would "
            "compare unrelated collectives and sizes"
        )
    tests = []
    for first, second in combinations(runs, 2):
        if not sizes_of(first.summary) & sizes_of(second.summary):
            tests.append({"run_a": first.id, "run_b": second.id, "comparable": False, "statistic": None,
                          "pvalue": None, "method": None, "groups": []})  # fmt: skip
            continue
        overall = ks_two_sample(
            first.summary["overall_ecdf"],
            first.summary["overall"]["count"],
            second.summary["overall_ecdf"],
            second.summary["overall"]["count"],
        )
        # The same data size and collective in both runs: the sharper question.
        second_groups = {
            g["label"]: (grid, g["count"])
            for g, grid in zip(second.summary["groups"], second.summary["ecdf"], strict=True)
        }
        groups = [
            {"label": group["label"], **ks_two_sample(grid, group["count"], *second_groups[group["label"]])}
            for group, grid in zip(first.summary["groups"], first.summary["ecdf"], strict=True)
            if group["label"] in second_groups
        ]
        tests.append({"run_a": first.id, "run_b": second.id, "comparable": True, **overall, "groups": groups})
    return {"baseline_run_id": baseline_id, "notice": notice, "runs": table, "ks_tests": tests}
