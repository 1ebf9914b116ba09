"""Stragglers: the slowest rank and host, × the median rank and the time lost, from every source of
per-rank times (nccl-tests -J with -I 1 on several processes, per-flow records, our measurements)."""

import json

import pytest

from emuplan.measure.record import measurement_setup, rank_timestamps
from emuplan.measure.workload import MeasurementError
from emuplan.results import parse_result_file, summarise
from emuplan.results.analysis.run_analysis import analyse, resolve_assumptions, run_kind
from emuplan.results.analysis.stats import strip_curves
from emuplan.results.analysis.stragglers import MEASURED_BASIS, rank_times_from_timestamps, summarise_stragglers
from emuplan.results.canonical import ResultFileError
from paths import NCCL_TESTS, RESULTS

NCCL_JSON = RESULTS / "nccl-tests-json" / "constructed-4proc-2host-allreduce-I1.json"
PER_FLOW = RESULTS / "constructed-per-flow-stragglers.csv"


def summary_of(data: bytes, name: str) -> dict:
    parsed = parse_result_file(data, name)
    return summarise(
        parsed.samples,
        ranks=parsed.ranks,
        flows=parsed.flows,
        rank_times=parsed.rank_times,
        rank_unit=parsed.rank_unit,
        rank_basis=parsed.rank_basis,
    )


def test_nccl_tests_json_per_process_times_are_kept_one_row_per_process_iteration_size_and_variant():
    parsed = parse_result_file(NCCL_JSON.read_bytes(), NCCL_JSON.name)
    table = parsed.rank_times
    # 4 processes × 4 iterations × 2 sizes × 2 variants.
    assert table.num_rows == 64
    assert parsed.rank_unit == "rank"  # one GPU per process (-g 1): a process row is a rank
    first = table.slice(0, 5).to_pylist()
    assert [row["rank"] for row in first] == ["0", "0", "0", "0", "1"]
    assert {row["host"] for row in table.to_pylist() if row["rank"] in ("2", "3")} == {"gpu-b"}
    assert first[0] == {"sample": 0, "rank": "0", "host": "gpu-a", "duration_us": 100.0}
    # Each row names the sample (1 MiB in-place, iteration 2 here) whose call it timed.
    row = table.slice(3 * 4 + 16 + 2, 1).to_pylist()[0]  # process 3's rows of the second part, iteration 2
    assert row == {"sample": 4 + 2, "rank": "3", "host": "gpu-b", "duration_us": 130.0}
    sample = parsed.samples.slice(row["sample"], 1).to_pylist()[0]
    assert (sample["size_bytes"], sample["variant"], sample["iteration"], sample["duration_us"]) == (
        1048576, "in-place", 2, 130.0,
    )  # fmt: skip


def test_nccl_tests_json_names_the_slowest_rank_and_host_with_exact_figures():
    stragglers = summary_of(NCCL_JSON.read_bytes(), NCCL_JSON.name)["stragglers"]
    assert stragglers["calls"] == 16
    # Per call the median of the 4 ranks is 105, 100, 1005, 1000 µs (1 MiB out-of/in-place, 16 MiB ditto):
    # 4 × 2210 = 8840 µs in all. Rank 3 took 4 × (150 + 130 + 1200 + 1100) = 10320 µs.
    assert stragglers["slowest_rank"] == {
        "name": "3", "host": "gpu-b", "over_median": pytest.approx(10320 / 8840, rel=1e-12),
        "lost_us": pytest.approx(1480.0), "lost_per_call_us": pytest.approx(92.5), "calls": 16,
        "mean_us": pytest.approx(645.0), "median_mean_us": pytest.approx(552.5),
    }  # fmt: skip
    by_rank = {entry["name"]: entry for entry in stragglers["ranks"]}
    assert [entry["name"] for entry in stragglers["ranks"]] == ["0", "1", "2", "3"]
    assert by_rank["0"]["lost_us"] == pytest.approx(-40.0)
    assert by_rank["2"]["over_median"] == pytest.approx(8880 / 8840, rel=1e-12)
    assert by_rank["3"]["slowest_calls"] == 16 and by_rank["2"]["slowest_calls"] == 0
    assert by_rank["3"]["max_us"] == 1200.0
    # A host's time is its slowest rank's: gpu-a 100/100/1000/1000, gpu-b 150/130/1200/1100 per call; the
    # median of two hosts is their mean, 4 × (125 + 115 + 1100 + 1050) = 9560 µs.
    assert [host["name"] for host in stragglers["hosts"]] == ["gpu-a", "gpu-b"]
    assert stragglers["hosts"][1]["ranks"] == ["2", "3"]
    assert stragglers["slowest_host"] == {
        "name": "gpu-b", "over_median": pytest.approx(10320 / 9560, rel=1e-12), "lost_us": pytest.approx(760.0),
        "lost_per_call_us": pytest.approx(47.5), "calls": 16, "mean_us": pytest.approx(645.0),
        "median_mean_us": pytest.approx(597.5),
    }  # fmt: skip


