"""One memory budget for every import: Arrow IPC/Feather batches and Parquet column chunks charged from
their metadata before any is decompressed, rows capped, and one pool shared by the imports in flight."""

import gzip
import io
import os
import subprocess
import sys
import tarfile
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from emuplan.results import ResultFileError, ResultFileTooLarge, parse_result_file
from emuplan.results.budget import POOL, ROW_BYTES, ImportBudget, ImportLimits, ImportsBusy
from emuplan.results.containers import arrow_ipc as arrow_ipc_reader
from emuplan.results.containers import parquet_input
from emuplan.results.containers.gzip_input import gunzip_capped


def arrow_ipc(batch: pa.RecordBatch, count: int, *, stream: bool = False, compression: str | None = "zstd") -> bytes:
    """``count`` copies of ``batch`` as an Arrow IPC file (Feather V2) or stream, each batch compressed."""
    sink = pa.BufferOutputStream()
    opener = ipc.new_stream if stream else ipc.new_file
    with opener(sink, batch.schema, options=ipc.IpcWriteOptions(compression=compression)) as writer:
        for _ in range(count):
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def zeros(rows: int, column: str = "time_ms") -> pa.RecordBatch:
    return pa.record_batch([pa.array(np.zeros(rows))], names=[column])


def limits(**caps: int) -> ImportBudget:
    return ImportBudget(ImportLimits(**caps))


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_a_compressed_feather_within_the_caps_is_read_and_charged_what_it_decompresses_to(stream: bool) -> None:
    batch = pa.record_batch(
        [pa.array(np.arange(1000) * 0.5), pa.array(["all_reduce"] * 1000).dictionary_encode()],
        names=["time_ms", "collective"],
    )
    data = arrow_ipc(batch, 3, stream=stream)
    with limits() as budget:
        parsed = parse_result_file(data, "run.feather", budget=budget)
        assert parsed.samples["duration_us"].to_pylist() == [v * 500.0 for v in range(1000)] * 3
        assert budget.rows == 3000
        # Three batches of 8,000 bytes of doubles and 4,000 of int32 indices, and one dictionary.
        assert budget.decompressed_bytes == 3 * (8000 + 4000) + 8 + len("all_reduce")
    assert POOL.reserved == 0


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_batches_past_the_decompressed_cap_are_refused_before_any_is_decompressed(stream: bool) -> None:
    # 20 batches of 100,000 zero doubles: 16 MB, ~2 KB compressed. The cap lets 5 batches through.
    data = arrow_ipc(zeros(100_000), 20, stream=stream)
    assert len(data) < 20_000
    allocated = pa.total_allocated_bytes()
    with (
        limits(max_decompressed_bytes=5 * 800_000) as budget,
        pytest.raises(ResultFileTooLarge, match=r"^bomb.feather: decompresses to more than 4000000 bytes"),
    ):
        parse_result_file(data, "bomb.feather", budget=budget)
    assert budget.decompressed_bytes == 5 * 800_000
    assert pa.total_allocated_bytes() == allocated  # nothing was decompressed


def test_rows_past_the_row_cap_are_refused_naming_the_setting() -> None:
    data = arrow_ipc(zeros(1000), 2)
    with limits(max_rows=1999) as budget, pytest.raises(ResultFileTooLarge) as refused:
        parse_result_file(data, "rows.feather", budget=budget)
    assert str(refused.value) == (
        f"rows.feather: more than 1999 rows (EMUPLAN_MAX_IMPORT_ROWS); an import holds about {ROW_BYTES} bytes a row"
    )
    with limits(max_rows=2000) as budget:
        assert parse_result_file(data, "rows.feather", budget=budget).samples.num_rows == 2000


def test_a_csv_is_charged_its_text_and_its_rows() -> None:
    csv = b"iteration,size,time_ms\n" + b"".join(b"%d,8,1.0\n" % i for i in range(1000))
    with limits() as budget:
        parse_result_file(gzip.compress(csv), "r.csv.gz", budget=budget)
        assert (budget.decompressed_bytes, budget.rows) == (len(csv), 1000)
        assert budget.held_bytes == 2 * len(csv) + 1000 * ROW_BYTES  # the content, its table, the rows
    with limits(max_rows=999) as budget, pytest.raises(ResultFileTooLarge, match="r.csv: more than 999 rows"):
        parse_result_file(csv, "r.csv", budget=budget)


def test_an_ns3_fct_file_counts_its_flows_as_rows() -> None:
    fct = b"".join(b"0b000101 0b000201 10000 100 %d 2000000000 %d 12000\n" % (4096 + i, 15000 + i) for i in range(100))
    with limits(max_rows=99) as budget, pytest.raises(ResultFileTooLarge, match="^fct.txt: more than 99 rows"):
        parse_result_file(fct, "fct.txt", budget=budget)
    with limits(max_rows=100) as budget:
        assert parse_result_file(fct, "fct.txt", budget=budget).flows.num_rows == 100


