"""results/streaming/streamed.py: a huge CSV read a block at a time and summarised from DuckDB's sort gives the summary
the in-memory import gives, exactly for every order statistic, and names a bad cell as it does."""

import gc
import gzip
import io
import itertools
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from emuplan.results.budget import POOL, ImportBudget, ImportLimits
from emuplan.results.canonical import ResultFileError, ResultFileTooLarge
from emuplan.results.streaming import streamed
from fixtures.generate_results import per_flow_table, per_iteration_table, write_csv
from fixtures.summaries import STREAM_ALL, assert_same, in_memory_summary, refused_alike, streamed_summary


# 64 KiB blocks, 5,000-row fetches, row groups of 500 flows and stragglers' ranges of 1,000 flows, so that a few
# thousand rows span many of each.
@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(streamed, "MAX_BLOCK_BYTES", 64 << 10)
    monkeypatch.setattr(streamed, "FETCH_ROWS", 5000)
    monkeypatch.setattr(streamed, "READ_ROWS", 500)
    monkeypatch.setattr(streamed, "ITERATION_RANGE_ROWS", 1000)


def planted_per_iteration(path: Path, rows: int = 40_000) -> tuple[pa.Table, list[int]]:
    """The generator's pipeline run (four sizes, 0.1 % of trials 4–12 s) with five more spikes planted, one a
    single 60 s trial: the largest of its size and of the file."""
    table = per_iteration_table(rows, seed=7)
    times = table["Completion Time (ms)"].to_numpy().copy()
    planted = [11, 9_999, 20_001, 33_333, rows - 2]
    times[planted] = [60_000.0, 15_000.0, 15_000.0, 25_000.0, 13_000.0]
    table = table.set_column(3, "Completion Time (ms)", pa.array(times))
    write_csv(table, path)
    return table, planted


def test_per_iteration_summary_equals_the_in_memory_one(tmp_path):
    path = tmp_path / "pipeline.csv"
    planted_per_iteration(path)
    got, result = streamed_summary(path)
    assert result.row_counts == {"samples": 40_000}
    assert_same(in_memory_summary(path), got)


def test_percentiles_and_tails_are_numpy_nearest_ranks_with_every_planted_spike(tmp_path):
    path = tmp_path / "pipeline.csv"
    table, planted = planted_per_iteration(path)
    summary, _ = streamed_summary(path)
    times_us = table["Completion Time (ms)"].to_numpy() * 1000.0
    sizes = table["Data Size"].to_numpy()
    for group, ecdf in zip(summary["groups"], summary["ecdf"], strict=True):
        ordered = np.sort(times_us[sizes == group["size_bytes"]])
        count = len(ordered)
        for name, percentile in (("p50", 50), ("p99", 99), ("p99_9", 99.9)):
            assert group[f"{name}_us"] == ordered[math.ceil(percentile / 100 * count) - 1]
        assert (group["min_us"], group["max_us"], group["count"]) == (ordered[0], ordered[-1], count)
        # The grid ends on the exact tail: the 1,000 slowest ranks of each group are all in it.
        assert ecdf["x"][-1] == round(ordered[-1], 3) and ecdf["p"][-1] == 1.0
    for row in planted:
        group = next(g for g in summary["groups"] if g["size_bytes"] == sizes[row])
        assert times_us[row] in [trial["duration_us"] for trial in group["slowest"]]
    assert summary["overall"]["max_us"] == 60_000_000.0
    assert summary["overall_ecdf"]["x"][-1] == 60_000_000.0


def test_per_flow_summary_with_flows_and_stragglers_equals_the_in_memory_one(tmp_path):
    path = tmp_path / "flows.csv"
    table = per_flow_table(iterations=400, ranks=8, qps=2, seed=3)
    end = table["end_us"].to_numpy().copy()
    end[1234] += 50_000.0  # one flow of iteration 77 to rank 2 arrives 50 ms late
    write_csv(table.set_column(7, "end_us", pa.array(end)), path)
    got, result = streamed_summary(path)
    assert (result.row_counts, result.ranks) == ({"flows": 6400, "samples": 400}, 8)
    expected = in_memory_summary(path)
    assert_same(expected, got)
    assert got["stragglers"]["slowest_rank"]["name"] == "2"
    assert got["flows"]["max_us"] == pytest.approx(end[1234] - table["start_us"][1234].as_py())