def test_per_flow_records_name_the_endpoint_whose_incoming_flows_finish_last():
    stragglers = summary_of(PER_FLOW.read_bytes(), PER_FLOW.name)["stragglers"]
    assert stragglers["unit"] == "endpoint"
    # Iteration 0 starts at 0: endpoints 0, 1, 2 receive their last byte at 11, 10, 12 µs (median 11);
    # iteration 1 starts at 100: 12, 10, 30 µs (median 12).
    assert [(e["name"], e["mean_us"], e["lost_us"]) for e in stragglers["ranks"]] == [
        ("0", 11.5, 0.0), ("1", 10.0, -3.0), ("2", 21.0, 19.0),
    ]  # fmt: skip
    assert stragglers["slowest_rank"]["name"] == "2"
    assert stragglers["slowest_rank"]["over_median"] == pytest.approx(42 / 23, rel=1e-12)
    assert stragglers["hosts"] == [] and stragglers["slowest_host"] is None


def test_a_file_without_per_rank_times_has_no_straggler_view():
    log = NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"
    assert "stragglers" not in summary_of(log.read_bytes(), log.name)


def test_the_run_row_keeps_the_headline_and_not_the_per_rank_lists():
    stripped = strip_curves(summary_of(NCCL_JSON.read_bytes(), NCCL_JSON.name))["stragglers"]
    assert "ranks" not in stripped and "hosts" not in stripped
    assert (stripped["rank_count"], stripped["host_count"], stripped["slowest_rank"]["name"]) == (4, 2, "3")


def edited_report(edit) -> bytes:
    document = json.loads(NCCL_JSON.read_bytes())
    edit(document)
    return json.dumps(document).encode()


def test_per_process_times_of_the_wrong_length_name_where():
    def drop_one(document):
        document["results"][1]["in_place_per_iter"]["per_process_max_times_us"][2].pop()

    with pytest.raises(ResultFileError) as error:
        parse_result_file(edited_report(drop_one), "report.json")
    assert str(error.value) == (
        "report.json: results[1].in_place_per_iter.per_process_max_times_us[2]: 3 times where times_us has 4 iterations"
    )


def test_a_bad_per_process_time_names_its_position():
    def negative(document):
        document["results"][0]["out_of_place_per_iter"]["per_process_max_times_us"][1][3] = -5.0

    with pytest.raises(ResultFileError) as error:
        parse_result_file(edited_report(negative), "report.json")
    assert str(error.value) == (
        "report.json: results[0].out_of_place_per_iter.per_process_max_times_us[1][3]: -5.0 is not a valid time "
        "in µs: negative"
    )


def test_devices_that_do_not_divide_into_the_processes_leave_the_hosts_unknown():
    def three_devices(document):
        document["config"]["devices"].pop()

    parsed = parse_result_file(edited_report(three_devices), "report.json")
    assert parsed.rank_unit == "process"
    assert set(parsed.rank_times["host"].to_pylist()) == {""}
    assert "report.json: 3 devices do not divide into 4 processes: the per-process times have no host" in (
        parsed.warnings
    )


# (ranks=2, iterations=3 of which 1 warm-up, calls=2), nanoseconds on rank 0's clock: test_measure_timings' own.
STARTS = [[[100, 300], [1000, 1300], [2000, 2300]], [[110, 290], [1005, 1310], [2010, 2290]]]
ENDS = [[[200, 400], [1100, 1400], [2100, 2400]], [[190, 420], [1150, 1390], [2090, 2500]]]
RECORD = {
    "format": "emuplan-measurement/1", "backend": "gloo", "world_size": 2, "hosts": ["vm"], "iterations": 2,
    "warmup": 1, "scheduling": ["SCHED_OTHER"] * 2, "rank_hosts": ["vm", "vm"],
    "rank_start_ns": STARTS, "rank_end_ns": ENDS,
}  # fmt: skip