def test_a_footer_pointing_outside_the_file_is_a_bad_file() -> None:
    data = bytearray(arrow_ipc(zeros(10), 1))
    # The footer's length, just before the closing magic, says it is longer than the file.
    data[-10:-6] = (len(data) * 2).to_bytes(4, "little")
    with pytest.raises(ResultFileError, match=r"^f.feather: not a readable Feather/Arrow file"):
        parse_result_file(bytes(data), "f.feather")


# The child reads its own high-water mark (VmHWM, reset after its imports): getrusage's ru_maxrss of a child starts
# from the test process's RSS when it was forked (Linux keeps it across execve).
AUDIT_BOMB = """
import sys, time
from pathlib import Path
from emuplan.results import ResultFileError, parse_result_file

def status(field):
    with open("/proc/self/status") as lines:
        return int(next(line for line in lines if line.startswith(field + ":")).split()[1]) * 1024

path = Path(sys.argv[1])
with open("/proc/self/clear_refs", "w") as clear_refs:
    clear_refs.write("5")
before = status("VmRSS")
start = time.perf_counter()
try:
    outcome = parse_result_file(path, path.name).samples.num_rows
except ResultFileError as error:
    outcome = str(error)
seconds = time.perf_counter() - start
print(outcome)
print(seconds, (status("VmHWM") - before) / 2**20)
"""


def test_the_audits_feather_bomb_is_refused_at_once_in_bounded_memory(tmp_path: Path) -> None:
    """95 KB of zstd holding 15 batches of 25,000,000 zero doubles (3 GB) took the server to 23 GB."""
    path = tmp_path / "bomb.feather"
    path.write_bytes(arrow_ipc(zeros(25_000_000), 15))
    assert 90_000 < path.stat().st_size < 100_000
    outcome, seconds, growth_mib = peak_growth(path)
    assert outcome.startswith("bomb.feather: more than 20000000 rows (EMUPLAN_MAX_IMPORT_ROWS)")
    # Measured: 0.4 ms and 0 MiB (the metadata of the first batch is all that is read).
    assert seconds < 1.0
    assert growth_mib < 20


