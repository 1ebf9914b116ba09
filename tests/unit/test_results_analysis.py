"""Read-time analysis: nccl-tests' average busbw from real logs, assumptions, slowest trials, figures."""

from pathlib import Path

import numpy as np
import pytest

from emuplan.charts import delay_figure, sweep_figure
from emuplan.results import parse_result_file, summarise
from emuplan.results.analysis.run_analysis import (
    Assumptions,
    analyse,
    expected_busbw_gbps,
    resolve_assumptions,
    run_kind,
    time_unit,
)
from emuplan.results.canonical import samples_table
from emuplan.workload.document import PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model
from paths import NCCL_TESTS, SHARED_NCCL

SETTINGS_ONLY = {"default_link_gbps": 100.0, "default_latency_us": 5.0}


def sweep_of(path: Path) -> tuple[dict, dict]:
    parsed = parse_result_file(path.read_bytes(), path.name)
    summary = summarise(
        parsed.samples, ranks=parsed.ranks, reported_avg_busbw=parsed.reported_avg_busbw, elements=parsed.elements
    )
    # The link typed as a reader would (the server's fallback alone gives no expected curve: see below).
    assumptions = resolve_assumptions(link_gbps=100.0, file_ranks=parsed.ranks, **SETTINGS_ONLY)
    analysis = analyse(summary, run_kind(summary["groups"]), assumptions)
    return analysis, analysis["sweep"]["collectives"][0]


def test_the_servers_fallback_link_gives_no_ideal_time_and_no_expected_curve():
    path = NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"
    parsed = parse_result_file(path.read_bytes(), path.name)
    summary = summarise(parsed.samples, ranks=parsed.ranks, reported_avg_busbw=parsed.reported_avg_busbw)
    analysis = analyse(summary, run_kind(summary["groups"]), resolve_assumptions(file_ranks=16, **SETTINGS_ONLY))
    assert analysis["assumptions"]["link_applied"] is False
    assert analysis["assumptions"]["ceiling_gbps"] is None
    assert {g["pct_of_ideal"] for g in analysis["groups"]} == {None}
    rows = analysis["sweep"]["collectives"][0]["tables"][0]["rows"]
    assert {row["expected_busbw_gbps"] for row in rows} == {None}
    assert analysis["above_ideal_pct"] is None
    assert analysis["expected_note"] == "no platform: no expected curve or % of expected"


# (file, collective, ranks, cells, our average of the printed cells, the log's line, peak, peak size, variant)
REAL_LOGS = [
    (NCCL_TESTS / "gtx1080-2gpu-allgather-pre2.13.txt", "all_gather", 2, 50, 0.347, 0.347488, 0.78, 134217728,
     "in-place"),
    (NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt", "all_reduce", 16, 62, 70.74145161290323, 70.742, 338.82,
     8589934592, "out-of-place"),
    (NCCL_TESTS / "v100-64rank-alltoall-pre2.13.txt", "all_to_all", None, 4, 0.51, 0.507636, 0.51, 268435456,
     "out-of-place"),
    (SHARED_NCCL / "a100-16rank-allreduce-2.17.txt", "all_reduce", 16, 2, 220.92, 220.921, 222.88, 10737418240,
     "out-of-place"),
    (SHARED_NCCL / "b200-allreduce-2.17.6.txt", "all_reduce", 16, 58, 137.17827586206897, 137.179, 702.91,
     2147483648, "in-place"),
    (SHARED_NCCL / "v100-12gpu-allreduce-pre2.13.txt", "all_reduce", 12, 62, 42.558064516129036, 42.5578, 123.57,
     8589934592, "in-place"),
    (SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt", "broadcast", 12, 62, 41.245161290322585, 41.2456, 122.15,
     8589934592, "out-of-place"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "collective", "ranks", "cells", "average", "file_average", "peak", "peak_size", "peak_variant"),
    REAL_LOGS,
    ids=[entry[0].name for entry in REAL_LOGS],
)
def test_average_busbw_of_real_logs_agrees_with_their_avg_bus_bandwidth_line(
    path, collective, ranks, cells, average, file_average, peak, peak_size, peak_variant
):
    analysis, entry = sweep_of(path)
    assert analysis["kind"] == "size-sweep"
    assert analysis["assumptions"]["ranks"] == ranks
    assert entry["collective"] == collective
    assert entry["averaged_cells"] == cells
    assert entry["average_busbw_gbps"] == pytest.approx(average, rel=1e-12)
    assert entry["file_average_busbw_gbps"] == file_average
    # The log rounds each cell to 0.01 GB/s; its own line averages the unrounded values.
    assert abs(entry["average_busbw_gbps"] - file_average) <= 0.005
    assert round(entry["average_busbw_gbps"], 2) == round(file_average, 2)
    assert entry["agrees_with_file"] is True
    assert (entry["peak_busbw_gbps"], entry["peak_size_bytes"], entry["peak_variant"]) == (
        peak,
        peak_size,
        peak_variant,
    )


