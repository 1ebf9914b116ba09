"""Statistics, ECDF grid and delay series: exact values on known inputs."""

import numpy as np
import pytest
from scipy import stats as scipy_stats

from emuplan.results import NetworkModel, parse_result_file, summarise
from emuplan.results.analysis.compare import RunSummary, compare_runs, ks_two_sample
from emuplan.results.analysis.run_analysis import run_kind
from emuplan.results.analysis.stats import delay_series, describe, ecdf_grid, non_finite_figure
from emuplan.results.canonical import samples_table
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.document import ParallelDim, Phase, PlannedCollective
from paths import SHARED_NCCL


def planned_collective(op: str, bytes_total: int, bytes_per_rank: int, group_size: int) -> PlannedCollective:
    return PlannedCollective(
        op=CollectiveOp(op),
        bytes_total=bytes_total,
        bytes_per_rank=bytes_per_rank,
        dtype="float32",
        group_size=group_size,
        count_per_step=1,
        phase=Phase.BACKWARD,
        parallel_dim=ParallelDim.DP,
        label=f"{op} {bytes_total}",
    )


def test_describe_uses_nearest_rank_percentiles():
    stats = describe(np.arange(1.0, 101.0))
    assert stats == {
        "count": 100,
        "min_us": 1.0,
        "mean_us": 50.5,
        "std_us": pytest.approx(29.011491975882016, rel=1e-15),
        "p50_us": 50.0,
        "p90_us": 90.0,
        "p95_us": 95.0,
        "p99_us": 99.0,
        "p99_9_us": 100.0,
        "max_us": 100.0,
        "p99_over_p50": 99.0 / 50.0,
    }


def test_ecdf_grid_keeps_min_max_and_exact_tail_percentiles():
    values = np.sort(np.random.default_rng(1).lognormal(3.0, 1.0, 1_000_000))
    grid = ecdf_grid(values)
    assert 2000 <= len(grid["x"]) <= 2007
    assert grid["x"][0] == round(values[0], 3) and grid["x"][-1] == round(values[-1], 3)
    assert grid["p"][-1] == 1.0
    for rank in (499_999, 899_999, 949_999, 989_999, 998_999):  # p50, p90, p95, p99, p99.9 (nearest rank)
        assert round(values[rank], 3) in grid["x"]
        assert grid["p"][grid["x"].index(round(values[rank], 3))] == round((rank + 1) / 1_000_000, 7)


def test_delay_series_never_drops_a_spike():
    rng = np.random.default_rng(2)
    durations = rng.normal(14000.0, 300.0, 500_000)
    durations[123_457] = 5_000_000.0
    durations[400_001] = 1.0
    series = delay_series(np.arange(500_000), durations)
    assert len(series["x"]) <= 2000
    assert 123_457 in series["x"] and 5_000_000.0 in series["y"]
    assert 400_001 in series["x"] and 1.0 in series["y"]