def test_measured_rank_finishes_from_the_records_timestamps():
    timestamps = rank_timestamps(RECORD, measurement_setup(RECORD, "m"), "m")
    table = rank_times_from_timestamps(*timestamps, ["vm", "vm"])
    # Each call's finish per rank: its end − the first rank's start (warm-up iteration dropped); the largest
    # is the CSV's completion time (0.150, 0.100, 0.100, 0.210 µs).
    assert table["sample"].to_pylist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert table["duration_us"].to_pylist() == pytest.approx([0.1, 0.1, 0.1, 0.11, 0.15, 0.09, 0.09, 0.21])
    stragglers = summarise_stragglers(table, basis=MEASURED_BASIS)
    # Per call the median of two ranks is their mean: 0.125 + 0.095 + 0.095 + 0.16 = 0.475 µs in all.
    assert stragglers["slowest_rank"]["name"] == "1"
    assert stragglers["slowest_rank"]["over_median"] == pytest.approx(0.54 / 0.475, rel=1e-12)
    assert stragglers["slowest_rank"]["lost_us"] == pytest.approx(0.065)
    assert [entry["slowest_calls"] for entry in stragglers["ranks"]] == [2, 2]
    assert [host["name"] for host in stragglers["hosts"]] == ["vm"] and stragglers["slowest_host"] is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("rank_end_ns", ENDS[:1], "m: field rank_end_ns: shaped (1, 3, 2), expected [rank][iteration][call] "
         "integer lists for 2 ranks × 3 iterations"),
        ("rank_start_ns", [[[1, 2], [3]], [[1, 2], [3, 4]]], "m: field rank_start_ns: expected [rank][iteration]"
         "[call] integer lists for 2 ranks × 3 iterations"),
        ("rank_end_ns", [[[0, 0]] * 3] * 2, "m: field rank_end_ns: not the same shape as rank_start_ns or before it"),
    ],
)  # fmt: skip
def test_record_timestamps_that_do_not_fit_the_record_are_refused(field, value, message):
    record = {**RECORD, field: value}
    with pytest.raises(MeasurementError) as error:
        rank_timestamps(record, measurement_setup(record, "m"), "m")
    assert str(error.value) == message


def test_several_gpus_per_process_make_process_rows_on_the_host_of_their_first_rank():
    def two_gpus_each(document):
        hosts = ["gpu-a"] * 4 + ["gpu-b"] * 4  # -g 2: process p holds ranks 2p and 2p + 1
        document["config"]["devices"] = [{"rank": rank, "hostname": host} for rank, host in enumerate(hosts)]

    parsed = parse_result_file(edited_report(two_gpus_each), "report.json")
    assert parsed.rank_unit == "process"
    hosts = {row["rank"]: row["host"] for row in parsed.rank_times.to_pylist()}
    assert hosts == {"0": "gpu-a", "1": "gpu-a", "2": "gpu-b", "3": "gpu-b"}
    assert (parsed.ranks, parsed.hosts) == (8, 2)


def test_a_report_without_per_iteration_times_is_a_size_sweep_whose_average_agrees_with_the_reports_own():
    def averages_only(document):
        for result in document["results"]:
            del result["out_of_place_per_iter"], result["in_place_per_iter"]

    parsed = parse_result_file(edited_report(averages_only), "report.json")
    assert parsed.rank_times is None and parsed.reported_avg_busbw == {"all_reduce": 16.608564}
    summary = summarise(parsed.samples, ranks=parsed.ranks, reported_avg_busbw=parsed.reported_avg_busbw)
    assumptions = resolve_assumptions(file_ranks=parsed.ranks, default_link_gbps=100.0, default_latency_us=5.0)
    analysis = analyse(summary, run_kind(summary["groups"]), assumptions)
    sweep = analysis["sweep"]["collectives"][0]
    # (10.485760 + 12.098954 + 20.971520 + 22.878022) / 4, the report's bus_bw cells.
    assert sweep["average_busbw_gbps"] == pytest.approx(16.608564, abs=1e-6)
    assert (sweep["file_average_busbw_gbps"], sweep["agrees_with_file"]) == (16.608564, True)
    assert "stragglers" not in summary
