"""Import of a per-iteration CSV over HTTP against a bare pyarrow parse and against polars, in paired rounds.

Cases, each once per round in a rotating order (``paired.py``), all on the same file:

- bare parse: ``pyarrow.csv.read_csv`` of the file, in a fresh process (time of the call; peak RSS);
- polars: ``polars.read_csv`` + p50 and p99 per (collective, data size), in a fresh process;
- the import's work in polars: what an import has to do that the polars case leaves out — hash the
  file (duplicates are refused by content), sort every group (the ECDF and its exact tails), keep the
  samples as Parquet — done by polars in a fresh process, without HTTP. Its ratio to the polars case
  is how close any server could come to the 1.2x target with the fastest reader at hand;
- upload: ``POST /api/runs`` to ``emuplan serve`` with its default settings, the multipart body streamed
  from the file, until the 201 (receive → parse → checks → statistics, ECDF grids, delay series →
  Parquet → one SQLite transaction); the server's peak RSS over the upload (its high-water mark reset
  just before).

Targets: upload ≤ 2.0× the bare parse, ≤ 1.2× polars and ≤ 1.2× the import's work in polars (medians of the
per-round ratios); the server's peak RSS ≤ 1.3× the bare parse's. Every case also reports its CPU-seconds (all
threads; the server's from /proc), which on 2 cores bound how far overlapping the steps can take the wall
time. `--rows 10000000` is the ~600 MB file that has to import with the default upload limit (streamed: past
EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES, ``bench_import_huge.py`` measures those).

    .venv/bin/python bench/bench_import.py [--rows N] [--rounds R]
"""

import argparse
import http.client
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow.csv as pacsv

from paired import load_average, missed_targets, paired_rounds, ratios, spread
from serve import start_server, stop_server

REPO = Path(__file__).resolve().parents[1]
BARE_LIMIT = 2.0
POLARS_LIMIT = 1.2
RSS_LIMIT = 1.3

# Each prints "<seconds of the work> <CPU-seconds of the work> <peak RSS in KiB>"; imports happen before
# the clocks start.
BARE_PARSE = """
import resource, sys, time
import pyarrow.csv as pacsv
start, cpu = time.perf_counter(), time.process_time()
table = pacsv.read_csv(sys.argv[1])
print(time.perf_counter() - start, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
POLARS = """
import resource, sys, time
import polars as pl
start, cpu = time.perf_counter(), time.process_time()
times = pl.col("Completion Time (ms)")
groups = pl.read_csv(sys.argv[1]).group_by("Collective", "Data Size").agg(
    times.quantile(0.5, "nearest").alias("p50"), times.quantile(0.99, "nearest").alias("p99")
)
print(time.perf_counter() - start, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""
POLARS_IMPORT_WORK = """
import hashlib, io, resource, sys, time
import polars as pl
start, cpu = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as file:
    digest = hashlib.file_digest(file, "sha256").hexdigest()
samples = pl.read_csv(sys.argv[1])
times = pl.col("Completion Time (ms)")
groups = samples.group_by("Collective", "Data Size").agg(
    times.sort().alias("sorted"), times.quantile(0.5, "nearest").alias("p50"),
    times.quantile(0.99, "nearest").alias("p99"),
)
samples.write_parquet(io.BytesIO(), compression="lz4")
print(time.perf_counter() - start, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def load_generator():
    spec = importlib.util.spec_from_file_location(
        "generate_results", REPO / "tests" / "fixtures" / "generate_results.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_csv(rows: int, path: Path) -> None:
    table = load_generator().per_iteration_table(rows, seed=0)
    pacsv.write_csv(table, str(path), pacsv.WriteOptions(quoting_style="none"))


def in_fresh_process(script: str, path: Path) -> tuple[float, float, int]:
    """(seconds, CPU-seconds, peak RSS in bytes) the script reports."""
    output = subprocess.run([sys.executable, "-c", script, str(path)], check=True, capture_output=True, text=True)
    seconds, cpu_seconds, peak_kib = output.stdout.split()
    return float(seconds), float(cpu_seconds), int(peak_kib) * 1024


def cpu_seconds(pid: int) -> float:
    """User + system CPU-seconds of a process so far, all its threads (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid: int, field: str) -> int:
    """Bytes of a process's ``VmRSS`` (now) or ``VmHWM`` (peak) from /proc."""
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith(f"{field}:"))
    return int(line.split()[1]) * 1024