def test_sweep_tables_carry_nccl_tests_columns_and_the_expected_alpha_beta_busbw():
    analysis, entry = sweep_of(NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt")
    assert [table["variant"] for table in entry["tables"]] == ["out-of-place", "in-place"]
    last = entry["tables"][0]["rows"][-1]
    assert (last["size_bytes"], last["elements"], last["dtype"], last["time_us"]) == (
        8589934592, 2147483648, "float", 47535.0,
    )  # fmt: skip
    assert (last["algbw_gbps"], last["busbw_gbps"]) == (180.71, 338.82)  # as printed
    # 100 Gbit/s, α = 5 µs, 16 ranks: ideal = 30 α + 1.875 × S / 12.5e9 B/s
    ideal_s = 30 * 5e-6 + 1.875 * 8589934592 / 12.5e9
    assert last["expected_busbw_gbps"] == pytest.approx(8589934592 / ideal_s / 1e9 * 1.875, rel=1e-12)
    assert last["pct_of_ideal"] == pytest.approx(ideal_s / 47535e-6 * 100, rel=1e-12)
    assert analysis["sweep"]["ceiling_gbps"] == 12.5
    assert analysis["time_unit"] == "µs"


def test_alltoall_before_2_13_with_a_blank_redop_cell_is_read():
    parsed = parse_result_file((NCCL_TESTS / "v100-64rank-alltoall-pre2.13.txt").read_bytes(), "alltoall.txt")
    rows = parsed.samples.to_pylist()
    assert [(r["size_bytes"], r["variant"], r["duration_us"], r["busbw_gbps"]) for r in rows] == [
        (268435456, "out-of-place", 520935.0, 0.51),
        (268435456, "in-place", 519562.0, 0.51),
        (536870912, "out-of-place", 1041974.0, 0.51),
        (536870912, "in-place", 1041299.0, 0.51),
    ]
    assert parsed.elements == {
        ("all_to_all", 268435456): (1048576, "float"),
        ("all_to_all", 536870912): (2097152, "float"),
    }
    assert parsed.ranks is None  # algbw 0.52 is too rounded to tell 50 from 64 ranks


def test_assumptions_come_from_the_request_then_the_plan_then_the_file_then_the_settings():
    request = PlanRequest(model="fashion-mnist-mlp", gpus=8, link_gbps=400.0, latency_us=2.0)
    plan = plan_workload(request, resolve_model("fashion-mnist-mlp"))
    assert resolve_assumptions(file_ranks=16, **SETTINGS_ONLY) == Assumptions(
        100.0, 5.0, 16, {"link_gbps": "settings", "latency_us": "settings", "ranks": "file"}
    )
    assert resolve_assumptions(plan=plan, file_ranks=16, **SETTINGS_ONLY) == Assumptions(
        400.0, 2.0, 8, {"link_gbps": "plan", "latency_us": "plan", "ranks": "plan"}
    )
    assert resolve_assumptions(
        link_gbps=800.0, latency_us=0.0, ranks=4, plan=plan, file_ranks=16, **SETTINGS_ONLY
    ) == Assumptions(800.0, 0.0, 4, {"link_gbps": "query", "latency_us": "query", "ranks": "query"})
    assert resolve_assumptions(**SETTINGS_ONLY).sources["ranks"] == "none"
    with pytest.raises(ValueError, match="ranks: must be at least 1, got 0"):
        resolve_assumptions(ranks=0, **SETTINGS_ONLY)


def test_expected_busbw_approaches_the_line_rate_for_large_buffers():
    assumptions = Assumptions(400.0, 0.0, 8, {})
    assert expected_busbw_gbps("all_reduce", 1 << 30, assumptions) == pytest.approx(50.0, rel=1e-12)
    assert expected_busbw_gbps("all_reduce", 1 << 30, Assumptions(400.0, 0.0, None, {})) is None


def test_time_unit_follows_the_data():
    assert [time_unit(t) for t in (999.0, 1000.0, 999_999.0, 1e6)] == [
        ("µs", 1.0), ("ms", 1e3), ("ms", 1e3), ("s", 1e6),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def spike_summary() -> dict:
    durations = np.full(500, 14_000.0) + np.arange(500)  # 14.000 … 14.499 ms; p50 = 14.251 ms once two are slow
    durations[0] = 60_000.0  # a slow first iteration
    durations[250] = 5_000_000.0  # one 5-second spike
    return summarise(samples_table(duration_us=durations, collective="all_reduce", size_bytes=np.full(500, 971048)))


def test_slowest_trials_and_a_warm_up_first_iteration(spike_summary):
    kind = run_kind(spike_summary["groups"])
    analysis = analyse(spike_summary, kind, resolve_assumptions(ranks=4, **SETTINGS_ONLY))
    assert analysis["kind"] == "distribution" and analysis["time_unit"] == "ms"
    trials = analysis["trials"][0]
    assert trials["slowest"][:3] == [
        {"iteration": 250, "duration_us": 5_000_000.0, "over_p50": 5_000_000.0 / 14_251.0},
        {"iteration": 0, "duration_us": 60_000.0, "over_p50": 60_000.0 / 14_251.0},
        {"iteration": 499, "duration_us": 14_499.0, "over_p50": 14_499.0 / 14_251.0},
    ]
    assert len(trials["slowest"]) == 10
    assert trials["first"] == {"iteration": 0, "duration_us": 60_000.0}
    assert trials["warm_up_flag"] is True
    group = analysis["groups"][0]
    # The spike moves the mean, not the median: both are given.
    assert group["busbw_gbps_p50"] == pytest.approx(971048 / 14_251e-6 / 1e9 * 1.5, rel=1e-12)
    assert group["mean_us"] == 24_313.0
    assert group["busbw_gbps"] == pytest.approx(971048 / 24_313e-6 / 1e9 * 1.5, rel=1e-12)


def test_delay_figure_log_y_and_clip_marks_the_spike_with_its_value(spike_summary):
    assert delay_figure(spike_summary, log_y=True)["layout"]["yaxis"]["type"] == "log"
    clipped = delay_figure(spike_summary, clip=True)
    axis = clipped["layout"]["yaxis"]
    # 500 trials: the nearest-rank p99.9 is the maximum itself, so the axis ends at 1.2 × p99.
    assert axis["title"]["text"] == "completion time (ms), axis ends at 1.2 × p99"
    assert axis["range"] == [0, pytest.approx(14.496 * 1.2, rel=1e-12)]  # p99: the 495th of 500
    marks = clipped["data"][1]
    assert (marks["x"], marks["text"]) == ([0, 250], ["60 ms", "5000 ms"])  # both off the axis


def test_sweep_figure_has_log_2_size_ticks_expected_curve_and_line_rate():
    analysis, _ = sweep_of(NCCL_TESTS / "gtx1080-2gpu-allgather-pre2.13.txt")
    figure = sweep_figure(analysis["sweep"])
    names = [trace["name"] for trace in figure["data"]]
    assert names == [
        "all_gather out-of-place busbw", "all_gather out-of-place algbw",
        "all_gather in-place busbw", "all_gather in-place algbw",
        "all_gather expected busbw", "line rate 12.5 GB/s",
    ]  # fmt: skip
    xaxis = figure["layout"]["xaxis"]
    assert xaxis["type"] == "log"
    assert xaxis["ticktext"] == ["8 B", "64 B", "512 B", "4 KiB", "32 KiB", "256 KiB", "2 MiB", "16 MiB", "128 MiB"]
    assert xaxis["tickvals"] == [2**power for power in range(3, 28, 3)]
    assert figure["data"][-1]["y"] == [12.5, 12.5]
