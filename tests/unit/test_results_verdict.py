"""A run's verdict (pass / degraded / fail / not judged) and its reasons, on real nccl-tests logs judged on the
built-in platforms (NCCL's own cost model: test_results_expected.py) and on per-rank times built so the answer
can be worked out by hand."""

import json

import numpy as np

from emuplan.results import parse_result_file, summarise
from emuplan.results.analysis.expected import Fabric, fabric_of
from emuplan.results.analysis.run_analysis import run_kind
from emuplan.results.analysis.stragglers import rank_times_from_timestamps
from emuplan.results.analysis.verdict import DEGRADED, FAIL, NOT_JUDGED, PASS, Reason, Thresholds, judge_run
from emuplan.results.canonical import samples_table
from emuplan.workload.platforms import BUILTIN_PLATFORMS
from paths import NCCL_TESTS, RESULTS, SHARED_NCCL

B200_LOG = SHARED_NCCL / "b200-allreduce-2.17.6.txt"
A3_MEGA_LOG = NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"
NO_PLATFORM = Reason(
    "not-judged",
    "note",
    "no platform: nothing is expected of the run; name the platform it ran on (the run page's Platform, emuplan "
    "import --platform or emuplan platforms assign, PATCH /api/runs/{id} platform)",
)


def on(platform: str, ranks: int, hosts: int | None) -> Fabric:
    return fabric_of(BUILTIN_PLATFORMS[platform], ranks, hosts)


def judged(data: bytes, name: str, fabric: Fabric | None, thresholds: Thresholds | None = None):
    parsed = parse_result_file(data, name)
    summary = summarise(parsed.samples, ranks=parsed.ranks, wrong=parsed.wrong, rank_times=parsed.rank_times)
    return judge_run(
        summary["groups"],
        run_kind(summary["groups"]),
        ranks=parsed.ranks,
        fabric=fabric,
        stragglers=summary.get("stragglers"),
        thresholds=thresholds,
    )


def test_a_log_with_wrong_elements_fails_naming_the_size():
    """The B200 log with one #wrong cell edited from 0 to 3 (1 MiB, out-of-place)."""
    text = B200_LOG.read_text()
    row = "     1048576        262144     float     sum      -1   115.58    9.07   17.01       0"
    assert text.count(row) == 1
    parsed = parse_result_file(text.replace(row, row[:-1] + "3").encode(), "b200.txt")
    assert parsed.wrong[("all_reduce", 1048576, "out-of-place")] == 3
    assert sum(parsed.wrong.values()) == 3 and len(parsed.wrong) == 58
    verdict = judged(text.replace(row, row[:-1] + "3").encode(), "b200.txt", on("b200-400g", 16, 2))
    assert verdict.status == FAIL
    assert verdict.reasons == [
        Reason(
            "data-errors",
            FAIL,
            "all_reduce · 1,048,576 B · out-of-place: nccl-tests counted 3 wrong elements (#wrong): not a correct "
            "collective",
            collective="all_reduce",
            size_bytes=1048576,
            variant="out-of-place",
        ),
    ]


def test_the_b200_log_on_its_two_b200_nodes_passes_and_its_512_kib_dip_is_no_fault():
    """Its out-of-place 512 KiB row (240.71 µs where 256 KiB took 66.68) is a dip where latency still decides
    the time: NCCL's protocol and channel switches make such dips on healthy systems too (the corpus' 8×8 H100
    shows one of 59 % at 8 MiB), so it degrades nothing; where bandwidth dominates the log rises with size."""
    verdict = judged(B200_LOG.read_bytes(), "b200.txt", on("b200-400g", 16, 2))
    assert (verdict.status, verdict.reasons) == (PASS, [])


