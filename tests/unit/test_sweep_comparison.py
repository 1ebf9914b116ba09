"""Size sweeps are read as sweeps: the kind rule, and sweeps compared size by size (two real B200 logs, the
second 25 % slower at its three largest sizes), alone and beside a distribution."""

import numpy as np
import pytest

from emuplan.results import parse_result_file, summarise
from emuplan.results.analysis.compare import SWEEP_METRICS, RunSummary, compare_runs, size_text
from emuplan.results.analysis.run_analysis import analyse, resolve_assumptions, run_kind
from emuplan.results.canonical import samples_table
from paths import NCCL_TESTS, RESULTS, SHARED_NCCL
from slower_sweep import B200_LOG, b200_slower_log

SETTINGS_ONLY = {"default_link_gbps": 100.0, "default_latency_us": 5.0}


def stored(run_id: int, data: bytes, file_name: str) -> RunSummary:
    """The run as ``services.comparisons.compare_stored_runs`` hands it over: its kind decided once, its groups' rates
    and its sweep view under the file's ranks."""
    parsed = parse_result_file(data, file_name)
    summary = summarise(
        parsed.samples, ranks=parsed.ranks, reported_avg_busbw=parsed.reported_avg_busbw, elements=parsed.elements
    )
    kind = run_kind(summary["groups"])
    analysis = analyse(summary, kind, resolve_assumptions(file_ranks=parsed.ranks, **SETTINGS_ONLY))
    summary = {**summary, "groups": analysis["groups"]}
    return RunSummary(run_id, file_name, None, "imported", summary, kind, analysis.get("sweep"))


def kind_of(data: bytes, file_name: str) -> str:
    return run_kind(summarise(parse_result_file(data, file_name).samples)["groups"])


def test_a_sweep_is_one_value_or_a_few_repeats_per_size_and_a_distribution_is_many():
    for log in (*sorted(NCCL_TESTS.glob("*.txt")), *sorted(SHARED_NCCL.glob("*.txt"))):
        assert kind_of(log.read_bytes(), log.name) == "size-sweep", log.name
    # The same log three times over (three runs pasted together): three values per size, still a sweep.
    assert kind_of(B200_LOG.read_bytes() * 3, "b200-allreduce.txt") == "size-sweep"
    assert kind_of((RESULTS / "generated-per-iteration.csv").read_bytes(), "g.csv") == "distribution"

    def kind_of_times(count: int, size_bytes=1024) -> str:
        sizes = None if size_bytes is None else np.full(count, size_bytes)
        table = samples_table(duration_us=np.arange(1.0, count + 1), collective="all_reduce", size_bytes=sizes)
        return run_kind(summarise(table)["groups"])

    assert [kind_of_times(count) for count in (1, 4, 5, 8)] == ["size-sweep", "size-sweep"] + ["distribution"] * 2
    assert kind_of_times(1, size_bytes=None) == "distribution"  # no size: no curve against size


