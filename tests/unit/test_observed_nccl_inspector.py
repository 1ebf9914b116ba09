"""NCCL Inspector dumps (tests/fixtures/results/nccl-inspector: the README's published examples, and a constructed
2-rank job on 2 hosts) read as observed runs: sizes as nccl-tests states them, busbw the plugin's and ours in
agreement, per-rank times with the slow rank found, archives, and refusals that name the file and line."""

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from emuplan.results import ResultFileError, parse_result_file
from emuplan.results.analysis.plan_vs_observed import ObservedComparisonError, compare_plan_with_observed
from emuplan.results.analysis.stats import summarise
from emuplan.results.budget import ImportBudget
from emuplan.results.formats.observed import parse_observed
from emuplan.workload.document import PlanRequest
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import resolve_model
from inspector_job import INSPECTOR_2_30_JOB, INSPECTOR_JOB, zipped_dump
from paths import FIXTURES

DUMPS = FIXTURES / "results" / "nccl-inspector"


def parsed_job(files):
    """``parse_observed`` within a budget of the default limits, released afterwards as an import's is."""
    with ImportBudget() as budget:
        return parse_observed(files, budget=budget)


def named(paths: list[Path]) -> list[tuple[str, bytes]]:
    return [(path.name, path.read_bytes()) for path in paths]


@pytest.mark.parametrize(
    ("file_name", "collective", "time_us", "busbw"),
    [
        ("readme-example-hostname-pid1639453.log", "all_reduce", 61974.0, 485.119099),
        # ReduceScatter's coll_msg_size_bytes is one rank's 2 GiB: the whole buffer is 8 × that.
        ("readme-example-hostname-pid438776.log", "reduce_scatter", 41057.0, 366.134533),
    ],
)
def test_the_readme_examples_read_with_our_busbw_agreeing(file_name, collective, time_us, busbw) -> None:
    parsed = parse_result_file(DUMPS / file_name, file_name)
    assert (parsed.source_format, parsed.ranks, parsed.hosts) == ("nccl-inspector", 8, 1)
    assert parsed.warnings == ["1 call not recorded by every rank of its communicator"]
    [sample] = parsed.samples.to_pylist()
    assert (sample["collective"], sample["size_bytes"], sample["duration_us"]) == (collective, 17179869184, time_us)
    assert sample["busbw_gbps"] == busbw
    [group] = summarise(parsed.samples, ranks=parsed.ranks)["groups"]
    assert group["busbw_gbps"] == pytest.approx(busbw, abs=5e-7)  # the plugin prints six decimals
    assert group["reported_busbw_gbps"] == busbw


def test_one_file_per_process_is_one_run_with_every_rank_timed() -> None:
    parsed = parsed_job(named(INSPECTOR_JOB))
    assert (parsed.ranks, parsed.hosts, parsed.warnings) == (2, 2, [])
    rows = parsed.samples.select(["collective", "size_bytes", "duration_us", "variant", "busbw_gbps"]).to_pylist()
    assert [tuple(row.values()) for row in rows] == [
        ("all_reduce", 1048576, 100.0, "0xc0ffee", 10.48576),
        ("all_reduce", 1048576, 150.0, "0xc0ffee", 6.990507),
        ("all_reduce", 1048576, 200.0, "0xc0ffee", 5.24288),
        ("all_gather", 131072, 60.0, "0xc0ffee", 1.092267),  # 2 × the 64 KiB piece each rank sent
    ]
    summary = summarise(parsed.samples, ranks=2, rank_times=parsed.rank_times, rank_unit=parsed.rank_unit)
    slowest = summary["stragglers"]["slowest_rank"]
    assert (slowest["name"], slowest["host"], slowest["lost_us"], slowest["calls"]) == ("1", "gpu-b", 80.0, 4)
    assert summary["stragglers"]["slowest_host"]["name"] == "gpu-b"
    # One sample per group: our busbw is the plugin's to its six decimals.
    all_gather = summary["groups"][1]
    assert all_gather["busbw_gbps"] == pytest.approx(1.092267, abs=5e-7)
    assert parsed.observed["communicators"] == [
        {"id": "0xc0ffee", "size": 2, "ranks": ["0", "1"], "hosts": ["gpu-a", "gpu-b"]}
    ]
    assert parsed.observed["steps"] == []
    # Per group with the communicator's own size: our busbw at the mean time beside the plugin's mean busbw.
    assert [
        (g["calls"], g["mean_us"], g["busbw_gbps"], g["reported_busbw_gbps"]) for g in parsed.observed["groups"]
    ] == [
        (
            3,
            150.0,
            pytest.approx(1048576 / 150e-6 / 1e9, rel=1e-12),
            pytest.approx((10.48576 + 6.990507 + 5.24288) / 3),
        ),
        (1, 60.0, pytest.approx(131072 / 60e-6 / 1e9 / 2, rel=1e-12), 1.092267),
    ]


