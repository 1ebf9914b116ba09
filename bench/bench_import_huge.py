"""Import of a huge per-flow CSV (streamed: results/streaming/streamed.py) over HTTP against DuckDB doing the same work
alone, in paired rounds.

The file: a ring all-reduce of 256 ranks × 4 QPs (1,024 flows an iteration), flow completion times lognormal
around 900 µs with one flow in 10,000 planted 5–50 ms late; written once to ``--data`` (default
/work/bench-data) and reused.

Cases, each once per round in a rotating order (``paired.py``):

- upload: ``POST /api/runs`` to ``emuplan serve`` (its defaults, but an upload limit that takes the file),
  streamed from disk, until the 201 — receive, check every block, Parquet, DuckDB's sorts, the SQLite write;
  the server's peak RSS over the upload (its high-water mark reset just before);
- DuckDB alone, in a fresh process and without HTTP, doing the import's work with DuckDB's own CSV reader:
  hash the file, read it into Parquet, the iterations (max end − min start per iteration), the flows sorted
  by completion time (their exact order statistics) and the iterations sorted, and the last byte per
  iteration and receiving rank (the stragglers), under the same memory limit the import gives DuckDB.

- received only: the same upload with a form field the server refuses (422) once the body is in — what the
  import must do before reading that DuckDB alone does not (HTTP, the multipart parse, the hash, the spool).

Targets: server peak RSS ≤ 1.5 GB and upload ≤ 1.2× DuckDB alone (medians of the per-round ratios), and upload
≤ 1.2× DuckDB alone plus the receiving: the receiving alone (HTTP, multipart, hash, spool of a body DuckDB
reads from the disk instead) takes ~25 % of DuckDB alone's time here, and every part is CPU-bound on 2 cores, so
1.2× DuckDB alone is below what an import over HTTP can reach; with the receiving counted it holds the import to
its own work.

    .venv/bin/python bench/bench_import_huge.py [--rows N] [--rounds R] [--data DIR]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from bench_import import cpu_seconds, memory, reset_peak_rss, upload
from paired import load_average, paired_rounds, ratios, spread
from serve import start_server, stop_server

RSS_LIMIT = 1.5e9
DUCKDB_LIMIT = 1.2
RANKS, QPS = 256, 4
FLOWS_PER_ITERATION = RANKS * QPS
CHUNK_ITERATIONS = 4096
# What the import gives DuckDB by default (results.streaming.streamed: DUCKDB_SHARE of
# EMUPLAN_STREAMED_IMPORT_MEMORY_BYTES).
DUCKDB_MEMORY = "358MB"

DUCKDB_ALONE = """
import hashlib, os, resource, sys, tempfile, time
import duckdb
path, memory = sys.argv[1], sys.argv[2]
start, cpu = time.perf_counter(), time.process_time()
with open(path, "rb") as file:
    digest = hashlib.file_digest(file, "sha256").hexdigest()
with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as directory:
    con = duckdb.connect(config={"memory_limit": memory, "temp_directory": directory + "/spill", "threads": 2,
                                 "preserve_insertion_order": False})
    con.sql("SET enable_progress_bar = false")
    flows = directory + "/flows.parquet"
    con.sql(f"COPY (SELECT * FROM read_csv('{path}')) TO '{flows}' (FORMAT parquet, COMPRESSION lz4)")
    con.sql(f"COPY (SELECT iteration, max(end_us) - min(start_us) AS duration_us FROM '{flows}' GROUP BY iteration"
            f" ORDER BY iteration) TO '{directory}/samples.parquet' (FORMAT parquet)")
    for query in (f"SELECT end_us - start_us AS fct FROM '{flows}' ORDER BY fct",
                  f"SELECT duration_us FROM '{directory}/samples.parquet' ORDER BY duration_us",
                  f"WITH s AS (SELECT iteration, min(start_us) AS first FROM '{flows}' GROUP BY iteration)"
                  f" SELECT iteration, dst_rank, max(end_us - first) FROM '{flows}' JOIN s USING (iteration)"
                  " GROUP BY iteration, dst_rank ORDER BY iteration"):
        for batch in con.sql(query).to_arrow_reader(1 << 18):
            pass
    con.close()
