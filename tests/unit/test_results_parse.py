"""Result parsers: real nccl-tests logs, generated per-iteration / per-flow / ns-3 files, and bad input."""

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from emuplan.results import ResultFileError, ResultFileTooLarge, parse_result_file, summarise
from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.canonical import SAMPLES_SCHEMA, samples_table
from emuplan.results.containers.gzip_input import GUNZIP_CHUNK_BYTES, gunzip_capped
from emuplan.results.formats import tabular
from emuplan.results.formats.headers import role_of
from paths import NCCL_TESTS, RESULTS, SHARED_NCCL


def read(path: Path) -> bytes:
    return path.read_bytes()


def capped(max_decompressed_bytes: int) -> ImportBudget:
    return ImportBudget(ImportLimits(max_decompressed_bytes=max_decompressed_bytes))


def test_modern_nccl_tests_log_16_ranks_on_2_hosts():
    parsed = parse_result_file(read(SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"), "a100-16rank-allreduce-2.17.txt")
    assert parsed.source_format == "nccl-tests"
    assert (parsed.ranks, parsed.hosts) == (16, 2)
    rows = parsed.samples.to_pylist()
    assert [(r["collective"], r["size_bytes"], r["variant"], r["duration_us"], r["busbw_gbps"]) for r in rows] == [
        ("all_reduce", 10737418240, "out-of-place", 90330.0, 222.88),
        ("all_reduce", 10737418240, "in-place", 91945.0, 218.96),
    ]


def test_nccl_tests_op_from_preamble_and_no_rank_lines():
    parsed = parse_result_file(read(SHARED_NCCL / "b200-allreduce-2.17.6.txt"), "log.txt")
    assert parsed.samples.num_rows == 58  # 29 sizes × out-of-place and in-place
    assert set(parsed.samples["collective"].to_pylist()) == {"all_reduce"}
    assert (parsed.ranks, parsed.hosts) == (16, None)  # ranks from the busbw/algbw factor, hosts unknown
    last = parsed.samples.slice(57).to_pylist()[0]
    assert (last["size_bytes"], last["variant"], last["duration_us"], last["algbw_gbps"]) == (
        2147483648,
        "in-place",
        5728.40,
        374.88,
    )


def test_pre_2_13_header_without_root_and_with_error_column():
    parsed = parse_result_file(
        read(SHARED_NCCL / "v100-12gpu-allreduce-pre2.13.txt"), "v100-12gpu-allreduce-pre2.13.txt"
    )
    assert (parsed.ranks, parsed.hosts) == (12, 1)
    assert parsed.samples.num_rows == 62
    first = parsed.samples.slice(0, 2).to_pylist()
    assert [(r["size_bytes"], r["variant"], r["duration_us"]) for r in first] == [
        (8, "out-of-place", 61.03),
        (8, "in-place", 61.04),
    ]
    assert set(parsed.samples["collective"].to_pylist()) == {"all_reduce"}  # redop sum, no root, count × 4 = size


def test_the_wrong_count_is_kept_per_size_and_variant_where_the_log_has_the_column():
    """nccl-tests' #wrong (stdout) and nwrong (-J, printed '0.000000'); pre-2.13 logs have an 'error' column
    instead (a maximum error, not a count), so nothing is kept for them."""
    h100 = parse_result_file(read(RESULTS / "nccl-tests" / "h100-16rank-allreduce-mpirun.txt"), "h100.txt")
    assert len(h100.wrong) == 62 and set(h100.wrong.values()) == {0}
    assert h100.wrong[("all_reduce", 8589934592, "in-place")] == 0
    report = RESULTS / "nccl-tests-json" / "constructed-4proc-2host-allreduce-I1.json"
    assert parse_result_file(read(report), report.name).wrong == {
        ("all_reduce", size, variant): 0 for size in (1048576, 16777216) for variant in ("out-of-place", "in-place")
    }
    v100 = parse_result_file(read(SHARED_NCCL / "v100-12gpu-allreduce-pre2.13.txt"), "v100.txt")
    assert v100.wrong == {}


def test_pre_2_13_broadcast_is_recognised_by_its_root_column():
    parsed = parse_result_file(read(SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"), "run.log")
    assert set(parsed.samples["collective"].to_pylist()) == {"broadcast"}
    assert parsed.samples.slice(61).to_pylist()[0]["duration_us"] == 70368.0


def test_nccl_tests_cells_are_kept_as_printed_where_a_size_is_timed_once():
    b200 = parse_result_file(read(SHARED_NCCL / "b200-allreduce-2.17.6.txt"), "b200.txt")
    # Newer nccl-tests print two decimals where they fit the column: 1625.63 µs, not 1625.6.
    assert b200.printed[("all_reduce", 536870912, "out-of-place")] == {
        "time_us": "1625.63",
        "algbw_gbps": "330.25",
        "busbw_gbps": "619.23",
    }
    h100 = parse_result_file(read(NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"), "h100.txt")
    # Older ones print one decimal from 100 µs and none from 10 ms: the float 1059.9 would not say which.
    assert [h100.printed[("all_reduce", size, "out-of-place")]["time_us"] for size in (33554432, 2147483648)] == [
        "1059.9",
        "12646",
    ]
    # A size timed twice (nccl-tests -N 2) has no one printed cell.
    text = read(SHARED_NCCL / "b200-allreduce-2.17.6.txt").decode()
    row = next(line for line in text.splitlines() if line.strip().startswith("8 "))
    repeated = parse_result_file(text.replace(row, f"{row}\n{row}").encode(), "repeated.txt")
    assert ("all_reduce", 8, "out-of-place") not in repeated.printed
    assert ("all_reduce", 16, "out-of-place") in repeated.printed


def test_truncated_nccl_tests_log_keeps_complete_rows_and_warns():
    text = read(SHARED_NCCL / "b200-allreduce-2.17.6.txt").decode()
    cut = text.index("  536870912     134217728") + 60  # in the middle of the 512 MiB row
    parsed = parse_result_file(text[:cut].encode(), "cut.txt")
    assert parsed.samples.num_rows == 2 * 26  # the 26 complete sizes, 8 B … 256 MiB
    assert any("line 32 is incomplete" in w and "truncated" in w for w in parsed.warnings)


def nccl_json_report(per_iter: bool) -> bytes:
    """A report in the shape nccl-tests' src/util.cu writes for -J (JSON_FILE_VERSION 2)."""
    result = {
        "size": 1048576,
        "count": 262144,
        "type": "float",
        "redop": "sum",
        "root": "    -1",
        "out_of_place": {"time": 100.5, "alg_bw": 10.43, "bus_bw": 15.65, "nwrong": 0.0},
        "in_place": {"time": 99.5, "alg_bw": 10.54, "bus_bw": 15.81, "nwrong": 0.0},
        "actual_iterations": 3,
        "experiment_name": "",
    }
    if per_iter:
        result["out_of_place_per_iter"] = {"times_us": [98.0, 101.0, 102.5]}
        result["in_place_per_iter"] = {"times_us": [99.0, 99.5, 100.0]}
    document = {
        "version": 2,
        "args": ["./build/all_reduce_perf", "-b", "1M", "-J", "out.json"],
        "env": [],
        "config": {
            "nthreads": 1,
            "ngpus": 1,
            "devices": [{"rank": r, "hostname": f"node{r // 2}", "device": r % 2} for r in range(4)],
        },
        "results": [result],
    }
    return json.dumps(document).encode()


def test_nccl_tests_json_per_iteration_times_become_samples():
    parsed = parse_result_file(nccl_json_report(per_iter=True), "report.json")
    assert parsed.source_format == "nccl-tests-json"
    assert (parsed.ranks, parsed.hosts) == (4, 2)
    assert parsed.samples.select(["iteration", "variant", "duration_us"]).to_pylist() == [
        {"iteration": 0, "variant": "out-of-place", "duration_us": 98.0},
        {"iteration": 1, "variant": "out-of-place", "duration_us": 101.0},
        {"iteration": 2, "variant": "out-of-place", "duration_us": 102.5},
        {"iteration": 0, "variant": "in-place", "duration_us": 99.0},
        {"iteration": 1, "variant": "in-place", "duration_us": 99.5},
        {"iteration": 2, "variant": "in-place", "duration_us": 100.0},
    ]


def test_nccl_tests_json_without_per_iteration_uses_the_mean_and_says_so():
    parsed = parse_result_file(nccl_json_report(per_iter=False), "report.json")
    assert parsed.samples["duration_us"].to_pylist() == [100.5, 99.5]
    assert any("-I 1" in w for w in parsed.warnings)


def test_generated_per_iteration_csv():
    parsed = parse_result_file(read(RESULTS / "generated-per-iteration.csv"), "generated-per-iteration.csv")
    assert parsed.source_format == "per-iteration"
    assert parsed.samples.num_rows == 2000
    first = parsed.samples.slice(0, 1).to_pylist()[0]
    assert first["iteration"] == 0 and first["size_bytes"] == 2600 and first["label"] == "generated"
    assert first["duration_us"] == pytest.approx(18342.7, rel=1e-12)
    assert parsed.samples["start_us"][1].as_py() == pytest.approx(18342.7, rel=1e-12)


@pytest.mark.parametrize(
    ("header", "cell", "expected_us"),
    [
        ("Completion Time (ms)", "1.5", 1500.0),
        ("cct_ms", "2", 2000.0),
        ("time_us", "7.25", 7.25),
        ("duration_ns", "3000", 3.0),
        ("Duration [s]", "0.5", 500000.0),
        ("LATENCY-USEC", "9", 9.0),
        ("Time (µs)", "4", 4.0),
    ],
)
def test_duration_header_aliases_and_units(header, cell, expected_us):
    data = f"iter,Data Size,{header}\n0,1024,{cell}\n".encode()
    parsed = parse_result_file(data, "f.csv", collective="all_reduce")
    assert parsed.samples["duration_us"].to_pylist() == [expected_us]
    assert parsed.samples["size_bytes"].to_pylist() == [1024]


@pytest.mark.parametrize(
    ("header", "role"),
    [
        ("trial", "iteration"),
        ("Step", "iteration"),
        ("bytes", "size"),
        ("size", "size"),
        ("Data_Size", "size"),
        ("Collective", "collective"),
        ("start_time_ns", "start"),
        ("fct_us", "duration"),
    ],
)
def test_header_roles(header, role):
    assert role_of(header).role == role


def test_units_in_cells_and_in_a_unit_column():
    in_cells = parse_result_file(b"trial,size,latency\n0,8,14 ms\n1,8,15.5 ms\n", "c.csv")
    assert in_cells.samples["duration_us"].to_pylist() == [14000.0, 15500.0]
    unit_column = parse_result_file(b"trial,size,latency,unit\n0,8,3,us\n1,8,4,us\n", "c.csv")
    assert unit_column.samples["duration_us"].to_pylist() == [3.0, 4.0]


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_other_delimiters(delimiter):
    data = delimiter.join(["Iteration", "Data Size", "Completion Time (ms)"]) + "\n" + delimiter.join(["0", "8", "1.5"])
    parsed = parse_result_file(data.encode(), "semicolons.csv")
    assert parsed.samples.select(["iteration", "size_bytes", "duration_us"]).to_pylist() == [
        {"iteration": 0, "size_bytes": 8, "duration_us": 1500.0}
    ]


def test_collective_spellings_fold_to_one_group():
    data = (
        b"trial,size,Collective,time_us\n0,8,AllReduce,1\n1,8,all_reduce,2\n2,8,ALGO_ALL_REDUCE_BIDIRECTIONAL_RING,3\n"
        b"3,8,Ring All-Gather,4\n4,8,ALGO_ALL_TO_ALL_PARALLEL,5\n5,8,my custom op ,6\n"
    )
    parsed = parse_result_file(data, "c.csv")
    assert parsed.samples["collective"].to_pylist() == [
        "all_reduce", "all_reduce", "all_reduce", "all_gather", "all_to_all", "my custom op"
    ]  # fmt: skip
    assert [g["count"] for g in summarise(parsed.samples)["groups"]] == [3, 1, 1, 1]


def test_column_map_names_odd_headers():
    data = b"n,payload,wall_s\n0,64,1.0\n1,64,2.0\n"
    parsed = parse_result_file(data, "odd.csv", column_map={"iteration": "n", "size": "payload", "duration": "wall_s"})
    assert parsed.samples["duration_us"].to_pylist() == [1e6, 2e6]  # the unit still comes from the suffix
    assert parsed.samples["size_bytes"].to_pylist() == [64, 64]


def test_gzip_is_read_and_a_bomb_is_stopped():
    csv = b"iteration,size,time_ms\n" + b"".join(b"%d,8,1.0\n" % i for i in range(1000))
    parsed = parse_result_file(gzip.compress(csv), "r.csv.gz")
    assert parsed.samples.num_rows == 1000
    bomb = gzip.compress(b"0" * 5_000_000)
    with pytest.raises(ResultFileTooLarge, match="bomb.csv.gz: decompresses to more than 1000000 bytes"):
        parse_result_file(bomb, "bomb.csv.gz", max_decompressed_bytes=1_000_000)


def test_kai_summary_feather():
    table = pa.table(
        {
            "Data Size": [971048, 6438912],
            "Collective": ["Ring All-Reduce", "Ring All-Gather"],
            "Completion Time (ms)": [14.2, 101.0],
            "Algbw (GB/s)": [0.068, 0.0637],
            "Busbw (GB/s)": [0.102, 0.0478],
            "Ideal (%)": [3.1, 2.0],
        }
    )
    sink = io.BytesIO()
    feather.write_feather(table, sink)
    parsed = parse_result_file(sink.getvalue(), "kai.feather")
    assert parsed.source_format == "kai-summary"
    columns = ["collective", "size_bytes", "duration_us", "busbw_gbps", "ideal_pct"]
    assert parsed.samples.select(columns).to_pylist() == [
        {
            "collective": "all_reduce",
            "size_bytes": 971048,
            "duration_us": 14200.0,
            "busbw_gbps": 0.102,
            "ideal_pct": 3.1,
        },
        {
            "collective": "all_gather",
            "size_bytes": 6438912,
            "duration_us": 101000.0,
            "busbw_gbps": 0.0478,
            "ideal_pct": 2.0,
        },
    ]
    group = summarise(parsed.samples)["groups"][0]
    assert (group["busbw_gbps"], group["bandwidth_source"], group["pct_of_ideal"], group["ideal_source"]) == (
        0.102,
        "reported",
        3.1,
        "reported",
    )


def test_per_flow_csv_rebuilds_iterations_as_max_end_minus_min_start():
    parsed = parse_result_file(read(RESULTS / "generated-per-flow.csv"), "generated-per-flow.csv")
    assert parsed.source_format == "per-flow"
    assert parsed.flows.num_rows == 400 and parsed.samples.num_rows == 50 and parsed.ranks == 4
    flows = parsed.flows.filter(pa.compute.equal(parsed.flows["iteration"], 0))
    start, fct = flows["start_us"].to_numpy(), flows["fct_us"].to_numpy()
    assert parsed.samples["duration_us"][0].as_py() == pytest.approx((start + fct).max() - start.min(), rel=1e-12)
    assert set(parsed.samples["collective"].to_pylist()) == {"all_reduce"}


def test_ns3_fct_txt():
    parsed = parse_result_file(read(RESULTS / "generated-fct.txt"), "fct.txt")
    assert parsed.source_format == "ns3-fct"
    assert parsed.flows.num_rows == 200
    first = parsed.flows.slice(0, 1).to_pylist()[0]
    assert (first["src"], first["dst"], first["size_bytes"], first["start_us"], first["fct_us"]) == (
        "0b000001",
        "0b010001",
        1048576,
        2000000.0,
        132.227,
    )
    assert parsed.samples.num_rows == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "e.csv: the file is empty"),
        (b"iteration,size,time_ms\n", "e.csv: the header has no data rows under it"),
        (b"a,b,c\n1,2,3\n", "e.csv: unknown format"),
        (b"iteration,size,label\n0,8,x\n", "e.csv: unknown format"),
        (b"iteration,size,time_ms\n0,8,1.0\n1,8,fast\n", "e.csv: line 3, column 'time_ms': 'fast' is not a number"),
        (
            b"iteration,size,time_ms\n0,8,1.0\n1,8,-2\n",
            "e.csv: line 3, column 'time_ms': -2.0 is not a valid time: negative",
        ),
        (
            b"iteration,size,time_ms\n0,8,nan\n",
            "e.csv: line 2, column 'time_ms': nan is not a valid time: not a number",
        ),
        (
            b"iteration,size,time_ms\n0,8,1\n1,8,inf\n",
            "e.csv: line 3, column 'time_ms': inf is not a valid time: infinite",
        ),
        (b"iteration,size,time_ms\n0,8,1\n1,8,2,9\n", "e.csv: line 3 has 4 fields where the header has 3"),
        (b"iteration,size,latency\n0,8,1 ms\n1,8,900 us\n", "e.csv: line 3, column 'latency': mixed units"),
        (b"iteration,size,latency,unit\n0,8,1,ms\n1,8,9,us\n", "e.csv: line 3, column 'unit': mixed units"),
        (b"iteration,size,latency\n0,8,1\n", "e.csv: column 'latency' has no time unit"),
        (b"iteration,size,latency\n0,8,3 fortnights\n", "line 2, column 'latency': unknown time unit 'fortnights'"),
        (b"iteration,size,time_ms\n0,8,\n", "e.csv: line 2, column 'time_ms': the cell is empty"),
        (b"iteration,time_ms,duration_us\n0,1,2\n", "several columns look like the completion time"),
        (b"\x00\x01\x02garbage\xff\xfe" * 100, "e.csv: binary content"),
        (b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"\xff garbage, not deflate" * 20, "e.csv: not a valid gzip file"),
        (gzip.compress(b"iteration,size,time_ms\n0,8,1\n")[:-12], "e.csv: the gzip stream is truncated"),
    ],
)
def test_bad_input_names_file_row_and_column(data, message):
    with pytest.raises(ResultFileError) as raised:
        parse_result_file(data, "e.csv")
    assert message in str(raised.value)


def test_many_rows_checks_are_vectorised_but_still_name_the_row():
    rows = 100_000
    durations = np.full(rows, 1.5)
    lines = [f"{i},8,{d}" for i, d in enumerate(durations)]
    lines[77_777] = "77777,8,-1"
    data = ("iteration,size,time_ms\n" + "\n".join(lines) + "\n").encode()
    with pytest.raises(ResultFileError, match="line 77779, column 'time_ms'"):
        parse_result_file(data, "big.csv")


LOCAL_NCCL = RESULTS / "nccl-tests"


def test_pre_2_13_all_gather_without_redop():
    parsed = parse_result_file(read(LOCAL_NCCL / "gtx1080-2gpu-allgather-pre2.13.txt"), "log.txt")
    assert set(parsed.samples["collective"].to_pylist()) == {"all_gather"}  # from '===begin all_gather_perf'
    assert (parsed.ranks, parsed.hosts, parsed.samples.num_rows) == (2, 1, 50)
    last = parsed.samples.slice(49).to_pylist()[0]
    assert (last["size_bytes"], last["variant"], last["duration_us"], last["busbw_gbps"]) == (
        134217728,
        "in-place",
        85704.0,
        0.78,
    )


def test_log_with_the_mpirun_command_line_before_the_preamble():
    parsed = parse_result_file(read(LOCAL_NCCL / "h100-16rank-allreduce-mpirun.txt"), "result.md")
    assert parsed.source_format == "nccl-tests"
    assert (parsed.ranks, parsed.hosts, parsed.samples.num_rows) == (16, 2, 62)
    assert set(parsed.samples["collective"].to_pylist()) == {"all_reduce"}


def test_several_tests_in_one_log_keep_their_own_collective_and_skip_nccl_debug_lines():
    all_gather = read(LOCAL_NCCL / "gtx1080-2gpu-allgather-pre2.13.txt").decode()
    all_reduce = read(LOCAL_NCCL / "h100-16rank-allreduce-mpirun.txt").decode()
    noisy = all_reduce.replace("#        (B)", "host:6899:6899 [0] NCCL INFO Launch mode Parallel\n#        (B)")
    parsed = parse_result_file((all_gather + "\n" + noisy).encode(), "two-tests.log")
    collectives = parsed.samples["collective"].to_pylist()
    assert collectives[:50] == ["all_gather"] * 50 and collectives[50:] == ["all_reduce"] * 62
    assert not any("truncated" in w for w in parsed.warnings)


MEMORY_PROBE = """
import resource, sys, zlib
from emuplan.results.canonical import ResultFileTooLarge
from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.containers.gzip_input import gunzip_capped

content_mib, cap_mib = int(sys.argv[1]), int(sys.argv[2])
compressor = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
pieces = [compressor.compress(b"0" * 2**20) for _ in range(content_mib)]
data = b"".join(pieces) + compressor.flush()
del pieces
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    content = gunzip_capped(data, "zeros.csv.gz", ImportBudget(ImportLimits(max_decompressed_bytes=cap_mib * 2**20)))
    outcome = len(content)
except ResultFileTooLarge:
    outcome = "refused"
growth_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(outcome, growth_mib)
"""


@pytest.mark.parametrize(("content_mib", "outcome"), [(192, str(192 * 2**20)), (1024, "refused")])
def test_gunzip_holds_at_most_the_cap_plus_one_chunk(content_mib: int, outcome: str) -> None:
    """Peak memory growth of decompressing, in a fresh process: the content once (not parts and their
    join: twice), and a bomb costs the cap, not its own size."""
    cap_mib = 256
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(content_mib), str(cap_mib)],
        capture_output=True,
        text=True,
        check=True,
    )
    reported, growth_mib = result.stdout.split()
    assert reported == outcome
    # Measured: 193.6 and 257.9 MiB (parts joined at the end: 382.8 and 505.4).
    assert float(growth_mib) < min(content_mib, cap_mib) + 4 * GUNZIP_CHUNK_BYTES / 2**20 + 4


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            "iteration,size,collective,time_ms,label\n0,1024,all_reduce,1.5,caf\xe9\n".encode("latin-1"),
            "m.csv: line 2, column 'label': byte 0xe9 is not UTF-8 (save the file as UTF-8)",
        ),
        (
            "iteration,size,collective,time_ms\n0,1024,all_reduce,1.5\n".encode("utf-16"),
            "m.csv: UTF-16 text; save the file as UTF-8 (or plain ASCII) and upload it again",
        ),
        (
            b"abc,def",
            "m.csv: line 1 is the only line (7 bytes, no data row below it): a result table needs a header row "
            "and at least one data row",
        ),
        (
            b"[" * 1000 + b"]" * 1000,
            "m.csv: line 1 is the only line (2000 bytes, no data row below it): a result table needs a header row "
            "and at least one data row",
        ),
        (
            ",".join(f"c{i}" for i in range(200_000)).encode(),
            "m.csv: line 1 is the only line (1488889 bytes, no data row below it): a result table needs a header "
            "row and at least one data row",
        ),
    ],
)
def test_text_that_is_not_a_table_says_what_is_wrong_and_where(data: bytes, message: str) -> None:
    with pytest.raises(ResultFileError) as refused:
        parse_result_file(data, "m.csv")
    assert str(refused.value) == message


