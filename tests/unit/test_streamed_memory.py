"""A streamed import's memory stays under its setting whatever the file's size, and so does a stored run's
summary computed again (relabelled, linked to a plan): measured as the peak RSS of a child process above what it
held once its modules were imported, on a file the in-memory path needs more than that bound for.

The child reads its own high-water mark (``VmHWM``, reset after its imports): ``getrusage``'s ``ru_maxrss`` of a
child starts from its parent's RSS when it was forked (Linux keeps it across ``execve``), here the test
process's, which holds the generated table."""

import gzip
import os
import subprocess
import sys

import pyarrow.csv as pacsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.streaming.streamed import parquet_write_options, streamed_result_file
from fixtures.generate_results import ns3_fct_text, per_flow_table, per_iteration_table, write_csv
from paths import REPO_ROOT

BOUND_BYTES = 200 << 20
ROWS = 3_000_000

IMPORT = """
import sys
from pathlib import Path
import duckdb, numpy, pyarrow.csv, pyarrow.parquet
from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.parse import parse_result_file
from emuplan.results.analysis.stats import summarise
from emuplan.results.streaming.streamed import streamed_result_file, summarise_streamed

path, streamed, bound = Path(sys.argv[1]), sys.argv[2] == "streamed", int(sys.argv[3])


def status(field):
    with open("/proc/self/status") as lines:
        return int(next(line for line in lines if line.startswith(field + ":")).split()[1]) * 1024


with open("/proc/self/clear_refs", "w") as clear_refs:
    clear_refs.write("5")  # the high-water mark starts again from here
baseline = status("VmRSS")
limits = ImportLimits(streamed_above_bytes=0, streamed_memory_bytes=bound, max_rows=10**9, pool_bytes=10**12)
with ImportBudget(limits) as budget:
    if streamed:
        with streamed_result_file(path, path.name, None, None, None, budget) as result:
            summary = summarise_streamed(result)
    else:
        parsed = parse_result_file(path, path.name, budget=budget)
        summary = summarise(parsed.samples, flows=parsed.flows, ranks=parsed.ranks)
assert summary["sample_count"] == int(sys.argv[4]), summary["sample_count"]
print(status("VmHWM") - baseline)
"""


# A stored run summarised again (``stored_result``): its samples Parquet as the in-memory import stores it (row
# groups of 1 Mi rows), read from a file as the store reads it from the database, a range at a time.
SUMMARISE_AGAIN = """
import sys
from pathlib import Path
import duckdb, numpy, pyarrow as pa, pyarrow.parquet as pq
from emuplan.results.budget import ImportBudget, ImportLimits
from emuplan.results.canonical import renamed_text
from emuplan.results.analysis.stats import summarise
from emuplan.results.streaming.streamed import stored_result, summarise_streamed

path, streamed, bound = Path(sys.argv[1]), sys.argv[2] == "streamed", int(sys.argv[3])
relabel = {"all_reduce": "all_gather"}


def status(field):
    with open("/proc/self/status") as lines:
        return int(next(line for line in lines if line.startswith(field + ":")).split()[1]) * 1024


with open("/proc/self/clear_refs", "w") as clear_refs:
    clear_refs.write("5")
baseline = status("VmRSS")
limits = ImportLimits(streamed_above_bytes=0, streamed_memory_bytes=bound, max_rows=10**9, pool_bytes=10**12)
if streamed:
    with ImportBudget(limits) as budget, stored_result(
        "per-iteration", lambda kind: pa.OSFile(str(path)), ["samples"], relabel, file_name=path.name, ranks=None,
        hosts=None, budget=budget,
    ) as result:
        summary = summarise_streamed(result)
else:
    samples = pq.read_table(path)
    renamed = renamed_text(samples["collective"].combine_chunks(), lambda name: relabel.get(name, name))
    summary = summarise(samples.set_column(1, "collective", renamed))
assert summary["sample_count"] == int(sys.argv[4]), summary["sample_count"]
assert {group["collective"] for group in summary["groups"]} == {"all_gather"}
print(status("VmHWM") - baseline)
"""