def _tar_gz(paths: list[Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in paths:
            archive.add(path, f"nccl-inspector-4242/{path.name}")
    return buffer.getvalue()


@pytest.mark.parametrize("packed", [zipped_dump, _tar_gz])
def test_a_dump_directory_as_an_archive_reads_as_the_files(packed) -> None:
    parsed = parse_result_file(packed(INSPECTOR_JOB), "dump.zip")
    expected = parsed_job(named(INSPECTOR_JOB))
    assert parsed.samples.to_pylist() == expected.samples.to_pylist()
    assert parsed.rank_times.to_pylist() == expected.rank_times.to_pylist()


def test_a_dump_cut_short_names_its_line() -> None:
    content = INSPECTOR_JOB[0].read_bytes()
    cut = content[: content.index(b"\n") + 120]
    with pytest.raises(ResultFileError) as refused:
        parsed_job([("gpu-a-pid101.log", cut)])
    assert str(refused.value).startswith("gpu-a-pid101.log: line 2: not a JSON object: ")
    assert str(refused.value).endswith("(the dump is cut short)")


def test_a_malformed_field_names_its_line_and_key() -> None:
    lines = INSPECTOR_JOB[1].read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"coll_sn":3', b'"coll_sn":"3"')
    with pytest.raises(ResultFileError, match=r"^gpu-b\.log: line 3: coll_perf\.coll_sn is '3', expected int$"):
        parsed_job([("gpu-b.log", b"\n".join(lines))])


def test_ranks_that_disagree_on_a_call_are_refused() -> None:
    other = INSPECTOR_JOB[1].read_bytes().replace(b'"coll":"AllGather"', b'"coll":"AllReduce"')
    with pytest.raises(ResultFileError, match=r"line 4: call \(4,\) of communicator 0xc0ffee is all_reduce"):
        parsed_job([(INSPECTOR_JOB[0].name, INSPECTOR_JOB[0].read_bytes()), ("gpu-b.log", other)])


def test_a_dump_without_steps_is_compared_over_the_steps_given() -> None:
    # The seed MLP, data parallel on 2 ranks: one all-reduce of 971048 B per step.
    plan = plan_workload(
        PlanRequest(model="fashion-mnist-mlp", strategy="data", gpus=2), resolve_model("fashion-mnist-mlp")
    )
    observed = parsed_job(named(INSPECTOR_JOB)).observed
    with pytest.raises(ObservedComparisonError, match="records no training steps"):
        compare_plan_with_observed(plan, observed)
    comparison = compare_plan_with_observed(plan, observed, steps=3)
    assert [
        (r["status"], r["planned_size_bytes"], r["observed_size_bytes"], r["observed_per_step"])
        for r in comparison["rows"]
    ] == [
        ("size differs", 971048, 1048576, 1.0),
        ("unexpected", None, 131072, 1 / 3),
    ]
    assert comparison["predicted_pct"] == 0.0
    assert comparison["summary"] == (
        "plan predicted 0 % of the bytes per step; all-reduce of 1 MiB where the plan has 948.289 KiB; "
        "0.333333 unexpected all-gathers of 128 KiB"
    )


def test_gzipped_dumps_given_together_read_as_the_files() -> None:
    gzipped = [(f"{name}.gz", gzip.compress(content)) for name, content in named(INSPECTOR_JOB)]
    parsed = parsed_job(gzipped)
    assert parsed.samples.to_pylist() == parsed_job(named(INSPECTOR_JOB)).samples.to_pylist()


def test_one_rank_given_twice_is_refused() -> None:
    with pytest.raises(ResultFileError, match=r"^copy\.log: line 1: rank 0 recorded this call already in "):
        parsed_job([*named(INSPECTOR_JOB), ("copy.log", INSPECTOR_JOB[0].read_bytes())])


def test_a_line_that_is_not_json_is_named_without_calling_it_cut_short() -> None:
    lines = INSPECTOR_JOB[0].read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"coll":', b'"coll" ', 1)
    with pytest.raises(ResultFileError) as refused:
        parsed_job([("gpu-a.log", b"\n".join(lines))])
    assert str(refused.value) == "gpu-a.log: line 2: not a JSON object: Expecting ':' delimiter"


def test_a_size_past_64_bits_is_refused() -> None:
    huge = (
        INSPECTOR_JOB[0]
        .read_bytes()
        .replace(b'"coll_msg_size_bytes":1048576', b'"coll_msg_size_bytes":18446744073709551615', 1)
    )
    with pytest.raises(ResultFileError, match=r"^gpu-a\.log: line 1: a size of 18446744073709551615 B does not fit"):
        parsed_job([("gpu-a.log", huge)])


PROMETHEUS = [DUMPS / f"constructed-{host}-nccl_inspector_metrics.prom" for host in ("gpu-a", "gpu-b")]


def test_prometheus_snapshots_read_as_the_call_their_samples_name() -> None:
    parsed = parsed_job(named(PROMETHEUS))
    assert (parsed.source_format, parsed.ranks, parsed.hosts, parsed.warnings) == ("nccl-inspector", 2, 2, [])
    rows = parsed.samples.select(["collective", "size_bytes", "duration_us", "variant", "algbw_gbps", "busbw_gbps"])
    # 64.00KB a rank: the whole buffer is 2 × 65536 B; rank 1's 60 µs is the call's time.
    assert [tuple(row.values()) for row in rows.to_pylist()] == [
        ("all_gather", 131072, 60.0, "0xc0ffee", 2.18453, 1.09227)
    ]
    assert parsed.rank_times.to_pylist() == [
        {"sample": 0, "rank": "0", "host": "gpu-a", "duration_us": 50.0},
        {"sample": 0, "rank": "1", "host": "gpu-b", "duration_us": 60.0},
    ]
    [group] = parsed.observed["groups"]
    assert group["busbw_gbps"] == pytest.approx(1.09227, rel=1.1e-5)  # six significant digits in the file


def test_a_prometheus_line_that_is_not_a_sample_is_named() -> None:
    lines = PROMETHEUS[1].read_text().splitlines()
    lines[1] = lines[1].replace("} 1.09227", "} fast")
    with pytest.raises(ResultFileError, match=r"^gpu-b\.prom: line 2: not a Prometheus sample: "):
        parsed_job([("gpu-b.prom", "\n".join(lines).encode())])


def test_a_prometheus_call_without_its_time_is_refused() -> None:
    lines = PROMETHEUS[0].read_text().splitlines()
    with pytest.raises(ResultFileError) as refused:
        parsed_job([("gpu-a.prom", "\n".join(lines[:2]).encode())])
    assert str(refused.value) == "gpu-a.prom: line 1: no nccl_collective_exec_time_microseconds sample for this call"


def test_the_aggregated_prometheus_output_of_later_inspectors_is_refused() -> None:
    line = (
        'nccl_bus_bandwidth_gbs{version="v5.1",slurm_job_id="unknown",node="n0",gpu="GPU0",comm_name="DP",n_nodes="1",'
        'nranks="2",collective="AllReduce",message_size="1-2MB",algo_proto="Ring_ll"} 123.5\n'
    )
    with pytest.raises(ResultFileError, match=r"^agg\.prom: line 1: the aggregated Prometheus output of a later") as no:
        parsed_job([("agg.prom", line.encode())])
    # What the mode is, why it cannot be a run, and what to import instead.
    assert str(no.value).endswith(
        "per communicator name, collective and message-size range, e.g. 1-2MB, the calls since the last dump summed "
        "into one figure, with no rank, call number or exact size) holds no single call, which is what a run is made "
        "of: import its JSON dump instead (NCCL_INSPECTOR_PROM_DUMP=0, the files <hostname>-pid<pid>.log in "
        "NCCL_INSPECTOR_DUMP_DIR)"
    )


def test_a_dump_arrows_reader_refuses_reads_object_by_object_alike() -> None:
    # Blank lines between records and a NaN busbw written "nan": rows are no longer lines, and not numbers.
    plain = parsed_job(named(INSPECTOR_JOB))
    spaced = [(path.name, path.read_bytes().replace(b"\n", b"\n\n")) for path in INSPECTOR_JOB]
    assert parsed_job(spaced).samples.to_pylist() == plain.samples.to_pylist()
    assert parsed_job(spaced).rank_times.to_pylist() == plain.rank_times.to_pylist()
    nan = INSPECTOR_JOB[1].read_bytes().replace(b'"coll_busbw_gbs":1.092267', b'"coll_busbw_gbs":"nan"')
    parsed = parsed_job([(INSPECTOR_JOB[0].name, INSPECTOR_JOB[0].read_bytes()), (INSPECTOR_JOB[1].name, nan)])
    assert parsed.samples.column("busbw_gbps").to_pylist() == [10.48576, 6.990507, 5.24288, None]


def _snapshot(*calls: tuple[str, int, int, str, int, float]) -> bytes:
    """A Prometheus snapshot of GPU0 on gpu-b: per (communicator, rank, size, collective, coll_sn, µs) its time."""
    lines = [
        f'nccl_collective_exec_time_microseconds{{comm_id="{comm}",hostname="gpu-b",rank="{rank}",nranks="{size}",'
        f'n_nodes="1",gpu_device_id="GPU0",collective="{coll}",coll_sn="{sn}",message_size="4B"}} {time_us}'
        for comm, rank, size, coll, sn, time_us in calls
    ]
    return "\n".join(lines).encode()


def test_a_gpus_snapshot_without_the_worlds_call_keeps_its_world_rank() -> None:
    # Rank 1 of the 2-rank world, alone in its own communicator 0xbeef: the second snapshot has no world call.
    first = _snapshot(("0xc0ffee", 1, 2, "AllReduce", 7, 30.0), ("0xbeef", 0, 1, "Broadcast", 3, 5.0))
    second = _snapshot(("0xbeef", 0, 1, "Broadcast", 4, 6.0))
    parsed = parsed_job([("t0.prom", first), ("t1.prom", second)])
    # Calls in coll_sn order (a snapshot has no start times): 0xbeef's 3 and 4, then the world's 7.
    assert parsed.rank_times.select(["rank", "duration_us"]).to_pylist() == [
        {"rank": "1", "duration_us": 5.0},
        {"rank": "1", "duration_us": 6.0},
        {"rank": "1", "duration_us": 30.0},
    ]
    assert [c["ranks"] for c in parsed.observed["communicators"]] == [["1"], ["1"]]


def test_one_prometheus_file_uploaded_alone_is_detected_from_its_content() -> None:
    parsed = parse_result_file(PROMETHEUS[0], "metrics.prom")
    assert (parsed.source_format, parsed.ranks, parsed.hosts) == ("nccl-inspector", 2, 1)
    assert parsed.warnings == ["1 call not recorded by every rank of its communicator"]
    assert parsed.samples.select(["collective", "size_bytes", "duration_us"]).to_pylist() == [
        {"collective": "all_gather", "size_bytes": 131072, "duration_us": 50.0}
    ]


def test_an_nccl_2_30_dump_with_p2p_records_imports_its_collectives_under_the_communicator_s_name() -> None:
    """NCCL 2.30's Inspector writes p2p_perf records by default and names the communicator (header.comm_name):
    the sends and receives are skipped, each file saying on which lines, and the groups read "default_pg"."""
    parsed = parsed_job(named(INSPECTOR_2_30_JOB))
    assert (parsed.source_format, parsed.ranks, parsed.hosts) == ("nccl-inspector", 2, 2)
    rows = parsed.samples.select(["collective", "size_bytes", "duration_us", "variant"]).to_pylist()
    assert [tuple(row.values()) for row in rows] == [
        ("all_reduce", 1048576, 100.0, "default_pg (0xc0ffee)"),
        ("all_reduce", 1048576, 200.0, "default_pg (0xc0ffee)"),
    ]
    assert parsed.warnings == [
        f"{path.name}: 2 p2p_perf records skipped (line 2, 4): point-to-point sends and receives (p2p_perf, "
        "NCCL_INSPECTOR_ENABLE_P2P) and event records are not collectives of a communicator; its collectives are read"
        for path in INSPECTOR_2_30_JOB
    ]
    # Read object by object (a blank line between records) the same.
    spaced = [(name, content.replace(b"\n", b"\n\n", 1)) for name, content in named(INSPECTOR_2_30_JOB)]
    assert parsed_job(spaced).samples.to_pylist() == parsed.samples.to_pylist()


def test_a_process_that_completed_only_sends_and_receives_is_named_and_the_job_read() -> None:
    [first, second] = named(INSPECTOR_2_30_JOB)
    only_p2p = (second[0], b"".join(line + b"\n" for line in second[1].splitlines() if b"p2p_perf" in line))
    parsed = parsed_job([first, only_p2p])
    assert parsed.samples.num_rows == 2
    assert parsed.warnings[-1] == (
        "constructed-nccl-2.30-gpu-b-pid202.log: no collective in the file, only 2 p2p_perf records (skipped: "
        "point-to-point sends and receives are not collectives of a communicator)"
    )
    with pytest.raises(ResultFileError, match=r"^constructed-nccl-2\.30-gpu-b-pid202\.log: no collective in the file"):
        parsed_job([only_p2p])


def test_a_sweep_row_of_several_calls_gives_algbw_from_its_own_time() -> None:
    """Without one rank count for the run, the row's algbw is its size ÷ its mean time (1,048,576 B in 150 µs:
    6.990507 GB/s), not the mean of each call's algbw (7.573049), and busbw that × the file's factor (1 at 2 ranks),
    as nccl-tests defines them; a row of one call keeps the file's figures."""
    parsed = parsed_job(named(INSPECTOR_JOB))
    all_reduce, all_gather = summarise(parsed.samples, ranks=None)["groups"]
    assert all_reduce["reported_algbw_gbps"] == pytest.approx((10.48576 + 6.990507 + 5.24288) / 3)
    assert all_reduce["mean_us"] == 150.0
    assert all_reduce["algbw_gbps"] == pytest.approx(1048576 / 150e-6 / 1e9, rel=1e-12)
    assert all_reduce["busbw_gbps"] == pytest.approx(1048576 / 150e-6 / 1e9, rel=1e-12)
    assert all_reduce["bandwidth_source"] == "computed, the file's bus factor"
    assert all_reduce["busbw_gbps_p50"] == pytest.approx(1048576 / all_reduce["p50_us"] / 1e3, rel=1e-12)
    assert (all_gather["algbw_gbps"], all_gather["busbw_gbps"], all_gather["bandwidth_source"]) == (
        2.184533,
        1.092267,
        "reported",
    )