def _same_samples(a, b) -> None:
    assert (a.source_format, a.ranks, a.warnings) == (b.source_format, b.ranks, b.warnings)
    assert a.samples.equals(b.samples)


def test_a_file_on_disk_parses_as_its_bytes_do(tmp_path):
    """Uploads are spooled to disk and parsed from there: every container gives what its bytes give."""
    csv = read(RESULTS / "generated-per-iteration.csv")
    sink = io.BytesIO()
    feather.write_feather(pa.table({"Data Size": [8, 16], "Completion Time (ms)": [1.5, 2.5]}), sink)
    cases = {
        "per-iteration.csv": csv,
        # Named as gzip but plain, and gzip named as plain: the content decides, never the name.
        "plain.csv.gz": csv,
        "compressed.csv": gzip.compress(csv),
        "summary.feather": sink.getvalue(),
        "log.txt": read(SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"),
        "fct.txt": read(RESULTS / "generated-fct.txt"),
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        _same_samples(parse_result_file(path, name), parse_result_file(data, name))
    assert parse_result_file(tmp_path / "plain.csv.gz", "plain.csv.gz").samples.num_rows == 2000


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "f.csv: the file is empty"),
        (b"iteration,size,time_ms\n", "f.csv: the header has no data rows under it"),
        (b"iteration,size,time_ms\n0,8,1\n1,8,oops\n", "f.csv: line 3, column 'time_ms': 'oops' is not a number"),
        (b"iteration,size,time_ms\n0,8,1\n1,8\n", "f.csv: line 3 has 2 fields where the header has 3"),
        (b"iteration,size,time_ms\n0,-8,1\n", "f.csv: line 2, column 'size': -8.0 is not a byte count"),
        (b"iteration,size,time_ms\n0.5,8,1\n", "f.csv: line 2, column 'iteration': 0.5 is not an iteration number"),
        (
            b"iteration,src,dst,qp,bytes,fct_us\n0,0,1,0,8,1\n0,0,1,1.5,8,1\n",
            "f.csv: line 3, column 'qp': 1.5 is not a queue pair number (a whole number ≥ 0)",
        ),
        (
            b"iteration,size,iteration,time_ms\n0,8,0,1\n",
            "f.csv: the header names 'iteration' 2 times (columns 1, 3): rename all but one",
        ),
        (b"iteration,size,label,time_ms\n0,8,caf\xe9,1\n", "f.csv: line 2, column 'label': byte 0xe9 is not UTF-8"),
        (gzip.compress(b"iteration,size,time_ms\n0,8,1\n")[:-12], "f.csv: the gzip stream is truncated"),
    ],
)
def test_a_bad_file_on_disk_names_the_line_and_column(tmp_path, data, message):
    path = tmp_path / "upload"
    path.write_bytes(data)
    with pytest.raises(ResultFileError) as from_disk:
        parse_result_file(path, "f.csv")
    with pytest.raises(ResultFileError) as from_bytes:
        parse_result_file(data, "f.csv")
    assert message in str(from_disk.value)
    assert str(from_disk.value) == str(from_bytes.value)