def reset_peak_rss(pid: int) -> None:
    """Start the process's high-water mark again from its current RSS (Linux: clear_refs 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


# The generated runs are a pipeline schedule (one size per stage).
PIPELINE = {"strategy": "pipeline"}


def upload(
    base: str,
    path: Path,
    trailer: bytes = b"",
    *,
    file_name: str = "bench.csv",
    content_type: str = "text/csv",
    fields: dict[str, str] | None = None,
    answer_status: int = 201,
) -> float:
    """Seconds to POST the file (plus ``trailer``, e.g. a distinct last row so no upload is a duplicate) and
    ``fields`` as multipart/form-data, streamed from disk, until the answer (``answer_status`` expected)."""
    boundary = "benchimportboundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n'
        f"Content-Type: {content_type}\r\n\r\n"
    ).encode()
    form = "".join(
        f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}'
        for name, value in (fields or {}).items()
    )
    tail = trailer + f"{form}\r\n--{boundary}--\r\n".encode()

    def body():
        yield head
        with path.open("rb") as file:
            while chunk := file.read(1 << 20):
                yield chunk
        yield tail

    address = urlsplit(base)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=1800)
    start = time.perf_counter()
    connection.request(
        "POST",
        "/api/runs",
        body=body(),
        headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Content-Length": str(len(head) + path.stat().st_size + len(tail)),
        },
    )
    response = connection.getresponse()
    answer = response.read()
    seconds = time.perf_counter() - start
    connection.close()
    if response.status != answer_status:
        raise RuntimeError(f"upload answered {response.status}: {answer[:500]!r}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bench.csv"
        write_csv(args.rows, path)
        size_mb = path.stat().st_size / 1e6
        server, base = start_server(directory)
        try:
            upload(
                base, path, b"%d,2600,all_reduce,18.0,0.0,generated\n" % -1, fields=PIPELINE
            )  # warm-up: imports, first connection
            idle_rss = memory(server.pid, "VmRSS")
            rss: dict[str, list[int]] = {"bare parse": [], "polars": [], "import work": [], "upload": []}
            cpu: dict[str, list[float]] = {name: [] for name in rss}
            trailers = iter(range(args.rounds))

            def fresh(name: str, script: str) -> float:
                seconds, cpu_used, peak = in_fresh_process(script, path)
                cpu[name].append(cpu_used)
                rss[name].append(peak)
                return seconds

            def over_http() -> float:
                reset_peak_rss(server.pid)
                cpu_before = cpu_seconds(server.pid)
                trailer = b"%d,2600,all_reduce,18.0,0.0,generated\n" % (10**7 + next(trailers))
                seconds = upload(base, path, trailer, fields=PIPELINE)
                cpu["upload"].append(cpu_seconds(server.pid) - cpu_before)
                rss["upload"].append(memory(server.pid, "VmHWM"))
                return seconds

            cases = {
                "bare parse": lambda: fresh("bare parse", BARE_PARSE),
                "polars": lambda: fresh("polars", POLARS),
                "import work": lambda: fresh("import work", POLARS_IMPORT_WORK),
                "upload": over_http,
            }
            print(f"import over HTTP: {args.rows:,}-row per-iteration CSV, {size_mb:.0f} MB, {args.rounds} paired "
                  f"rounds (load {load_average()})")  # fmt: skip
            values = paired_rounds(cases, args.rounds)
        finally:
            stop_server(server)

    def mb(samples: list[int]) -> list[float]:
        return [sample / 1e6 for sample in samples]

    to_bare, to_polars = ratios(values, "upload", "bare parse"), ratios(values, "upload", "polars")
    rss_ratio = [a / b for a, b in zip(rss["upload"], rss["bare parse"], strict=True)]
    checks = [
        ("upload ÷ bare parse", to_bare, BARE_LIMIT),
        ("upload ÷ polars", to_polars, POLARS_LIMIT),
        ("upload ÷ import's work in polars", ratios(values, "upload", "import work"), POLARS_LIMIT),
        ("peak RSS ÷ bare parse's", rss_ratio, RSS_LIMIT),
    ]

    def cpu_of(name: str) -> str:
        return spread(cpu[name], unit=" CPU-s")

    print(f"  pyarrow.csv.read_csv alone       {spread(values['bare parse'], unit=' s')}, {cpu_of('bare parse')}; "
          f"peak RSS {spread(mb(rss['bare parse']), digits=0, unit=' MB')}")  # fmt: skip
    print(f"  polars read + p50/p99 per group  {spread(values['polars'], unit=' s')}, {cpu_of('polars')}; "
          f"peak RSS {spread(mb(rss['polars']), digits=0, unit=' MB')}")  # fmt: skip
    print(f"  the import's work in polars      {spread(values['import work'], unit=' s')}, {cpu_of('import work')}"
          f" (hash, read, sorted groups + p50/p99, Parquet; no HTTP)")  # fmt: skip
    print(f"  upload → 201 over HTTP           {spread(values['upload'], unit=' s')}, {cpu_of('upload')} (server); "
          f"server peak RSS {spread(mb(rss['upload']), digits=0, unit=' MB')} (RSS after the warm-up upload "
          f"{idle_rss / 1e6:.0f} MB)")  # fmt: skip
    work_to_polars = ratios(values, "import work", "polars")
    print(f"  the import's work in polars ÷ polars read + p50/p99: {spread(work_to_polars, digits=2)}x — the "
          f"nearest any server could come to the {POLARS_LIMIT}x target with polars as its reader")  # fmt: skip
    failed = missed_targets(checks)
    print(f"  load average after: {load_average()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