def test_stragglers_group_ranges_of_iterations_in_order_or_all_at_once_and_agree_with_memory(tmp_path):
    """A file written iteration by iteration is grouped a range of row groups at a time (every iteration in one
    range, the ranges in order); the same flows shuffled cannot be, and are grouped at once. Both equal the
    in-memory summary."""
    table = per_flow_table(iterations=400, ranks=8, qps=2, seed=3)
    ordered, shuffled = tmp_path / "flows.csv", tmp_path / "shuffled.csv"
    write_csv(table, ordered)
    write_csv(table.take(np.random.default_rng(5).permutation(table.num_rows)), shuffled)
    for path in (ordered, shuffled):
        with (
            ImportBudget(STREAM_ALL) as budget,
            streamed.streamed_result_file(path, path.name, None, None, None, budget) as result,
        ):
            ranges = streamed._iteration_ranges(result.tables["flows"], streamed.ITERATION_RANGE_ROWS)
            assert_same(in_memory_summary(path), streamed.summarise_streamed(result))
        if path is ordered:
            # 6,400 flows (16 an iteration) in row groups of at most 500, a range cut once it holds 1,000: every
            # range but the last holds 1,000 flows or more, 62.5 iterations, and the ranges run from 0 to 399.
            widths = [high - low + 1 for low, high in ranges]
            assert len(ranges) > 2 and all(width >= 62 for width in widths[:-1]) and sum(widths) == 400
            assert ranges[0][0] == 0 and all(high + 1 == low for (_, high), (low, _) in itertools.pairwise(ranges))
        else:
            assert ranges == [streamed.EVERY_ITERATION]


def test_a_bad_cell_far_down_is_named_by_line_and_column_as_in_memory(tmp_path):
    path = tmp_path / "pipeline.csv"
    planted_per_iteration(path)
    assert refused_both_ways(path, 30_000, 3, "fast") == (
        "pipeline.csv: line 30001, column 'Completion Time (ms)': 'fast' is not a number"
    )


def refused_both_ways(path: Path, row: int, column: int, cell: str) -> str:
    """The message both imports give once data row ``row``'s ``column`` reads ``cell`` (they must agree)."""
    lines = path.read_text().splitlines()
    cells = lines[row].split(",")
    cells[column] = cell
    lines[row] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    return refused_alike(path)


def test_a_row_with_too_many_fields_far_down_is_named_by_its_line(tmp_path):
    path = tmp_path / "pipeline.csv"
    planted_per_iteration(path)
    lines = path.read_text().splitlines()
    lines[25_000] += ",7"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultFileError, match=r"^pipeline.csv: line 25001 has 7 fields where the header has 6$"):
        streamed_summary(path)


def test_a_column_that_turns_fractional_far_down_is_read_again_wider(tmp_path):
    """Whole sizes for 30,000 rows, then '2600.0': Arrow's first blocks say int64; read again as float64, as
    the whole-file reader reads it, the sizes are still whole byte counts."""
    path = tmp_path / "pipeline.csv"
    planted_per_iteration(path)
    lines = path.read_text().splitlines()
    cells = lines[30_000].split(",")
    cells[1] += ".0"
    lines[30_000] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    got, _ = streamed_summary(path)
    assert_same(in_memory_summary(path), got)


def test_a_group_too_large_for_memory_keeps_every_spike_in_its_delay_series(tmp_path, monkeypatch):
    monkeypatch.setattr(streamed, "DELAY_ROWS_IN_MEMORY", 1000)
    path = tmp_path / "pipeline.csv"
    table, planted = planted_per_iteration(path)
    summary, _ = streamed_summary(path)
    times_us = table["Completion Time (ms)"].to_numpy() * 1000.0
    iterations = table["Iteration"].to_numpy()
    sizes = table["Data Size"].to_numpy()
    for row in planted:
        index = next(i for i, g in enumerate(summary["groups"]) if g["size_bytes"] == sizes[row])
        delay = summary["delay"][index]
        assert round(times_us[row], 3) in delay["y"]
        assert delay["x"][delay["y"].index(round(times_us[row], 3))] == iterations[row]
        assert len(delay["x"]) <= 2000


