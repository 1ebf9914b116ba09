"""Several runs side by side: statistics with deltas against a baseline run, a two-sample
Kolmogorov–Smirnov test for every pair of distributions, and size sweeps compared size by size — all from
the summaries cached at import.

Each run is read as its stored kind (``results.analysis.run_analysis.run_kind``). A size sweep has one value (or a few
repeats) per size: it gets no percentiles, no "all data sizes together" statistics and no KS test, which on
one value per size would say nothing ("D = 1.0, p = 1.0"). Sweeps are compared in ``sweep``: each one's
peak and average busbw, and per (collective, data size) its busbw ÷ the reference sweep's (the baseline
when it is a sweep, else the first sweep) with a one-line ``verdict``. A change within ±``SAME_WITHIN_PCT``
is "same".

Training against emulation: an observed run's groups (``results.formats.observed``) are per (collective, size,
communicator), its variants name communicators, a benchmark's (nccl-tests, KCCB, ours) its buffer placement or
nothing. Between an observed run and a benchmark a group is therefore compared with the other run's group of the
same (collective, size) (``counterparts``: its out-of-place or only timing, else its first variant), each row
says which group it was read against (``compared_with``) and ``training_vs_emulation`` says which run is which.

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

from emuplan.results.analysis.run_analysis import CELL_HALF_UNIT_GBPS, RunKind, file_or_ours
from emuplan.results.analysis.step_cost import PREFERRED_VARIANTS

DELTA_METRICS = (
    "count", "min_us", "mean_us", "std_us", "p50_us", "p90_us", "p95_us", "p99_us", "p99_9_us", "max_us",
    "p99_over_p50", "algbw_gbps", "busbw_gbps", "pct_of_expected", "pct_of_ideal",
)  # fmt: skip

LOWER_IS_BETTER = frozenset(
    {"min_us", "mean_us", "std_us", "p50_us", "p90_us", "p95_us", "p99_us", "p99_9_us", "max_us", "p99_over_p50"}
)
HIGHER_IS_BETTER = frozenset({"algbw_gbps", "busbw_gbps", "pct_of_expected", "pct_of_ideal"})
FILE_FIGURES = frozenset({"algbw_gbps", "busbw_gbps"})


# The same size of one fabric moves by a few percent from one timing to the next: in the B200 nccl-tests log
# (fixtures), the out-of-place and in-place times of a size ≥ 1 MiB, measured seconds apart, differ by up to
# 4.6 % (8 MiB). A busbw change within ±5 % is that noise, not a change of the fabric.
SAME_WITHIN_PCT = 5.0
# What a sweep's group keeps in the per-size table: one value (or a few) has no spread and no percentiles.
SWEEP_METRICS = ("count", "mean_us", "algbw_gbps", "busbw_gbps", "pct_of_expected", "pct_of_ideal")


@dataclass(frozen=True)
class RunSummary:
    """What a comparison needs of one run (the store hands these over; no database here): ``kind`` is the
    run's stored ``run_kind``; ``sweep`` its ``analysis.size_sweep`` view (size sweeps: peak and average)."""

    id: int
    name: str
    strategy: str | None
    origin: str
    summary: dict
    kind: RunKind
    sweep: dict | None = None


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


def _deltas(stats: dict, baseline: dict, metrics: tuple[str, ...] = DELTA_METRICS) -> dict:
    result = {}
    for metric in metrics:
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


OBSERVED = "observed"


def side_of(origin: str) -> str:
    """'training' for a run observed in a training job, 'emulation' for a benchmark (KCCB, nccl-tests, ours)."""
    return "training" if origin == OBSERVED else "emulation"


def _variant_order(group: dict) -> tuple:
    variant = group["variant"]
    return (
        variant not in PREFERRED_VARIANTS,
        PREFERRED_VARIANTS.index(variant) if variant in PREFERRED_VARIANTS else 0,
        variant,
    )