def planted_spikes(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A lognormal body of ``count`` trials with spikes planted in pairs one iteration apart (the smaller
    second, so that a bucket's maximum alone keeps only the first) and near the ends."""
    rng = np.random.default_rng(seed)
    durations = rng.lognormal(3.0, 0.1, count).round(3)
    for start in range(1_000, count - 2, count // 25):
        durations[start : start + 2] = [900.0 + start % 97, 500.0 + start % 89]
    durations[[0, count - 1]] = [700.0, 650.0]
    return np.arange(count), durations


def trials_above_p999(iterations: np.ndarray, durations: np.ndarray) -> set[tuple[int, float]]:
    p999 = describe(np.sort(durations))["p99_9_us"]
    return {(int(i), float(d)) for i, d in zip(iterations, durations, strict=True) if d > p999}


@pytest.mark.parametrize(("count", "above_p999"), [(200_000, 199), (2_000_000, 1_999)])
def test_every_trial_above_p999_is_in_the_delay_series_at_its_iteration(count: int, above_p999: int):
    # A trial tied with p99.9 is not above it (durations in ns). 2,000,000 trials: 1,999 above p99.9 (the body's
    # 1,947 and the planted 52), more than the 500 points a series gives them: the slowest 500 are kept, the
    # planted spikes among them.
    iterations, durations = planted_spikes(count, seed=3)
    summary = summarise(samples_table(duration_us=durations, iteration=iterations, collective="all_reduce",
                                      size_bytes=np.full(count, 1 << 20)))  # fmt: skip
    series = summary["delay"][0]
    drawn = set(zip(series["x"], series["y"], strict=True))
    above = trials_above_p999(iterations, durations)
    assert len(above) == above_p999
    assert len(series["x"]) <= 2000 and series["x"] == sorted(series["x"])
    if count == 200_000:
        assert above <= drawn
    else:
        slowest = sorted(above, key=lambda trial: trial[1])[-500:]
        assert set(slowest) <= drawn and min(d for _, d in slowest) < 500.0
    planted = {(int(i), float(durations[i])) for i in np.flatnonzero(durations >= 500.0)}
    assert len(planted) == 52 and planted <= drawn
    # Each of the buckets the iterations are cut into keeps its fastest trial too.
    assert min(series["y"]) == durations.min()


def test_a_thinned_series_keeps_the_trials_above_the_floor_it_is_given():
    iterations, durations = planted_spikes(200_000, seed=4)
    stored = delay_series(iterations, durations)
    thinned = delay_series(np.asarray(stored["x"]), np.asarray(stored["y"]), 250, spike_floor=499.0)
    assert len(thinned["x"]) <= 250
    drawn = set(zip(thinned["x"], thinned["y"], strict=True))
    assert {(int(i), float(durations[i])) for i in np.flatnonzero(durations > 499.0)} <= drawn


def test_summary_groups_bandwidth_and_percent_of_ideal():
    durations = np.array([200.0, 300.0, 250.0, 1000.0, 1100.0])
    samples = samples_table(
        duration_us=durations,
        iteration=np.array([0, 1, 2, 0, 1]),
        collective="all_reduce",
        size_bytes=np.array([971048, 971048, 971048, 4194304, 4194304]),
    )
    network = NetworkModel(
        link_gbps=100.0,
        latency_us=5.0,
        collectives=[planned_collective("all_reduce", 971048, 971048, 4)],
    )
    summary = summarise(samples, network=network)
    small, large = summary["groups"]
    assert (small["label"], small["count"], small["mean_us"]) == ("all_reduce · 971048 B", 3, 250.0)
    assert small["algbw_gbps"] == pytest.approx(971048 / 250e-6 / 1e9, rel=1e-12)
    assert small["busbw_gbps"] == pytest.approx(971048 / 250e-6 / 1e9 * 1.5, rel=1e-12)  # 2(n−1)/n at n = 4
    # α-β ring: 2(n−1)α + 2(n−1)/n · S/B = 30 µs + 1.5 × 77.68384 µs
    assert small["ideal_time_us"] == pytest.approx(146.52576, rel=1e-12)
    assert small["pct_of_ideal"] == pytest.approx(146.52576 / 250.0 * 100, rel=1e-12)
    # The 4 MiB size is not in the plan and the file has no rank count: no ideal, no busbw.
    assert (large["busbw_gbps"], large["ideal_time_us"]) == (None, None)
    assert summary["delay"][0] == {"x": [0, 1, 2], "y": [200.0, 300.0, 250.0]}
    assert summary["ecdf"][1] == {"x": [1000.0, 1100.0], "p": [0.5, 1.0]}
    assert summary["overall"]["count"] == 5


def test_a_per_rank_all_gather_size_gets_the_whole_buffer_bandwidth_and_ideal_like_nccl_tests():
    # KCCB states the seed's tensor-parallel all-gather as its per-rank piece (6438912 B of 25755648 B).
    samples = samples_table(
        duration_us=np.array([2000.0, 2200.0]),
        iteration=np.array([0, 1]),
        collective="all_gather",
        size_bytes=np.array([6438912, 6438912]),
    )
    network = NetworkModel(
        link_gbps=100.0,
        latency_us=5.0,
        collectives=[planned_collective("all_gather", 25755648, 6438912, 4)],
    )
    [group] = summarise(samples, network=network)["groups"]
    assert group["label"] == "all_gather · 6438912 B"  # as the file states it
    assert group["algbw_gbps"] == pytest.approx(25755648 / 2100e-6 / 1e9, rel=1e-12)
    assert group["busbw_gbps"] == pytest.approx(25755648 / 2100e-6 / 1e9 * 0.75, rel=1e-12)  # (n−1)/n at n = 4
    # (n−1)α + (n−1)/n · S/B = 15 µs + 0.75 × 2060.45184 µs
    assert group["ideal_time_us"] == pytest.approx(1560.33888, rel=1e-12)


def test_nccl_tests_summary_recomputes_busbw_from_ranks_and_reports_it_otherwise():
    a100 = parse_result_file((SHARED_NCCL / "a100-16rank-allreduce-2.17.txt").read_bytes(), "allreduce.txt")
    group = summarise(a100.samples, ranks=a100.ranks)["groups"][0]
    assert group["bandwidth_source"] == "computed"
    assert round(group["busbw_gbps"], 2) == 222.88  # what nccl-tests printed
    b200 = parse_result_file((SHARED_NCCL / "b200-allreduce-2.17.6.txt").read_bytes(), "b200.txt")
    group = summarise(b200.samples, ranks=None)["groups"][-1]
    assert (group["bandwidth_source"], group["algbw_gbps"], group["busbw_gbps"]) == ("reported", 374.88, 702.91)


def test_ranks_of_a_log_without_rank_lines_come_from_its_busbw_over_algbw_factor():
    b200 = parse_result_file((SHARED_NCCL / "b200-allreduce-2.17.6.txt").read_bytes(), "b200.txt")
    assert b200.ranks == 16  # 702.91 / 374.88 = 1.875 = 2(n−1)/n
    assert b200.warnings[-1] == "b200.txt: no rank lines; 16 ranks inferred from the busbw/algbw factor"
    group = summarise(b200.samples, ranks=b200.ranks)["groups"][-1]
    assert (group["bandwidth_source"], round(group["busbw_gbps"], 2)) == ("computed", 702.91)


def test_ks_from_ecdf_grids_is_within_one_grid_step_of_scipy_on_all_samples():
    rng = np.random.default_rng(3)
    a = np.sort(rng.lognormal(3.0, 0.5, 300_000))
    b = np.sort(rng.lognormal(3.02, 0.5, 200_000))
    exact = scipy_stats.ks_2samp(a, b)
    result = ks_two_sample(ecdf_grid(a), len(a), ecdf_grid(b), len(b))
    assert result["method"] == "asymptotic from ECDF grids"
    assert abs(result["statistic"] - exact.statistic) <= 1 / 2000
    small = ks_two_sample(ecdf_grid(a[:500]), 500, ecdf_grid(b[:400]), 400)
    assert small == {
        "statistic": pytest.approx(scipy_stats.ks_2samp(a[:500].round(3), b[:400].round(3)).statistic, abs=0),
        "pvalue": pytest.approx(scipy_stats.ks_2samp(a[:500].round(3), b[:400].round(3)).pvalue, rel=1e-12),
        "method": "exact",
    }


def test_compare_runs_deltas_against_the_chosen_baseline():
    def run(run_id: int, durations: list[float]) -> RunSummary:
        summary = summarise(samples_table(duration_us=np.array(durations), collective="all_reduce", size_bytes=None))
        return RunSummary(run_id, f"run {run_id}", "data", "imported", summary, run_kind(summary["groups"]))

    result = compare_runs([run(1, [10.0, 20.0, 30.0]), run(2, [20.0, 40.0, 60.0])], baseline_id=2)
    assert result["baseline_run_id"] == 2
    p50 = result["runs"][0]["overall"]["p50_us"]
    assert p50 == {"value": 20.0, "baseline": 40.0, "delta": -20.0, "ratio": 0.5, "verdict": "better"}
    assert result["runs"][0]["overall"]["count"]["verdict"] is None  # counts have no direction
    assert result["notice"] is None and result["runs"][0]["comparable"] is True
    assert result["runs"][0]["groups"][0]["stats"]["max_us"]["delta"] == -30.0
    with pytest.raises(ValueError, match="baseline: run 5 is not one of the compared runs"):
        compare_runs([run(1, [1.0])], baseline_id=5)


def test_non_finite_figure_names_the_first_infinite_or_nan_number_by_its_path() -> None:
    summary = {"groups": [{"stats": {"mean_us": 1.5, "algbw_gbps": None}}, {"stats": {"mean_us": float("inf")}}]}
    assert non_finite_figure(summary) == "groups[1].stats.mean_us"
    assert non_finite_figure({"grid": [0.0, float("nan")]}) == "grid[1]"
    assert non_finite_figure({"groups": [{"stats": {"mean_us": 1.5, "count": 3, "name": "x"}}]}) is None


def test_compare_colours_by_direction_and_refuses_to_test_unrelated_runs():
    def run(run_id: int, size: int, durations: list[float], busbw: float) -> RunSummary:
        # Each time three times: six samples of one size make a distribution (SWEEP_MAX_SAMPLES is 4).
        samples = samples_table(
            duration_us=np.array(durations * 3), collective="all_reduce", size_bytes=np.full(len(durations) * 3, size),
            busbw_gbps=np.full(len(durations) * 3, busbw),
        )  # fmt: skip
        summary = summarise(samples)
        return RunSummary(run_id, f"run {run_id}", None, "imported", summary, run_kind(summary["groups"]))

    faster = compare_runs([run(1, 1024, [10.0, 20.0], 1.0), run(2, 1024, [40.0, 80.0], 3.99)])
    busbw = faster["runs"][1]["groups"][0]["stats"]["busbw_gbps"]
    assert (busbw["ratio"], busbw["verdict"]) == (
        pytest.approx(3.99, rel=1e-12),
        "better",
    )  # higher bandwidth is better
    p50 = faster["runs"][1]["groups"][0]["stats"]["p50_us"]
    assert (p50["ratio"], p50["verdict"]) == (4.0, "worse")  # longer time is worse
    assert faster["ks_tests"][0]["comparable"] is True

    unrelated = compare_runs([run(1, 1024, [10.0, 20.0], 1.0), run(2, 4096, [40.0, 80.0], 3.99)])
    assert unrelated["notice"] == (
        "#2 run 2 shares no (collective, data size) with the baseline #1 run 1: no ratios against it and no "
        "Kolmogorov–Smirnov test, which would compare unrelated collectives and sizes"
    )
    second = unrelated["runs"][1]
    assert second["comparable"] is False
    assert second["overall"]["p50_us"] == {
        "value": 40.0, "baseline": None, "delta": None, "ratio": None, "verdict": None,
    }  # fmt: skip
    assert unrelated["ks_tests"] == [
        {"run_a": 1, "run_b": 2, "comparable": False, "statistic": None, "pvalue": None, "method": None, "groups": []}
    ]


def test_the_slowest_trials_come_slowest_first_and_equal_times_in_iteration_order():
    # 25 trials of one group, iterations 100-124 shuffled: four tie at 5 µs across the 20th place.
    durations = np.array([40.0] + [26.0 - i for i in range(17)] + [5.0, 5.0, 5.0, 5.0, 1.0, 1.0, 1.0])
    iterations = np.arange(100, 125)
    order = np.random.default_rng(3).permutation(25)
    summary = summarise(
        samples_table(duration_us=durations[order], iteration=iterations[order], collective="all_reduce")
    )
    group = summary["groups"][0]
    assert [(trial["iteration"], trial["duration_us"]) for trial in group["slowest"]] == [
        (100, 40.0), *[(101 + i, 26.0 - i) for i in range(17)], (118, 5.0), (119, 5.0),
    ]  # fmt: skip
    assert group["first"] == {"iteration": 100, "duration_us": 40.0}