def test_small_files_gzip_and_other_formats_stay_in_memory(tmp_path):
    budget = ImportBudget(ImportLimits(streamed_above_bytes=1000))
    small = tmp_path / "small.csv"
    pacsv.write_csv(per_iteration_table(10), small)
    large = tmp_path / "large.csv"
    write_csv(per_iteration_table(1000), large)
    log = tmp_path / "all_reduce.log"
    log.write_text("# nccl-tests\n" * 200)
    assert [streamed.streams(path, None, budget) for path in (small, large, log)] == [False, True, False]
    assert not streamed.streams(large, "kai-summary", budget)
    assert not streamed.streams(large.read_bytes(), None, budget)


CONTAINERS = ["csv.gz", "feather", "parquet"]


def written_as(table: pa.Table, path: Path, container: str) -> Path:
    """``table`` as a gzip CSV, a Feather file compressed with zstd or an Arrow IPC stream with LZ4 (batches of
    4,096 rows) or a Parquet file (row groups of 10,000 rows) at ``path``, its name ending in the container's."""
    path = path.with_name(f"{path.stem}.{container}")
    if container == "csv.gz":
        text = io.BytesIO()
        pacsv.write_csv(table, text, write_options=pacsv.WriteOptions(quoting_style="none"))
        path.write_bytes(gzip.compress(text.getvalue()))
    elif container == "feather":
        feather.write_feather(table, path, compression="zstd", chunksize=4096)
    elif container == "arrows":
        with ipc.new_stream(str(path), table.schema, options=ipc.IpcWriteOptions(compression="lz4")) as stream:
            for batch in table.to_batches(max_chunksize=4096):
                stream.write_batch(batch)
    else:
        pq.write_table(table, path, row_group_size=10_000)
    return path


@pytest.mark.parametrize("container", [*CONTAINERS, "arrows"])
def test_gzip_feather_and_parquet_summaries_equal_the_in_memory_ones(tmp_path, container):
    table, planted = planted_per_iteration(tmp_path / "pipeline.csv")
    path = written_as(table, tmp_path / "pipeline", container)
    # Streamed when the file or its content once decompressed passes the threshold.
    decompressed = len((tmp_path / "pipeline.csv").read_bytes()) if container == "csv.gz" else table.nbytes
    assert path.stat().st_size < decompressed // 2
    with ImportBudget(ImportLimits(streamed_above_bytes=path.stat().st_size)) as budget:
        assert streamed.streams(path, None, budget)
    with ImportBudget(ImportLimits(streamed_above_bytes=decompressed + 1000)) as budget:
        assert not streamed.streams(path, None, budget)
    got, result = streamed_summary(path)
    assert result.row_counts == {"samples": 40_000}
    assert_same(in_memory_summary(path), got)
    assert got["overall"]["max_us"] == 60_000_000.0


def test_a_gzip_csv_without_an_iteration_column_numbers_its_rows_across_blocks_as_in_memory(tmp_path):
    table, _ = planted_per_iteration(tmp_path / "pipeline.csv")
    path = written_as(table.drop_columns(["Iteration"]), tmp_path / "pipeline", "csv.gz")
    got, result = streamed_summary(path)
    assert result.row_counts == {"samples": 40_000}
    assert_same(in_memory_summary(path), got)


@pytest.mark.parametrize("container", CONTAINERS)
def test_per_flow_gzip_feather_and_parquet_summaries_equal_the_in_memory_ones(tmp_path, container):
    path = written_as(per_flow_table(iterations=400, ranks=8, qps=2, seed=3), tmp_path / "flows", container)
    got, result = streamed_summary(path)
    assert (result.row_counts, result.ranks) == ({"flows": 6400, "samples": 400}, 8)
    assert_same(in_memory_summary(path), got)