def test_the_b200_log_read_as_one_nvl72_domain_is_below_80_percent_of_ncc_ls_nvls():
    verdict = judged(B200_LOG.read_bytes(), "b200.txt", on("gb200-nvl72", 16, None))
    assert verdict.status == DEGRADED
    assert [reason.message for reason in verdict.reasons] == [
        f"all_reduce · 2,147,483,648 B · {variant}: busbw {busbw} GB/s is {pct} % of the expected 927.03 GB/s (NCCL "
        "nvls/Simple bound by NVLink 5 (NVL72)), below 80 % (the best size where bandwidth dominates)"
        for variant, busbw, pct in (("out-of-place", "696.06", "75.1"), ("in-place", "702.91", "75.8"))
    ]


def test_the_a3_mega_log_passes_on_its_tcpxo_nics_and_is_degraded_on_ndr_it_never_had():
    """The 16-rank H100 log comes from a GCP A3 Mega (8 × 200 Gbit/s GPUDirect-TCPXO per node, SOURCES.md):
    judged on that it passes; on DGX H100's 8 × 400 Gbit/s NDR NCCL would run NVLS-tree at 460.72 GB/s."""
    assert judged(A3_MEGA_LOG.read_bytes(), "h100.txt", on("h100-a3-mega", 16, 2)).status == PASS
    on_ndr = judged(A3_MEGA_LOG.read_bytes(), "h100.txt", on("h100-ndr", 16, 2))
    assert on_ndr.status == DEGRADED
    assert on_ndr.reasons[0] == Reason(
        "below-expected",
        DEGRADED,
        "all_reduce · 8,589,934,592 B · in-place: busbw 337.35 GB/s is 73.2 % of the expected 460.72 GB/s (NCCL "
        "nvls-tree/Simple bound by InfiniBand NDR 400G), below 80 % (the best size where bandwidth dominates)",
        collective="all_reduce",
        size_bytes=8589934592,
        variant="in-place",
        loss_pct=on_ndr.reasons[0].loss_pct,
    )
    assert round(on_ndr.reasons[0].loss_pct, 1) == 26.8


def test_without_a_platform_a_run_is_not_judged_and_says_how_to_judge_it():
    verdict = judged(B200_LOG.read_bytes(), "b200.txt", None)
    assert (verdict.status, verdict.reasons) == (NOT_JUDGED, [NO_PLATFORM])
    wrong = B200_LOG.read_text().replace(
        "     1048576        262144     float     sum      -1   115.58    9.07   17.01       0",
        "     1048576        262144     float     sum      -1   115.58    9.07   17.01       3",
    )
    # A fault found without a platform still decides the verdict.
    assert judged(wrong.encode(), "b200.txt", None).status == FAIL


def test_a_distribution_with_a_2x_straggler_is_degraded():
    """4 ranks on 2 hosts, 20 iterations of one 16 MiB all-reduce: ranks 0, 1, 3 finish 100 µs after the
    first start, rank 2 after 200 µs: 2× the median rank, 100 µs lost per call."""
    ranks, iterations = 4, 20
    start_ns = np.zeros((ranks, iterations, 1))
    end_ns = np.full((ranks, iterations, 1), 100_000.0)
    end_ns[2] = 200_000.0
    rank_times = rank_times_from_timestamps(start_ns, end_ns, ["host-a", "host-a", "host-b", "host-b"])
    samples = samples_table(
        duration_us=np.full(iterations, 200.0),
        collective="all_reduce",
        iteration=np.arange(iterations),
        size_bytes=np.full(iterations, 16 << 20),
    )
    summary = summarise(samples, ranks=ranks, rank_times=rank_times)
    verdict = judge_run(
        summary["groups"], run_kind(summary["groups"]), ranks=ranks, fabric=None, stragglers=summary["stragglers"]
    )
    assert verdict.status == DEGRADED
    assert verdict.reasons == [
        Reason(
            "straggler",
            DEGRADED,
            "rank 2 on host-b takes 2.00× the median rank's time over 20 calls (100.00 µs lost per call), above 1.25×",
        ),
        NO_PLATFORM,
    ]
    document = json.loads(json.dumps(verdict.as_dict()))
    assert (document["status"], document["reasons"][0]["code"]) == ("degraded", "straggler")
    assert document["thresholds"]["max_straggler_over_median"] == 1.25