def test_two_sweeps_compare_size_by_size_with_a_verdict_and_no_percentiles_or_ks_test():
    baseline = stored(4, B200_LOG.read_bytes(), "b200-allreduce.txt")
    slower = stored(7, b200_slower_log(), "b200-allreduce-slower.txt")
    result = compare_runs([baseline, slower])
    assert result["ks_tests"] == []
    assert [row["overall"] for row in result["runs"]] == [None, None]  # no "all data sizes together"
    assert [row["kind"] for row in result["runs"]] == ["size-sweep", "size-sweep"]
    assert {tuple(group["stats"]) for row in result["runs"] for group in row["groups"]} == {SWEEP_METRICS}

    sweep = result["sweep"]
    assert (sweep["reference_run_id"], sweep["same_within_pct"]) == (4, 5.0)
    first, second = sweep["runs"]
    assert first["verdict"] is None
    assert second["verdict"] == (
        "#7 vs #4: −20.0 % busbw at 3 sizes (512 MiB–2 GiB), same (within ±5 %) at 22 sizes (128 B–256 MiB); "
        "4 sizes (8 B–64 B) left out: busbw 0.00 GB/s in both, under the log's resolution"
    )
    # nccl-tests' peak and its average line, ours beside the log's own.
    assert [
        (e["peak_busbw_gbps"], e["peak_size_bytes"], e["average_busbw_gbps"], e["file_average_busbw_gbps"])
        for run in (first, second)
        for e in run["headline"]
    ] == [
        (702.91, 2147483648, pytest.approx(137.17827586206897, rel=1e-12), 137.179),
        (562.33, 2147483648, pytest.approx(123.48965517241379, rel=1e-12), 123.49),
    ]
    # Per size: the mean of the two variants' cells, and busbw ÷ the baseline's from the times (7230.94 µs
    # against 5784.75 µs out-of-place, 7160.50 against 5728.40 in-place; 16 ranks both).
    rows = {row["size_bytes"]: row for row in second["sizes"]}
    assert len(rows) == 29 and [row["busbw_ratio"] for row in first["sizes"]] == [None] * 29
    last = rows[2147483648]
    assert (last["busbw_gbps"], last["algbw_gbps"], last["time_us"]) == (
        pytest.approx((556.85 + 562.33) / 2, rel=1e-12),
        pytest.approx((296.99 + 299.91) / 2, rel=1e-12),
        pytest.approx((7230.94 + 7160.50) / 2, rel=1e-12),
    )
    # busbw is ∝ 1/time at one size and rank count: the mean of the variants' busbw ÷ the baseline's.
    assert last["busbw_ratio"] == pytest.approx((1 / 7230.94 + 1 / 7160.50) / (1 / 5784.75 + 1 / 5728.40), rel=1e-12)
    assert [(size, round(rows[size]["change_pct"], 3), rows[size]["verdict"]) for size in sorted(rows)[-4:]] == [
        (268435456, 0.0, "same"),
        (536870912, -20.0, "worse"),
        (1073741824, -20.0, "worse"),
        (2147483648, -20.0, "worse"),
    ]
    # 8 B to 64 B print busbw 0.00 in both logs: below the floor, not judged; the rest up to 256 MiB the same.
    assert [size for size in sorted(rows) if rows[size]["below_floor"]] == [8, 16, 32, 64]
    assert [rows[size]["verdict"] for size in sorted(rows)[:4]] == [None] * 4
    assert {rows[size]["verdict"] for size in sorted(rows)[4:-3]} == {"same"}
    # The other way round: faster at three sizes, measured against the slower log.
    assert compare_runs([baseline, slower], baseline_id=7)["sweep"]["runs"][0]["verdict"] == (
        "#4 vs #7: +25.0 % busbw at 3 sizes (512 MiB–2 GiB), same (within ±5 %) at 22 sizes (128 B–256 MiB); "
        "4 sizes (8 B–64 B) left out: busbw 0.00 GB/s in both, under the log's resolution"
    )


def test_a_mixed_comparison_reads_each_run_as_its_kind():
    distribution = stored(1, (RESULTS / "generated-per-iteration.csv").read_bytes(), "g.csv")
    sweep = stored(2, B200_LOG.read_bytes(), "b200-allreduce.txt")
    other = stored(3, (RESULTS / "generated-per-iteration.csv").read_bytes(), "h.csv")
    result = compare_runs([distribution, sweep, other])
    assert [row["kind"] for row in result["runs"]] == ["distribution", "size-sweep", "distribution"]
    assert result["runs"][1]["overall"] is None
    assert result["runs"][2]["overall"]["p50_us"]["ratio"] == 1.0
    # Only the two distributions are tested; the sweep against nothing, itself the reference of the sweeps.
    assert [(test["run_a"], test["run_b"]) for test in result["ks_tests"]] == [(1, 3)]
    assert result["sweep"]["reference_run_id"] == 2
    assert [run["verdict"] for run in result["sweep"]["runs"]] == [None]
    assert {tuple(group["stats"]) for group in result["runs"][1]["groups"]} == {SWEEP_METRICS}


def test_sizes_read_in_binary_units():
    assert [size_text(size) for size in (8, 1023, 1024, 971048, 536870912, 2147483648, 10 << 40)] == [
        "8 B", "1023 B", "1 KiB", "948 KiB", "512 MiB", "2 GiB", "10 TiB",
    ]  # fmt: skip