def test_gzip_from_an_open_file_is_read_a_chunk_at_a_time(tmp_path):
    # Decimal digits compress to ~0.42 of their size: the first member's end lies past the first chunk read.
    content = np.random.default_rng(0).integers(ord("0"), ord("9") + 1, size=4 * GUNZIP_CHUNK_BYTES, dtype=np.uint8)
    content = content.tobytes()
    first = gzip.compress(content[: 3 * GUNZIP_CHUNK_BYTES])
    assert len(first) > GUNZIP_CHUNK_BYTES
    path = tmp_path / "two-members.gz"
    path.write_bytes(first + gzip.compress(content[3 * GUNZIP_CHUNK_BYTES :]))
    with path.open("rb") as file, capped(4 * GUNZIP_CHUNK_BYTES) as budget:
        assert bytes(gunzip_capped(file, "two-members.gz", budget)) == content
    with (
        path.open("rb") as file,
        capped(4 * GUNZIP_CHUNK_BYTES - 1) as budget,
        pytest.raises(ResultFileTooLarge, match="decompresses to more than 4194303 bytes"),
    ):
        gunzip_capped(file, "two-members.gz", budget)


def per_iteration_csv(rows: int) -> bytes:
    """A per-iteration CSV of several 1 MB blocks (the size the CSV reader reads at a time)."""
    lines = "".join(f"{i},{8 << (i % 4)},AllReduce,{10 + (i % 7) * 0.25},run-{i % 3}\n" for i in range(rows))
    return b"iteration,size,collective,time_us,label\n" + lines.encode()