@pytest.fixture(scope="module")
def large_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("large") / "pipeline.csv"
    write_csv(per_iteration_table(ROWS, seed=1), path)
    return path


@pytest.fixture(scope="module")
def stored_samples(large_csv):
    """The large file's samples as the in-memory import stores them (``pq.write_table``'s row groups)."""
    path = large_csv.with_name("samples.parquet")
    limits = ImportLimits(streamed_above_bytes=0, max_rows=10**9, pool_bytes=10**12)
    with (
        ImportBudget(limits) as budget,
        streamed_result_file(large_csv, large_csv.name, None, None, None, budget) as read,
    ):
        samples = pq.read_table(read.tables["samples"])
    pq.write_table(samples, path, **parquet_write_options(samples.schema))
    return path


def peak_growth(path, mode: str, script: str = IMPORT, samples: int = ROWS) -> int:
    """Bytes the child's peak RSS rose above its RSS once its modules were loaded (``samples``: the summary's
    sample count)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "backend")}
    command = [sys.executable, "-c", script, str(path), mode, str(BOUND_BYTES), str(samples)]
    output = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return int(output.split()[-1])


def test_streamed_import_stays_under_its_bound_where_the_in_memory_import_does_not(large_csv):
    streamed = peak_growth(large_csv, "streamed")
    in_memory = peak_growth(large_csv, "in-memory")
    assert streamed <= BOUND_BYTES < in_memory, (streamed >> 20, in_memory >> 20)


def test_a_per_flow_csv_read_by_duckdb_stays_under_the_bound_too(tmp_path):
    """3 M flows (8 ranks × 2 QPs, 187,500 iterations), read by DuckDB's CSV reader (``_flows_by_duckdb``)."""
    path = tmp_path / "flows.csv"
    iterations = ROWS // 16
    write_csv(per_flow_table(iterations=iterations, ranks=8, qps=2, seed=1), path)
    streamed = peak_growth(path, "streamed", samples=iterations)
    in_memory = peak_growth(path, "in-memory", samples=iterations)
    assert streamed <= BOUND_BYTES < in_memory, (streamed >> 20, in_memory >> 20)


def test_an_ns3_fct_txt_streamed_stays_under_the_bound_too(tmp_path):
    """1.5 M flows (the generator's 20,000 lines 75 times, 80 MiB), read by ``stream_blocks.FixedColumnBlocks``.
    Measured: 128 MiB streamed, 349 MiB in memory."""
    path = tmp_path / "fct.txt"
    path.write_text(ns3_fct_text(flows=20_000, seed=1) * 75)
    streamed = peak_growth(path, "streamed", samples=1)
    in_memory = peak_growth(path, "in-memory", samples=1)
    assert streamed <= BOUND_BYTES < in_memory, (streamed >> 20, in_memory >> 20)


@pytest.mark.parametrize("container", ["csv.gz", "feather", "parquet"])
def test_a_gzip_csv_zstd_feather_or_parquet_streamed_stays_under_the_bound_too(large_csv, tmp_path, container):
    """Measured: 162, 167 and 160 MiB streamed; 658, 615 and 423 MiB in memory."""
    path = tmp_path / f"pipeline.{container}"
    if container == "csv.gz":
        path.write_bytes(gzip.compress(large_csv.read_bytes(), 1))
    elif container == "feather":
        feather.write_feather(pacsv.read_csv(large_csv), path, compression="zstd")
    else:
        pq.write_table(pacsv.read_csv(large_csv), path)
    streamed = peak_growth(path, "streamed")
    in_memory = peak_growth(path, "in-memory")
    assert streamed <= BOUND_BYTES < in_memory, (streamed >> 20, in_memory >> 20)


def test_a_stored_run_summarised_again_streamed_stays_under_its_bound_where_loading_it_does_not(stored_samples):
    streamed = peak_growth(stored_samples, "streamed", SUMMARISE_AGAIN)
    in_memory = peak_growth(stored_samples, "in-memory", SUMMARISE_AGAIN)
    assert streamed <= BOUND_BYTES < in_memory, (streamed >> 20, in_memory >> 20)