def peak_growth(path: Path) -> tuple[str, float, float]:
    """What importing ``path`` gives (its sample count, or why it was refused), its seconds and how far the peak
    RSS grew (MiB), measured in a fresh process."""
    result = subprocess.run(
        [sys.executable, "-c", AUDIT_BOMB, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    outcome, figures = result.stdout.strip().split("\n")
    seconds, growth_mib = map(float, figures.split())
    return outcome, seconds, growth_mib


def test_many_small_batches_are_joined_as_they_are_read(tmp_path: Path) -> None:
    """Arrow keeps ~800 bytes for each batch read, whatever its rows: 600,000 one-row batches (105 MB) took an
    import 636 MB above its start while the budget counted 50 MB. Joined as they come, it keeps a thousand."""
    path = tmp_path / "tiny-batches.feather"
    batch = pa.record_batch([pa.array(np.arange(1.0, 2.0))], names=["time_ms"])
    with ipc.new_file(str(path), batch.schema) as writer:
        for _ in range(100_000):
            writer.write_batch(batch)
    outcome, _, growth_mib = peak_growth(path)
    assert outcome == "100000"
    # Measured: 23 MiB joined, 126 MiB with every batch kept.
    assert growth_mib < 40
    with limits() as budget:
        parsed = parse_result_file(path, path.name, budget=budget)
    assert parsed.samples["duration_us"].to_pylist() == [1000.0] * 100_000


def test_a_gzip_tar_is_opened_where_it_was_decompressed_not_copied(tmp_path: Path) -> None:
    """A .tar.gz's content (charged to the gzip cap) was copied whole before its members were read: three times
    a 100 MB member in memory (the content, its copy, the member), where the cap counted one."""
    member_bytes = 100_000_000
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        info = tarfile.TarInfo("dump/rank0.log")
        info.size = member_bytes
        tar.addfile(info, io.BytesIO(b" " * member_bytes))
    path = tmp_path / "job.tar.gz"
    path.write_bytes(gzip.compress(archive.getvalue(), 1))
    outcome, _, growth_mib = peak_growth(path)
    assert outcome == "job.tar.gz/dump/rank0.log: neither an NCCL Inspector dump nor a PyTorch profiler trace"
    # Measured: 191 MiB (the content and the member), 286 MiB copied.
    assert growth_mib < 2.5 * member_bytes / 2**20


def test_a_feather_of_too_many_batches_is_refused_before_their_metadata_hold_the_server(monkeypatch) -> None:
    monkeypatch.setattr(arrow_ipc_reader, "MAX_BATCHES", 1000)
    data = arrow_ipc(zeros(1), 1001, compression=None)
    with pytest.raises(ResultFileTooLarge) as refused:
        parse_result_file(data, "batches.feather")
    assert str(refused.value) == "batches.feather: more than 1000 batches; write it in larger batches"
    assert parse_result_file(arrow_ipc(zeros(1), 1000, compression=None), "b.feather").samples.num_rows == 1000


def test_gzip_imports_in_flight_share_one_pool() -> None:
    """Two gzip bombs at once took the server to 4.65 GB, each under its own cap: the second one is now
    turned away (503) while the first holds the pool, and the pool is whole again once both are done."""
    content = b"0" * 3_000_000
    compressed = gzip.compress(content)
    shared = dict(max_decompressed_bytes=10_000_000, pool_bytes=4_000_000)
    read_end, write_end = os.pipe()
    first_outcome: dict[str, object] = {}

    def first_import() -> None:
        # Unbuffered: each read returns what the pipe holds instead of waiting for a whole chunk.
        with os.fdopen(read_end, "rb", buffering=0) as piped, limits(**shared) as budget:
            first_outcome["content"] = len(gunzip_capped(piped, "first.csv.gz", budget))

    first = threading.Thread(target=first_import)
    first.start()
    half = len(compressed) // 2
    writer = os.fdopen(write_end, "wb")
    writer.write(compressed[:half])
    writer.flush()
    held = len(zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(compressed[:half]))
    assert held > 1_000_000
    deadline = time.monotonic() + 10
    while POOL.reserved < held and time.monotonic() < deadline:
        time.sleep(0.01)
    assert POOL.reserved == held
    with limits(**shared) as budget, pytest.raises(ImportsBusy) as busy:
        gunzip_capped(compressed, "second.csv.gz", budget)
    assert str(busy.value) == (
        "second.csv.gz: the imports in progress hold the 4000000 bytes of memory all imports share "
        "(EMUPLAN_IMPORT_MEMORY_BYTES); try again in 10 s"
    )
    assert busy.value.retry_after_s == 10
    assert POOL.reserved == held  # the refused import let go of what it had
    writer.write(compressed[half:])
    writer.close()
    first.join()
    assert first_outcome == {"content": 3_000_000}
    assert POOL.reserved == 0
    # Alone, the second one fits.
    with limits(**shared) as budget:
        assert len(gunzip_capped(compressed, "second.csv.gz", budget)) == 3_000_000


def test_an_import_larger_than_the_whole_pool_is_too_large_not_busy() -> None:
    with limits(pool_bytes=1_000_000) as budget, pytest.raises(ResultFileTooLarge) as refused:
        gunzip_capped(gzip.compress(b"0" * 3_000_000), "big.csv.gz", budget)
    assert str(refused.value) == (
        "big.csv.gz: importing it takes more than the 1000000 bytes of memory all imports share "
        "(EMUPLAN_IMPORT_MEMORY_BYTES)"
    )
    assert POOL.reserved == 0


def parquet_of(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def test_a_runs_own_parquet_download_imports_as_the_samples_it_holds() -> None:
    csv = b"iteration,size,time_us,label,collective\n0,8,1.5,warm,all_reduce\n1,8,2.5,,all_reduce\n"
    samples = parse_result_file(csv, "r.csv").samples
    with limits() as budget:
        parsed = parse_result_file(parquet_of(samples), "run-1-samples.parquet", budget=budget)
        assert parsed.samples.equals(samples)
        assert budget.rows == 2


def test_a_parquet_bomb_is_refused_from_its_footer_before_any_page_is_read() -> None:
    # 2 M zero doubles: 16 MB decoded, ~2 KB stored.
    data = parquet_of(pa.table({"time_ms": np.zeros(2_000_000)}))
    assert len(data) < 20_000
    with (
        limits(max_decompressed_bytes=10_000_000) as budget,
        pytest.raises(ResultFileTooLarge, match=r"^zeros.parquet: decompresses to more than 10000000 bytes"),
    ):
        parse_result_file(data, "zeros.parquet", budget=budget)
    assert budget.decompressed_bytes == 0  # refused on the footer's figures
    with limits(max_rows=1_999_999) as budget, pytest.raises(ResultFileTooLarge, match="more than 1999999 rows"):
        parse_result_file(data, "zeros.parquet", budget=budget)
    with limits() as budget:
        assert parse_result_file(data, "zeros.parquet", budget=budget).samples.num_rows == 2_000_000
        # The doubles as the footer declares them, then the validity bitmap Arrow reads with them, as it came.
        assert budget.decompressed_bytes == 16_000_000 + 2_000_000 // 8


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value >> 7 else 0))
        value >>= 7
        if not value:
            return bytes(out)


def understated_parquet(rows: int) -> bytes:
    """``rows`` zero doubles in one zstd page, its footer rewritten to say 10 rows of 80 bytes: Thrift's compact
    integers (zigzag varints) replaced in place by ones of the same length, padded with continuation bytes."""
    sink = io.BytesIO()
    pq.write_table(
        pa.table({"time_ms": np.zeros(rows)}), sink, compression="zstd", use_dictionary=False, write_statistics=False,
        data_page_size=2**30, row_group_size=rows, max_rows_per_page=rows,
    )  # fmt: skip
    data = bytearray(sink.getvalue())
    chunk = pq.ParquetFile(pa.BufferReader(bytes(data))).metadata.row_group(0).column(0)
    footer_end = len(data) - 8
    footer_start = footer_end - int.from_bytes(data[footer_end : footer_end + 4], "little")
    footer = bytes(data[footer_start:footer_end])
    for value, stated in ((rows, 10), (chunk.total_uncompressed_size, 80)):
        actual = varint(value << 1)
        padded = bytearray(varint(stated << 1))
        padded[-1] |= 0x80
        footer = footer.replace(actual, bytes(padded) + b"\x80" * (len(actual) - len(padded) - 1) + b"\x00")
    data[footer_start:footer_end] = footer
    return bytes(data)


def test_a_parquet_footer_that_understates_its_pages_is_charged_what_the_page_headers_say() -> None:
    """Arrow allocates what a page's header says and decompresses into it: a footer saying 10 rows of 80 bytes
    got a 100 MB page of zeros (3.5 KB stored) decompressed under a 50 MB cap, and the file imported as 10 rows."""
    data = understated_parquet(12_500_000)
    footer = pq.ParquetFile(pa.BufferReader(data)).metadata
    assert (len(data) < 5000, footer.num_rows, footer.row_group(0).column(0).total_uncompressed_size) == (True, 10, 80)
    allocated = pa.total_allocated_bytes()
    with (
        limits(max_decompressed_bytes=50_000_000) as budget,
        pytest.raises(ResultFileTooLarge, match=r"^liar.parquet: decompresses to more than 50000000 bytes"),
    ):
        parse_result_file(data, "liar.parquet", budget=budget)
    assert pa.total_allocated_bytes() == allocated  # refused from the page header, the page never read


def test_a_parquet_file_of_too_many_pages_is_refused_before_their_headers_hold_the_server(monkeypatch) -> None:
    # Each header is read in Python (~9 µs): a file of 33-byte one-value pages could hold 8 M of them in 256 MiB.
    monkeypatch.setattr(parquet_input, "MAX_PAGES", 1000)
    sink = io.BytesIO()
    pq.write_table(
        pa.table({"time_ms": np.arange(1001.0)}), sink, data_page_size=1, write_batch_size=1, max_rows_per_page=1,
        use_dictionary=False, write_statistics=False,
    )  # fmt: skip
    with pytest.raises(ResultFileTooLarge) as refused:
        parse_result_file(sink.getvalue(), "pages.parquet")
    assert str(refused.value) == "pages.parquet: more than 1000 pages; write it with larger pages"
    # The same rows in the writer's own pages are read.
    assert parse_result_file(parquet_of(pa.table({"time_ms": np.arange(1001.0)})), "p.parquet").samples.num_rows == 1001


def test_a_page_header_that_cannot_be_read_is_a_bad_file() -> None:
    data = bytearray(parquet_of(pa.table({"time_ms": np.zeros(10)})))
    data[4] = 0xFF  # the first page header's first field: a Thrift type that does not exist
    with pytest.raises(
        ResultFileError, match=r"^f.parquet: not a readable Parquet file \(a page header holds an unknown"
    ):
        parse_result_file(bytes(data), "f.parquet")


def test_a_json_report_is_charged_what_its_python_objects_can_take_before_it_is_parsed() -> None:
    # An array of empty objects takes 25 bytes of Python objects a byte: 57 KB of gzip (60 MB of JSON) parsed
    # into 1.38 GB.
    report = b'{"runs": [' + b"{}," * 1_000_000 + b"{}]}"
    with limits(pool_bytes=20_000_000) as budget, pytest.raises(ResultFileTooLarge) as refused:
        parse_result_file(gzip.compress(report), "report.json.gz", budget=budget)
    assert str(refused.value) == (
        "report.json.gz: importing it takes more than the 20000000 bytes of memory all imports share "
        "(EMUPLAN_IMPORT_MEMORY_BYTES)"
    )
    assert budget.held_bytes == len(report) * (1 + 1 + 25)  # its content, its text, then the objects it refused