def test_a_csv_file_read_in_the_first_blocks_types_is_the_table_read_whole_in_one_piece_per_column(tmp_path):
    data = per_iteration_csv(80_000)
    assert len(data) > 2 * 1024**2
    path = tmp_path / "run.csv"
    path.write_bytes(data)
    streamed = tabular.read_csv(path, data[:4096], "run.csv")
    assert streamed.equals(tabular.read_csv(data, data[:4096], "run.csv"))
    assert [column.num_chunks for column in streamed.columns] == [1, 1, 1, 1, 1]
    samples = parse_result_file(path, "run.csv").samples
    assert samples.equals(parse_result_file(data, "run.csv").samples)
    assert samples["duration_us"].to_pylist()[:8] == [10.0, 10.25, 10.5, 10.75, 11.0, 11.25, 11.5, 10.0]


def test_a_column_type_that_changes_after_the_first_block_is_read_whole(tmp_path):
    # Whole microseconds for 200,000 rows (the first 1 MB block says int64), then a fraction: read a block
    # at a time this fails, so the file is read whole, where the column is float64.
    rows = "".join(f"{i},{10 + i % 5}\n" for i in range(200_000))
    data = b"iteration,time_us\n" + rows.encode() + b"200000,2.5\n"
    assert len(data) > 1024**2
    path = tmp_path / "run.csv"
    path.write_bytes(data)
    with pytest.raises(pa.ArrowInvalid, match="invalid value '2.5'"):
        tabular.read_csv_in_first_block_types(path, ",")
    parsed = parse_result_file(path, "run.csv")
    assert parsed.samples.num_rows == 200_001
    assert parsed.samples["duration_us"].to_pylist()[-3:] == [13.0, 14.0, 2.5]


