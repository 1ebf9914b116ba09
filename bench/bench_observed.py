"""Import of an NCCL Inspector dump over HTTP against a bare ``json`` + pyarrow read of the same records, in paired
rounds.

The dump: 1,000,000 records over 64 files (``inspector_dump.py``: 64 ranks on 8 hosts, world, tensor- and
data-parallel communicators, ``coll_sn`` per communicator, 2 % of calls missed by each rank's dump thread),
zipped as a user zips the dump directory. Cases, each once per round in a rotating order (``paired.py``):

- bare read: every line of the 64 files parsed with ``json.loads``, the 11 fields the import keeps (header id,
  rank, n_ranks; hostname, pid; coll, coll_sn, size, time, algbw, busbw) appended to lists, and a pyarrow table
  built from them, in a fresh process (time of the work; peak RSS);
- upload: ``POST /api/runs`` of the zip to ``emuplan serve`` with its default settings, the body streamed from
  disk, until the 201 (receive → unzip a file at a time → parse → join the ranks' records into calls → checks →
  statistics → Parquet → one SQLite transaction); how far the server's RSS rose over the upload (its high-water
  mark, reset just before, less its RSS then). Each round's zip differs by a hidden member (skipped by the
  import) so that none is a duplicate.

Targets (medians of the per-round ratios): upload ≤ 2.0× the bare read's time; the server's RSS growth over the
upload ≤ 1.0× the bare read's peak RSS (which holds a Python object per field of every record before its table;
the import holds the zip, one file's text at a time and the records' columns).

    .venv/bin/python bench/bench_observed.py [--records N] [--rounds R]
"""

import argparse
import sys
import tempfile
import zipfile
from pathlib import Path

from bench_import import cpu_seconds, in_fresh_process, memory, reset_peak_rss, upload
from inspector_dump import RANKS, write_dump
from paired import load_average, missed_targets, paired_rounds, ratios, spread
from serve import start_server, stop_server

TIME_LIMIT = 2.0
RSS_LIMIT = 1.0

# Prints "<seconds of the work> <CPU-seconds of the work> <peak RSS in KiB>"; imports happen before the clocks start.
BARE_READ = """
import json, resource, sys, time
from pathlib import Path
import pyarrow as pa
start, cpu = time.perf_counter(), time.process_time()
names = ("id", "rank", "n_ranks", "hostname", "pid", "coll", "coll_sn", "size", "time", "algbw", "busbw")
columns = {name: [] for name in names}
for path in sorted(Path(sys.argv[1]).glob("*.log")):
    with path.open("rb") as file:
        for line in file:
            record = json.loads(line)
            header, metadata, perf = record["header"], record["metadata"], record["coll_perf"]
            for name, value in zip(names, (header["id"], header["rank"], header["n_ranks"], metadata["hostname"],
                                           metadata["pid"], perf["coll"], perf["coll_sn"], perf["coll_msg_size_bytes"],
                                           perf["coll_exec_time_us"], perf["coll_algobw_gbs"], perf["coll_busbw_gbs"])):
                columns[name].append(value)
table = pa.table(columns)
assert table.num_rows > 0
print(time.perf_counter() - start, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as directory:
        dump = Path(directory) / "nccl-inspector-4242"
        paths = write_dump(dump, args.records)
        archive = Path(directory) / "nccl-inspector-4242.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
            for path in paths:
                zipped.write(path, f"{dump.name}/{path.name}")
        dump_mb, zip_mb = sum(path.stat().st_size for path in paths) / 1e6, archive.stat().st_size / 1e6
        rounds = iter(range(args.rounds + 1))

        def distinct_upload() -> float:
            with zipfile.ZipFile(archive, "a") as zipped:
                zipped.writestr(f"{dump.name}/.round-{next(rounds)}", b"")
            return upload(base, archive, file_name="nccl-inspector-4242.zip", content_type="application/zip")

        server, base = start_server(directory)
        try:
            distinct_upload()  # warm-up: imports, first connection
            idle_rss = memory(server.pid, "VmRSS")
            rss: dict[str, list[int]] = {"bare read": [], "upload": []}
            cpu: dict[str, list[float]] = {name: [] for name in rss}

            def bare() -> float:
                seconds, cpu_used, peak = in_fresh_process(BARE_READ, dump)
                cpu["bare read"].append(cpu_used)
                rss["bare read"].append(peak)
                return seconds

            def over_http() -> float:
                before = memory(server.pid, "VmRSS")
                reset_peak_rss(server.pid)
                cpu_before = cpu_seconds(server.pid)
                seconds = distinct_upload()
                cpu["upload"].append(cpu_seconds(server.pid) - cpu_before)
                rss["upload"].append(memory(server.pid, "VmHWM") - before)
                return seconds

            print(f"Inspector dump over HTTP: {args.records:,} records in {RANKS} files, {dump_mb:.0f} MB "
                  f"({zip_mb:.0f} MB zipped), {args.rounds} paired rounds (load {load_average()})")  # fmt: skip
            values = paired_rounds({"bare read": bare, "upload": over_http}, args.rounds)
        finally:
            stop_server(server)

    def mb(samples: list[int]) -> list[float]:
        return [sample / 1e6 for sample in samples]

    def figures(case: str) -> str:
        return f"{spread(values[case], unit=' s')}, {spread(cpu[case], unit=' CPU-s')}"

    bare_rss, upload_rss = (
        spread(mb(rss["bare read"]), digits=0, unit=" MB"),
        spread(mb(rss["upload"]), digits=0, unit=" MB"),
    )
    print(f"  json.loads per line + pyarrow table  {figures('bare read')}; peak RSS {bare_rss}")
    print(f"  upload → 201 over HTTP               {figures('upload')} (server); the server's RSS grew by {upload_rss} "
          f"at its peak (RSS after the warm-up upload {idle_rss / 1e6:.0f} MB)")  # fmt: skip
    checks = [
        ("upload ÷ bare read", ratios(values, "upload", "bare read"), TIME_LIMIT),
        ("server RSS growth ÷ bare read's", [a / b for a, b in zip(rss["upload"], rss["bare read"], strict=True)],
         RSS_LIMIT),
    ]  # fmt: skip
    failed = missed_targets(checks)
    print(f"  load average after: {load_average()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
