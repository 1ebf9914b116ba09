"""List pages from 10 to 10,000 runs: `/`, `/runs`, `/api/runs`, `/compare` over HTTP from `emuplan serve`,
and what a user does on them: a tag filter and the last page.

Target: each within 1.5× from 10 to 10,000 runs (lists read a few small columns per run, never its
statistics or curves, and show one page at a time). Two servers, one per database, are asked in turn
(10 runs, 10,000 runs, 10 runs, …) within each round, so that load from elsewhere on the machine hits
both alike; the figure is the median of the per-round ratios.

One real run is imported over HTTP, then copied in SQL (name, statistics and curves included) to
reach the run count: importing 10,000 files would take hours and test nothing more here. Every run is
tagged `Nightly` (the filter `nightly` matches them all, as the unfiltered list does) and one of
`fabric-0` … `fabric-9` (`fabric-3` matches a tenth). The last page is page 200 of 10,000 runs (of a
tag matching them all too); at 10 runs, page 200 shows the last (and only) page.

    .venv/bin/python bench/bench_lists.py [--rounds R]
"""

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

from bench_pages import upload_runs
from paired import interleaved_get_seconds, load_average, paired_rounds, ratio_line
from serve import start_server, stop_server

SIZES = (10, 10_000)
LAST_PAGE = "last page"
PATHS = (
    "/", "/runs", "/api/runs", "/compare", "/runs?tag=nightly", "/api/runs?tag=nightly", "/api/runs?tag=fabric-3",
    "/runs?page=200", LAST_PAGE, "/runs?tag=nightly&page=200",
)  # fmt: skip
FABRICS = 10


def url_of(path: str, size: int) -> str:
    """The path as asked of the database with ``size`` runs (the API's last page starts at its last 50)."""
    return f"/api/runs?offset={max(0, size - 50)}" if path == LAST_PAGE else path


RATIO_LIMIT = 1.5
REQUESTS_PER_SAMPLE = 15


def copy_runs(database: Path, count: int) -> None:
    """Copies of run 1 (statistics and curves) until the database holds ``count`` runs, each tagged."""
    with sqlite3.connect(database) as connection:
        skipped = ("id", "name", "tags")
        columns = [row[1] for row in connection.execute("PRAGMA table_info(run)") if row[1] not in skipped]
        listed = ", ".join(columns)
        for copy in range(1, count + 1):
            tags = ["Nightly", f"fabric-{copy % FABRICS}"]
            if copy > 1:
                connection.execute(
                    f"INSERT INTO run (name, tags, {listed}) SELECT name || ' copy {copy}', '[]', {listed} "
                    "FROM run WHERE id = 1"
                )
                for table in ("run_summary", "run_curves"):
                    connection.execute(
                        f"INSERT INTO {table} (run_id, summary) SELECT ?, summary FROM {table} WHERE run_id = 1",
                        (copy,),
                    )
            connection.execute("UPDATE run SET tags = ? WHERE id = ?", (json.dumps(tags), copy))
            connection.executemany(
                "INSERT INTO run_tag (run_id, folded_tag) VALUES (?, ?)", [(copy, tag.casefold()) for tag in tags]
            )
        connection.execute("UPDATE run SET content_sha256 = NULL WHERE id > 1")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as directory:
        seed_dir = Path(directory) / "seed"
        seed_dir.mkdir()
        server, base = start_server(str(seed_dir))
        try:
            upload_runs(base, args.rows, 1)
        finally:
            stop_server(server)
        servers = {}
        try:
            for size in SIZES:
                size_dir = Path(directory) / str(size)
                size_dir.mkdir()
                shutil.copy(seed_dir / "bench.sqlite3", size_dir / "bench.sqlite3")
                copy_runs(size_dir / "bench.sqlite3", size)
                servers[size] = start_server(str(size_dir))
            print(f"list pages at {' and '.join(f'{s:,}' for s in SIZES)} runs, {args.rounds} paired rounds, "
                  f"median of {REQUESTS_PER_SAMPLE} GETs of each, in turn (load {load_average()})")  # fmt: skip
            # A case asks both servers in turn and returns both medians: (10 runs, 10,000 runs).
            cases = {
                path: lambda path=path: interleaved_get_seconds(
                    [servers[size][1] + url_of(path, size) for size in SIZES], REQUESTS_PER_SAMPLE
                )
                for path in PATHS
            }
            values = paired_rounds(cases, args.rounds)
        finally:
            for server, _ in servers.values():
                stop_server(server)
    small, large = SIZES
    for path in PATHS:
        small_s, large_s = zip(*values[path], strict=True)
        line, ok = ratio_line(
            f"{path:<26}", (f"{small:>6,} runs", list(small_s)), (f"{large:,} runs", list(large_s)), RATIO_LIMIT
        )
        print(line)
        failed |= not ok
    print(f"  load average after: {load_average()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