def counterparts(run: RunSummary, other: RunSummary) -> dict[str, dict]:
    """Per group label of ``run``, the group of ``other`` it is compared with: the same label; between training
    and emulation (see the module's docstring) the same (collective, size) in ``other``'s preferred variant."""
    by_label = {group["label"]: group for group in other.summary["groups"]}
    if side_of(run.origin) == side_of(other.origin):
        return {g["label"]: by_label[g["label"]] for g in run.summary["groups"] if g["label"] in by_label}
    by_size: dict[tuple, dict] = {}
    for group in sorted(other.summary["groups"], key=_variant_order):
        by_size.setdefault((group["collective"], group["size_bytes"]), group)
    return {
        g["label"]: by_label.get(g["label"]) or by_size[(g["collective"], g["size_bytes"])]
        for g in run.summary["groups"]
        if g["label"] in by_label or (g["collective"], g["size_bytes"]) in by_size
    }


def training_vs_emulation(runs: list[RunSummary]) -> str | None:
    """Which runs are training and which emulation, when both are compared; None otherwise."""
    training = [run for run in runs if run.origin == OBSERVED]
    emulation = [run for run in runs if run.origin != OBSERVED]
    if not training or not emulation:
        return None

    def named(group: list[RunSummary]) -> str:
        return ", ".join(f"#{run.id} {run.name}" for run in group)

    return (
        f"Training vs emulation. Training: {named(training)} (observed: the job's own records). Emulation: "
        f"{named(emulation)} ({'a benchmark' if len(emulation) == 1 else 'benchmarks'}). Per size, each training "
        "communicator is read against the benchmark's same collective and size; per step, the job's own calls × "
        "their times against the plan's step on the benchmark"
    )


def _size_order(group: dict) -> tuple:
    size = group["size_bytes"]
    return (group["collective"], size is None, size or 0, group["variant"])