@pytest.mark.parametrize(
    ("container", "where"), [("csv.gz", "line 30001"), ("feather", "row 30000"), ("parquet", "row 30000")]
)
def test_a_bad_cell_far_down_a_container_is_named_as_in_memory(tmp_path, container, where):
    table, _ = planted_per_iteration(tmp_path / "pipeline.csv")
    times = table["Completion Time (ms)"].to_pylist()
    times[29_999] = "fast"
    table = table.set_column(3, "Completion Time (ms)", pa.array([str(value) for value in times]))
    path = written_as(table, tmp_path / "pipeline", container)
    assert refused_alike(path) == f"{path.name}: {where}, column 'Completion Time (ms)': 'fast' is not a number"


def bomb(rows: int) -> pa.Table:
    """``rows`` identical trials: a few KB compressed, whatever ``rows``."""
    collectives = pa.DictionaryArray.from_arrays(np.zeros(rows, dtype=np.int32), ["all_reduce"])
    return pa.table({"size": np.full(rows, 1024), "time_ms": np.ones(rows), "collective": collectives})


@pytest.mark.parametrize("container", CONTAINERS)
def test_a_compressed_bomb_streamed_is_still_refused_at_the_decompressed_cap(tmp_path, container):
    path = written_as(bomb(2_000_000), tmp_path / "bomb", container)
    assert path.stat().st_size < 1_000_000  # a tenth of the cap it passes
    caps = ImportLimits(max_decompressed_bytes=10_000_000, streamed_above_bytes=0, streamed_memory_bytes=256 << 20)
    gc.collect()  # the bomb's table (or an earlier test's) freed now, not by a collection inside the import
    allocated = pa.total_allocated_bytes()
    with ImportBudget(caps) as budget, pytest.raises(ResultFileTooLarge) as refused:
        assert streamed.streams(path, None, budget)
        with streamed.streamed_result_file(path, path.name, None, None, None, budget):
            pass
    assert str(refused.value).startswith(f"{path.name}: decompresses to more than 10000000 bytes")
    if container != "csv.gz":  # refused from the metadata, before anything is decompressed
        assert pa.total_allocated_bytes() == allocated
    assert POOL.reserved == 0


def test_a_feather_batch_too_large_to_decompress_in_the_streamed_memory_is_refused_before_it_is(tmp_path):
    path = tmp_path / "one-batch.feather"
    feather.write_feather(bomb(2_000_000), path, compression="zstd", chunksize=2_000_000)
    caps = ImportLimits(streamed_above_bytes=0, streamed_memory_bytes=64 << 20)
    with (
        ImportBudget(caps) as budget,
        pytest.raises(ResultFileTooLarge) as refused,
        streamed.streamed_result_file(path, path.name, None, None, None, budget),
    ):
        pass
    assert str(refused.value) == (
        "one-batch.feather: a record batch decompresses to 40000000 bytes, more than the 8388608 a streamed import "
        "reads at a time (EMUPLAN_STREAMED_IMPORT_MEMORY_BYTES): write it in smaller batches"
    )


@pytest.mark.parametrize(
    ("column", "cell", "problem"),
    [
        (7, "late", "column 'end_us': 'late' is not a number"),
        (6, "", "column 'start_us': the cell is empty"),
        (7, "1.5", "column 'end_us': -3740009.053 is not a valid time: negative"),
        (0, "3.5", "column 'iteration': 3.5 is not an iteration number (a whole number below 2^63)"),
        (5, "-5", "column 'bytes': -5.0 is not a byte count"),
        (3, "1.5", "column 'qp': 1.5 is not a queue pair number (a whole number ≥ 0)"),
    ],
)
def test_a_bad_flow_far_down_is_named_by_line_and_column_as_in_memory(tmp_path, column, cell, problem):
    """DuckDB's CSV reader reads a per-flow CSV and refuses the bad cell; the block reader then names it."""
    path = tmp_path / "flows.csv"
    write_csv(per_flow_table(iterations=400, ranks=8, qps=2, seed=3), path)
    assert refused_both_ways(path, 3000, column, cell) == f"flows.csv: line 3001, {problem}"


def test_a_flow_row_with_too_many_fields_far_down_is_named_by_its_line(tmp_path):
    path = tmp_path / "flows.csv"
    write_csv(per_flow_table(iterations=400, ranks=8, qps=2, seed=3), path)
    lines = path.read_text().splitlines()
    lines[3000] += ",7"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ResultFileError, match=r"^flows.csv: line 3001 has 9 fields where the header has 8$"):
        streamed_summary(path)