print(time.perf_counter() - start, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def write_flows(rows: int, path: Path) -> None:
    """``rows`` flows (rounded to whole iterations), a chunk of iterations at a time, to a CSV at ``path``."""
    rng = np.random.default_rng(0)
    iterations = rows // FLOWS_PER_ITERATION
    partial = path.with_suffix(".partial")
    with partial.open("wb") as out:
        for first in range(0, iterations, CHUNK_ITERATIONS):
            count = min(CHUNK_ITERATIONS, iterations - first)
            n = count * FLOWS_PER_ITERATION
            iteration = np.repeat(np.arange(first, first + count), FLOWS_PER_ITERATION)
            src = np.tile(np.repeat(np.arange(RANKS), QPS), count)
            start = iteration * 20000.0 + rng.uniform(0.0, 50.0, n)
            fct = rng.lognormal(np.log(900.0), 0.2, n)
            late = rng.random(n) < 1e-4
            fct[late] += rng.uniform(5000.0, 50000.0, int(late.sum()))
            table = pa.table(
                {
                    "iteration": iteration,
                    "src_rank": src,
                    "dst_rank": (src + 1) % RANKS,
                    "qp": np.tile(np.arange(QPS), count * RANKS),
                    "collective": pa.repeat(pa.scalar("allreduce"), n),
                    "bytes": np.full(n, 121381, dtype=np.int64),
                    "start_us": start.round(3),
                    "end_us": (start + fct).round(3),
                }
            )
            options = pacsv.WriteOptions(quoting_style="none", include_header=first == 0)
            pacsv.write_csv(table, out, options)
    partial.rename(path)


def duckdb_alone(path: Path) -> tuple[float, float, int]:
    output = subprocess.run(
        [sys.executable, "-c", DUCKDB_ALONE, str(path), DUCKDB_MEMORY], check=True, capture_output=True, text=True
    )
    seconds, cpu_used, peak_kib = output.stdout.split()
    return float(seconds), float(cpu_used), int(peak_kib) * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=Path("/work/bench-data"))
    args = parser.parse_args()

    args.data.mkdir(parents=True, exist_ok=True)
    path = args.data / f"per-flow-{args.rows}.csv"
    if not path.exists():
        write_flows(args.rows, path)
    size = path.stat().st_size
    with tempfile.TemporaryDirectory(dir=args.data) as directory:
        server, base = start_server(directory, EMUPLAN_MAX_UPLOAD_BYTES=str(2 * size), TMPDIR=directory)
        try:
            rss: dict[str, list[int]] = {"duckdb alone": [], "upload": []}
            cpu: dict[str, list[float]] = {name: [] for name in rss}
            trailers = iter(range(args.rounds))

            def alone() -> float:
                seconds, cpu_used, peak = duckdb_alone(path)
                cpu["duckdb alone"].append(cpu_used)
                rss["duckdb alone"].append(peak)
                return seconds

            def received_only() -> float:
                # The form is checked once the body is in: a bad field answers 422 after receiving, parsing,
                # hashing and spooling the file, which the import must do and DuckDB alone does not.
                return upload(base, path, fields={"strategy": "not-a-strategy"}, answer_status=422)

            def over_http() -> float:
                reset_peak_rss(server.pid)
                cpu_before = cpu_seconds(server.pid)
                trailer = b"%d,0,1,0,allreduce,121381,0.0,900.0\n" % (10**9 + next(trailers))
                seconds = upload(base, path, trailer)
                cpu["upload"].append(cpu_seconds(server.pid) - cpu_before)
                rss["upload"].append(memory(server.pid, "VmHWM"))
                return seconds

            print(f"huge import over HTTP: {args.rows:,}-row per-flow CSV, {size / 1e9:.2f} GB, {args.rounds} paired "
                  f"rounds (load {load_average()})")  # fmt: skip
            values = paired_rounds(
                {"upload": over_http, "duckdb alone": alone, "received only": received_only}, args.rounds
            )
        finally:
            stop_server(server)

    def mb(samples: list[int]) -> list[float]:
        return [sample / 1e6 for sample in samples]

    alone_rss = spread(mb(rss["duckdb alone"]), digits=0, unit=" MB")
    print(f"  DuckDB alone (the import's work) {spread(values['duckdb alone'], unit=' s')}"
          f", {spread(cpu['duckdb alone'], unit=' CPU-s')}; peak RSS {alone_rss}")  # fmt: skip
    print(f"  upload → 201 over HTTP {spread(values['upload'], unit=' s')}, {spread(cpu['upload'], unit=' CPU-s')} "
          f"(server); server peak RSS {spread(mb(rss['upload']), digits=0, unit=' MB')}; "
          f"{args.rows / statistics.median(values['upload']) / 1e6:.2f} M rows/s")  # fmt: skip
    print(f"  received only (HTTP, multipart, hash, spool; 422) {spread(values['received only'], unit=' s')}")
    to_duckdb = ratios(values, "upload", "duckdb alone")
    beside = [upload / (alone + received) for upload, alone, received in
              zip(values["upload"], values["duckdb alone"], values["received only"], strict=True)]  # fmt: skip
    failed = False
    for name, samples, limit, shown in (
        ("upload ÷ DuckDB alone", to_duckdb, DUCKDB_LIMIT, spread(to_duckdb, digits=2) + "x"),
        ("upload ÷ (DuckDB alone + received only)", beside, DUCKDB_LIMIT, spread(beside, digits=2) + "x"),
        ("server peak RSS", rss["upload"], RSS_LIMIT, spread(mb(rss["upload"]), digits=0, unit=" MB")),
    ):
        ok = statistics.median(samples) <= limit
        failed |= not ok
        print(f"  {name:<39} {shown} (target ≤ {limit:g}) {'ok' if ok else 'MISSED'}")
    print(f"  load average after: {load_average()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