def test_a_text_column_with_many_values_past_the_first_block_keeps_them_all(tmp_path):
    # Three labels in the first 1 MB block make the column a dictionary; from row 150,001 each label is new.
    # Inferring types block by block stopped there (past the dictionary's cardinality: an uncaught
    # ArrowIndexError, a 500); given the first block's types, the dictionary takes them all.
    rows = "".join(f"{i},{10 + i % 5},name{i if i > 150_000 else i % 3}\n" for i in range(200_000))
    path = tmp_path / "run.csv"
    path.write_bytes(b"iteration,time_us,label\n" + rows.encode())
    expected = ["name2", "name0", "name150001", "name150002"]
    labels = tabular.read_csv_in_first_block_types(path, ",")["label"]
    assert labels.type == pa.dictionary(pa.int32(), pa.string())
    assert labels.to_pylist()[149_999:150_003] == expected
    samples = parse_result_file(path, "run.csv").samples
    assert samples.num_rows == 200_000
    assert samples["label"].to_pylist()[149_999:150_003] == expected


def test_a_bad_row_past_the_first_block_is_named_by_its_line(tmp_path):
    rows = "".join(f"{i},{10 + i % 5}\n" for i in range(200_000))
    path = tmp_path / "run.csv"
    path.write_bytes(b"iteration,time_us\n" + rows.encode() + b"200000,3,4\n")
    with pytest.raises(pa.ArrowInvalid, match="Expected 2 columns, got 3"):
        tabular.read_csv_in_first_block_types(path, ",")
    with pytest.raises(ResultFileError, match="^run.csv: line 200002 has 3 fields where the header has 2$"):
        parse_result_file(path, "run.csv")


def test_columns_without_values_share_one_null_array_and_store_as_nulls():
    samples = samples_table(duration_us=np.array([1.5, 2.5]), collective="all_reduce")
    absent = [samples[name].chunk(0) for name in ("algbw_gbps", "busbw_gbps", "ideal_pct")]
    assert [column.null_count for column in absent] == [2, 2, 2]
    assert len({column.buffers()[1].address for column in absent}) == 1
    sink = io.BytesIO()
    pq.write_table(samples, sink)
    stored = pq.read_table(io.BytesIO(sink.getvalue()))
    assert stored.schema == SAMPLES_SCHEMA
    assert stored.to_pylist()[1] == {
        "iteration": 1, "collective": "all_reduce", "size_bytes": None, "duration_us": 2.5, "start_us": None,
        "variant": "", "label": "", "algbw_gbps": None, "busbw_gbps": None, "ideal_pct": None,
    }  # fmt: skip