def compare_runs(runs: list[RunSummary], baseline_id: int | None = None) -> dict:
    """Statistics table with deltas against the baseline (first run by default), KS tests per pair of
    distributions, and the size sweeps' per-size comparison (``sweep``, None without sweeps)."""
    if not runs:
        raise ValueError("runs: choose at least one run to compare")
    ids = [run.id for run in runs]
    if baseline_id is None:
        baseline_id = ids[0]
    if baseline_id not in ids:
        raise ValueError(f"baseline: run {baseline_id} is not one of the compared runs {ids}")
    baseline = runs[ids.index(baseline_id)]
    baseline_sizes = sizes_of(baseline.summary)
    table, unrelated = [], []
    for run in runs:
        comparable = bool(sizes_of(run.summary) & baseline_sizes)
        if not comparable:
            unrelated.append(run)
        # A sweep's one value per size has no spread: only its time, rates and count, on either side.
        metrics = SWEEP_METRICS if "size-sweep" in (run.kind, baseline.kind) else DELTA_METRICS
        matched = counterparts(run, baseline)
        groups = [
            {
                "label": group["label"],
                "compared_with": matched[group["label"]]["label"] if group["label"] in matched else None,
                "stats": _deltas(group, matched.get(group["label"], {}), metrics),
                "printed": group.get("printed"),
            }
            for group in sorted(run.summary["groups"], key=_size_order)
        ]
        # All groups together only mean something for a distribution against one measuring the same sizes.
        both_distributions = run.kind == baseline.kind == "distribution"
        overall = (
            _deltas(run.summary["overall"], baseline.summary["overall"] if comparable and both_distributions else {})
            if run.kind == "distribution"
            else None
        )
        table.append(
            {
                "run_id": run.id,
                "name": run.name,
                "strategy": run.strategy,
                "origin": run.origin,
                "side": side_of(run.origin),
                "kind": run.kind,
                "comparable": comparable,
                "overall": overall,
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
    distributions = [run for run in runs if run.kind == "distribution"]
    tests = [_ks_tests(first, second) for first, second in combinations(distributions, 2)]
    sweeps = [run for run in runs if run.kind == "size-sweep"]
    return {
        "baseline_run_id": baseline_id,
        "notice": notice,
        "training_vs_emulation": training_vs_emulation(runs),
        "runs": table,
        "ks_tests": tests,
        "sweep": _sweep_comparison(sweeps, baseline) if sweeps else None,
    }


def _ks_tests(first: RunSummary, second: RunSummary) -> dict:
    """Two distributions: all samples, then every (collective, size, variant) both have."""
    if not sizes_of(first.summary) & sizes_of(second.summary):
        return {"run_a": first.id, "run_b": second.id, "comparable": False, "statistic": None, "pvalue": None,
                "method": None, "groups": []}  # fmt: skip
    overall = ks_two_sample(
        first.summary["overall_ecdf"],
        first.summary["overall"]["count"],
        second.summary["overall_ecdf"],
        second.summary["overall"]["count"],
    )
    # The same data size and collective in both runs: the sharper question.
    second_grids = {g["label"]: grid for g, grid in zip(second.summary["groups"], second.summary["ecdf"], strict=True)}
    matched = counterparts(first, second)
    groups = []
    for group, grid in zip(first.summary["groups"], first.summary["ecdf"], strict=True):
        other = matched.get(group["label"])
        if other is not None:
            test = ks_two_sample(grid, group["count"], second_grids[other["label"]], other["count"])
            groups.append({"label": group["label"], "compared_with": other["label"], **test})
    return {"run_a": first.id, "run_b": second.id, "comparable": True, **overall, "groups": groups}


def _per_size(run: RunSummary) -> dict[tuple[str, int], dict[str, list[dict]]]:
    """A sweep's groups by (collective, size), then by variant."""
    sizes: dict[tuple[str, int], dict[str, list[dict]]] = {}
    for group in run.summary["groups"]:
        sizes.setdefault((group["collective"], group["size_bytes"]), {})[group["variant"]] = group
    return dict(sorted(sizes.items(), key=lambda item: (item[0][0], item[0][1])))


def _mean(values: list[float | None]) -> float | None:
    return sum(values) / len(values) if values and None not in values else None


def _sweep_comparison(sweeps: list[RunSummary], baseline: RunSummary) -> dict:
    """Each sweep's headline (peak and average busbw), its sizes with busbw and algbw (as the file printed
    them, else ours) and, against the reference sweep, the busbw ratio per (collective, size) and a verdict.

    The ratio is of our busbw where the rank count is known (size ÷ mean time × the collective's factor:
    the times are printed to 0.01 µs, the busbw cells to 0.01 GB/s, too coarse under 1 GB/s), else of the
    file's cells; with out-of-place and in-place, of their mean over the variants both runs have."""
    reference = baseline if baseline.kind == "size-sweep" else sweeps[0]
    reference_sizes = _per_size(reference)
    entries = []
    for run in sweeps:
        rows = []
        for key, variants in _per_size(run).items():
            collective, size_bytes = key
            theirs_by_variant = reference_sizes.get(key, {}) if run is not reference else {}
            if side_of(run.origin) == side_of(reference.origin):
                mine = shared = [v for v in variants if v in theirs_by_variant]
            else:  # communicators against buffer placements: each side's mean over its own
                mine, shared = (list(variants), list(theirs_by_variant)) if theirs_by_variant else ([], [])
            ours = _mean([variants[v].get("busbw_gbps") for v in mine])
            theirs = _mean([theirs_by_variant[v].get("busbw_gbps") for v in shared])
            ratio = ours / theirs if ours is not None and theirs else None
            change = (ratio - 1) * 100 if ratio is not None else None
            # Both sweeps under nccl-tests' print resolution here (each cell 0.00 GB/s): a ratio of two readings
            # of the floor (+1,856.8 % at 32 KiB) is no finding, so the size is left out of the verdict.
            cells = [file_or_ours(g, "busbw_gbps") for g in (*variants.values(), *theirs_by_variant.values())]
            below_floor = bool(theirs_by_variant) and all(c is not None and c < CELL_HALF_UNIT_GBPS for c in cells)
            rows.append(
                {
                    "collective": collective,
                    "size_bytes": size_bytes,
                    "time_us": _mean([g["mean_us"] for g in variants.values()]),
                    "algbw_gbps": _mean([file_or_ours(g, "algbw_gbps") for g in variants.values()]),
                    "busbw_gbps": _mean([file_or_ours(g, "busbw_gbps") for g in variants.values()]),
                    "busbw_ratio": ratio,
                    "change_pct": change,
                    "below_floor": below_floor,
                    "verdict": None if change is None or below_floor else _change_verdict(change),
                }
            )
        headline = [
            {key: value for key, value in entry.items() if key != "tables"}
            for entry in (run.sweep or {"collectives": []})["collectives"]
        ]
        entries.append(
            {
                "run_id": run.id,
                "name": run.name,
                "headline": headline,
                "sizes": rows,
                "verdict": None if run is reference else sweep_verdict(run, reference, rows),
            }
        )
    return {
        "reference_run_id": reference.id,
        "same_within_pct": SAME_WITHIN_PCT,
        "ratio_basis": (
            "busbw ÷ the reference's at the same collective and data size (ours from the mean time where the rank "
            "count is known, else the file's cells; out-of-place and in-place averaged; a training run's "
            "communicators averaged against the benchmark's variants)"
        ),
        "runs": entries,
    }


def _change_verdict(change_pct: float) -> str:
    if abs(change_pct) <= SAME_WITHIN_PCT:
        return "same"
    return "better" if change_pct > 0 else "worse"


def size_text(size_bytes: int) -> str:
    """A data size in binary units as nccl-tests users say them: 8 B, 512 MiB, 2 GiB, 948 KiB."""
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if size_bytes >= 1 << shift:
            value = size_bytes / (1 << shift)
            return f"{value:g} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{size_bytes} B"


def _percent(change: float) -> str:
    return f"{'−' if change < 0 else '+'}{abs(change):.1f} %"


def sweep_verdict(run: RunSummary, reference: RunSummary, rows: list[dict]) -> str:
    """One line: "#7 vs #4: −20.0 % busbw at 3 sizes (512 MiB–2 GiB), same (within ±5 %) at 26 sizes (8 B–256 MiB)".
    Worse sizes first, then better, then the same; a bucket's change as one figure when its sizes agree to
    0.1 %, else its range; per collective when the runs share several."""
    judged = [row for row in rows if row["verdict"] is not None]
    floor = sorted(row["size_bytes"] for row in rows if row["below_floor"])
    left_out = f"; {_sizes_text(floor)} left out: busbw 0.00 GB/s in both, under the log's resolution" if floor else ""
    if not judged:
        return f"#{run.id} vs #{reference.id}: no (collective, data size) with busbw in common{left_out}"
    collectives = list(dict.fromkeys(row["collective"] for row in judged))
    parts = []
    for collective in collectives:
        mine = [row for row in judged if row["collective"] == collective]
        buckets = []
        for judgement in ("worse", "better", "same"):
            members = [row for row in mine if row["verdict"] == judgement]
            if not members:
                continue
            count = _sizes_text(sorted(row["size_bytes"] for row in members))
            if judgement == "same":
                buckets.append(f"same (within ±{SAME_WITHIN_PCT:g} %) at {count}")
                continue
            changes = sorted((row["change_pct"] for row in members), key=abs)
            low, high = _percent(changes[0]), _percent(changes[-1])
            buckets.append(f"{low if low == high else f'{low} to {high}'} busbw at {count}")
        parts.append(("" if len(collectives) == 1 else f"{collective} ") + ", ".join(buckets))
    return f"#{run.id} vs #{reference.id}: " + "; ".join(parts) + left_out


def _sizes_text(sizes: list[int]) -> str:
    """'3 sizes (512 MiB–2 GiB)', '1 size (8 B)': how many and their range, of sorted sizes."""
    where = size_text(sizes[0]) if len(sizes) == 1 else f"{size_text(sizes[0])}–{size_text(sizes[-1])}"
    return f"{len(sizes)} size{'s' if len(sizes) > 1 else ''} ({where})"
