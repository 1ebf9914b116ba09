"""List pages from 10 to 10,000 runs: `/`, `/runs`, `/api/runs`, `/compare` over HTTP from `emuplan serve`,
and what a user does on them: a tag filter and the last page.

Target: each within 1.5× from 10 to 10,000 runs (lists read a few small columns per run, never its
statistics or curves, and show one page at a time). Two servers, one per database, are asked in turn
(10 runs, 10,000 runs, 10 runs, …) within each round, so that load from elsewhere on the machine hits
both alike; the figure is the median of the per-round ratios.

One real run is imported over HTTP, then copied in SQL (name, statistics and curves included) to
reach the run count: importing 10,000 files would take hours and test nothing more here. Every run is
tagged `Nightly` (the filter `nightly` matches them all, as the unfiltered list does) and one of
`fabric-0` … `fabric-9` (`fabric-3` matches a tenth). Sorted pages (by p50, peak busbw, size, verdict, platform,
collective) read the sort's index; the fact filter (no run states `nic = cx7`) its `run_fact` index. The last
page is page 200 of 10,000 runs (of a tag matching them all too); at 10 runs, page 200 shows the last (and only)
page.

The same on PostgreSQL (a team's shared server): a throwaway cluster from Debian's `postgresql` package
(tests/postgres_server.py), the copies made in SQL and the tables vacuumed and analysed, as autovacuum does after
so many writes. Each copy is inserted, then updated (its tags, its digest): without the vacuum every index entry
of a deep page led to a dead row version too, and the last pages took 1.66–1.95× the first of 10 runs; vacuumed,
the index alone answers (PostgreSQL's visibility map), 1.36–1.41×.
`--databases sqlite,postgresql` is the default; each database's lines are printed under its name.

    .venv/bin/python bench/bench_lists.py [--rounds R] [--databases sqlite,postgresql]
"""

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy
from sqlalchemy import text

from bench_pages import upload_runs
from paired import interleaved_get_seconds, load_average, paired_rounds, print_growth
from serve import start_server, stop_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from postgres_server import TEMPLATE, start_postgres, stop_postgres  # noqa: E402

SIZES = (10, 10_000)
LAST_PAGE = "last page"
PATHS = (
    "/", "/runs", "/api/runs", "/compare", "/runs?tag=nightly", "/api/runs?tag=nightly", "/api/runs?tag=fabric-3",
    "/runs?page=200", LAST_PAGE, "/runs?tag=nightly&page=200", "/runs?sort=p50", "/api/runs?sort=busbw",
    "/api/runs?collective=all_reduce&sort=size", "/runs?fact=nic%3Dcx7", "/runs?sort=verdict",
    "/api/runs?sort=platform", "/api/runs?sort=collective",
)  # fmt: skip
FABRICS = 10


def url_of(path: str, size: int) -> str:
    """The path as asked of the database with ``size`` runs (the API's last page starts at its last 50)."""
    return f"/api/runs?offset={max(0, size - 50)}" if path == LAST_PAGE else path


RATIO_LIMIT = 1.5
REQUESTS_PER_SAMPLE = 15


def copy_runs(url: str, count: int) -> None:
    """Copies of run 1 (statistics and curves) until the database at ``url`` holds ``count`` runs, each tagged."""
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:
        skipped = ("id", "name", "tags")
        columns = [column["name"] for column in sqlalchemy.inspect(connection).get_columns("run")]
        listed = ", ".join(column for column in columns if column not in skipped)
        for copy in range(1, count + 1):
            tags = ["Nightly", f"fabric-{copy % FABRICS}"]
            if copy > 1:
                connection.execute(
                    text(
                        f"INSERT INTO run (name, tags, {listed}) SELECT name || ' copy {copy}', '[]', {listed} "
                        "FROM run WHERE id = 1"
                    )
                )
                connection.execute(
                    text("INSERT INTO run_collective (run_id, collective) SELECT :copy, collective FROM run_collective "
                         "WHERE run_id = 1"),
                    {"copy": copy},
                )  # fmt: skip
                for table in ("run_summary", "run_curves"):
                    connection.execute(
                        text(
                            f"INSERT INTO {table} (run_id, summary) SELECT :copy, summary FROM {table} WHERE run_id = 1"
                        ),
                        {"copy": copy},
                    )
            connection.execute(
                text("UPDATE run SET tags = :tags WHERE id = :copy"), {"tags": json.dumps(tags), "copy": copy}
            )
            connection.execute(
                text("INSERT INTO run_tag (run_id, folded_tag) VALUES (:copy, :tag)"),
                [{"copy": copy, "tag": tag.casefold()} for tag in tags],
            )
        connection.execute(text("UPDATE run SET content_sha256 = NULL WHERE id > 1"))
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM ANALYZE"))
    engine.dispose()


@contextmanager
def databases_of(kind: str, directory: Path, rows: int) -> Iterator[dict[int, str]]:
    """``{run count: database URL}`` for ``SIZES``, each seeded with one run imported over HTTP and copied."""
    if kind == "sqlite":
        seed = f"sqlite:///{directory}/seed.sqlite3"
        urls = {size: f"sqlite:///{directory}/{size}.sqlite3" for size in SIZES}
        seed_imported(seed, directory, rows)
        for size in SIZES:
            shutil.copy(directory / "seed.sqlite3", directory / f"{size}.sqlite3")
            copy_runs(urls[size], size)
        yield urls
        return
    cluster = start_postgres()
    try:
        seed = cluster.create_database(template=TEMPLATE)
        seed_imported(cluster.url(seed), directory, rows)
        urls = {size: cluster.url(cluster.create_database(template=seed)) for size in SIZES}
        for size in SIZES:
            copy_runs(urls[size], size)
        yield urls
    finally:
        stop_postgres(cluster)


def seed_imported(url: str, directory: Path, rows: int) -> None:
    server, base = start_server(str(directory), EMUPLAN_DATABASE_URL=url)
    try:
        upload_runs(base, rows, 1)
    finally:
        stop_server(server)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--databases", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    args = parser.parse_args()
    failed = False
    for kind in args.databases.split(","):
        if kind not in ("sqlite", "postgresql"):
            parser.error(f"--databases: {kind!r} is neither sqlite nor postgresql")
        failed |= not bench_database(kind, args.rounds, args.rows)
    return 1 if failed else 0


def bench_database(kind: str, rounds: int, rows: int) -> bool:
    """Prints the list pages' figures on one kind of database; whether every path kept to the target."""
    with tempfile.TemporaryDirectory() as directory, databases_of(kind, Path(directory), rows) as urls:
        servers = {}
        try:
            for size in SIZES:
                servers[size] = start_server(directory, EMUPLAN_DATABASE_URL=urls[size])
            print(f"{kind}: list pages at {' and '.join(f'{s:,}' for s in SIZES)} runs, {rounds} paired rounds, "
                  f"median of {REQUESTS_PER_SAMPLE} GETs of each, in turn (load {load_average()})")  # fmt: skip
            # A case asks both servers in turn and returns both medians: (10 runs, 10,000 runs).
            cases = {
                path: lambda path=path: interleaved_get_seconds(
                    [servers[size][1] + url_of(path, size) for size in SIZES], REQUESTS_PER_SAMPLE
                )
                for path in PATHS
            }
            values = paired_rounds(cases, rounds)
        finally:
            for server, _ in servers.values():
                stop_server(server)
    return print_growth(values, SIZES, RATIO_LIMIT, 26)


if __name__ == "__main__":
    sys.exit(main())