def test_a_run_faster_than_its_platform_allows_is_noted_not_hidden():
    """The B200 log judged as if on two DGX A100 nodes: its 2 GiB busbw is 366–369 % of the 190.33 GB/s NCCL's
    ring over 8 × 200 Gbit/s HDR would reach. The figures, not the run, are off."""
    verdict = judged(B200_LOG.read_bytes(), "b200.txt", on("a100-hdr", 16, 2))
    assert verdict.status == PASS
    assert verdict.reasons == [
        Reason(
            "above-expected",
            "note",
            f"all_reduce · 2,147,483,648 B · {variant}: busbw {busbw} GB/s is {pct} % of the expected 190.33 GB/s "
            "(NCCL ring/Simple bound by InfiniBand HDR 200G): the platform's figures, or the model, are off",
            collective="all_reduce",
            size_bytes=2147483648,
            variant=variant,
        )
        for variant, busbw, pct in (("out-of-place", "696.06", "365.7"), ("in-place", "702.91", "369.3"))
    ]


def repeats(durations: list[float]) -> list[dict]:
    samples = samples_table(
        duration_us=np.array(durations),
        collective="all_reduce",
        iteration=np.arange(len(durations)),
        size_bytes=np.full(len(durations), 1 << 30),
    )
    return summarise(samples, ranks=8)["groups"]


def test_a_tail_twice_the_median_over_20_repeats_is_degraded_and_the_demos_1_2x_is_not():
    groups = repeats([100.0] * 19 + [200.0])
    verdict = judge_run(groups, run_kind(groups), ranks=8, fabric=None)
    assert verdict.status == DEGRADED
    assert verdict.reasons[0] == Reason(
        "unstable",
        DEGRADED,
        "all_reduce · 1,073,741,824 B: p99 200.00 µs is 2.00× the p50 100.00 µs over 20 iterations, slowest iteration "
        "19, above 1.5×",
        collective="all_reduce",
        size_bytes=1 << 30,
        variant="",
        loss_pct=50.0,
    )
    # A 2-core gloo demo's 1.20×, and 2× over 5 repeats (too few for a tail), degrade nothing.
    for durations in ([100.0] * 19 + [120.0], [100.0, 101.0, 99.0, 200.0, 100.0]):
        groups = repeats(durations)
        assert judge_run(groups, run_kind(groups), ranks=8, fabric=None).status == NOT_JUDGED


def test_a_distribution_that_never_reaches_bandwidth_bound_sizes_is_judged_on_latency_alone():
    """The constructed -J report: 4 ranks on 2 hosts, 1 and 16 MiB, 4 iterations each. At 16 MiB NCCL expects
    ring/LL128 in 100.8 µs (its latency more than a tenth of that): the p50 of 1200 µs is 8.4 % of the
    expected busbw, below the 10 % no healthy system of the corpus went under at such sizes."""
    report = RESULTS / "nccl-tests-json" / "constructed-4proc-2host-allreduce-I1.json"
    verdict = judged(report.read_bytes(), report.name, on("h100-ndr", 4, 2))
    assert verdict.status == DEGRADED
    assert [(reason.code, reason.severity, reason.variant) for reason in verdict.reasons] == [
        ("latency-far-below-expected", DEGRADED, "out-of-place"),
        ("latency-far-below-expected", DEGRADED, "in-place"),
        ("latency-only", "note", "out-of-place"),
        ("latency-only", "note", "in-place"),
    ]
    assert verdict.reasons[0].message == (
        "all_reduce · 16,777,216 B · out-of-place: 8.4 % of the expected busbw 249.57 GB/s (in 100.8 µs, NCCL "
        "ring/LL128 bound by InfiniBand NDR 400G), below 10 %"
    )
