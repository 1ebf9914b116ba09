"""Training against emulation in a comparison (results.analysis.compare): two distributions of one all-reduce size, the
job's per communicator, the benchmark's out-of-place and in-place, lined up by (collective, size)."""

import numpy as np
import pyarrow as pa
from scipy import stats as scipy_stats

from emuplan.results.analysis.compare import RunSummary, compare_runs
from emuplan.results.analysis.run_analysis import run_kind
from emuplan.results.analysis.stats import summarise
from emuplan.results.canonical import samples_table

SIZE = 1048576
BENCHMARK_US = [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]
JOB_US = [150.0, 160.0, 170.0, 180.0, 190.0, 200.0]


def _run(run_id: int, origin: str, times: list[float], variants: list[str]) -> RunSummary:
    durations = np.array(times * len(variants))
    variant = pa.array([v for v in variants for _ in times])
    sizes = np.full(len(durations), SIZE, dtype=np.int64)
    summary = summarise(
        samples_table(duration_us=durations, collective="all_reduce", size_bytes=sizes, variant=variant)
    )
    return RunSummary(run_id, f"run {run_id}", None, origin, summary, run_kind(summary["groups"]))


def test_a_jobs_communicators_are_read_against_the_benchmarks_out_of_place_timing() -> None:
    benchmark = _run(1, "imported", BENCHMARK_US, ["out-of-place", "in-place"])
    job = _run(2, "observed", JOB_US, ["0xc0ffee"])
    document = compare_runs([benchmark, job])
    assert [(run["side"], run["kind"]) for run in document["runs"]] == [
        ("emulation", "distribution"),
        ("training", "distribution"),
    ]
    (group,) = document["runs"][1]["groups"]
    assert (group["label"], group["compared_with"]) == (
        "all_reduce · 1048576 B · 0xc0ffee",
        "all_reduce · 1048576 B · out-of-place",
    )
    assert group["stats"]["p50_us"]["value"] == 170.0 and group["stats"]["p50_us"]["baseline"] == 102.0  # nearest rank
    (test,) = document["ks_tests"]
    expected = scipy_stats.ks_2samp(BENCHMARK_US, JOB_US)
    # Each of the benchmark's timings against the job's communicator of that size.
    assert test["groups"] == [
        {
            "label": f"all_reduce · 1048576 B · {variant}",
            "compared_with": "all_reduce · 1048576 B · 0xc0ffee",
            "statistic": 1.0,
            "pvalue": float(expected.pvalue),
            "method": "exact",
        }
        for variant in ("out-of-place", "in-place")
    ]
    assert document["training_vs_emulation"].startswith("Training vs emulation. Training: #2 run 2 (observed")


def test_two_benchmarks_are_matched_by_label_only() -> None:
    document = compare_runs([_run(1, "imported", BENCHMARK_US, ["out-of-place"]), _run(2, "measured", JOB_US, [""])])
    assert document["runs"][1]["groups"][0]["compared_with"] is None
    assert document["training_vs_emulation"] is None
