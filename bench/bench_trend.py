"""A platform's series from 10 to 10,000 runs: the `/trend` page, `GET /api/trend` (with and without a tag and a
rank count) and `GET /metrics`, over HTTP from `emuplan serve`.

Target: each within 1.5× from 10 to 10,000 runs in the series (a series reads its newest 30 runs through the
platform's index, migration 0013; /metrics the newest 50 of each platform). Two servers, one per database, are
asked in turn (10 runs, 10,000 runs, 10 runs, …) within each round, so that load from elsewhere on the machine
hits both alike; the figure is the median of the per-round ratios.

One real nccl-tests log (tests/fixtures/results/nccl-tests, H100 16 ranks) is imported over HTTP, then copied in
SQL (statistics and curves included) to reach the run count, every copy on platform `h100-ndr` and tagged
`nightly`: importing 10,000 files would take hours and test nothing more here. `--databases sqlite,postgresql`
(default sqlite) runs the same on a throwaway PostgreSQL cluster (tests/postgres_server.py).

    .venv/bin/python bench/bench_trend.py [--rounds R] [--databases sqlite,postgresql]
"""

import argparse
import json
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy
from sqlalchemy import text

from paired import interleaved_get_seconds, load_average, paired_rounds, print_growth
from serve import start_server, stop_server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from postgres_server import TEMPLATE, start_postgres, stop_postgres  # noqa: E402

LOG = ROOT / "tests" / "fixtures" / "results" / "nccl-tests" / "h100-16rank-allreduce-mpirun.txt"
PLATFORM = "h100-ndr"
TAG = "nightly"
SIZES = (10, 10_000)
PATHS = (
    "/trend", f"/api/trend?platform={PLATFORM}", f"/api/trend?platform={PLATFORM}&tag={TAG}&ranks=16",
    "/metrics",
)  # fmt: skip
RATIO_LIMIT = 1.5
# A run's rows beside it, copied with it: (table, its JSON column).
COPIED_BESIDE = (("run_summary", "summary"), ("run_curves", "summary"), ("run_trend_figures", "figures"))
REQUESTS_PER_SAMPLE = 9


def import_log(base: str) -> None:
    boundary = "benchtrendboundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{LOG.name}"\r\n'
        f"Content-Type: text/plain\r\n\r\n".encode()
        + LOG.read_bytes()
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{base}/api/runs", data=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        assert json.loads(response.read())["id"] == 1


def copy_runs(url: str, count: int) -> None:
    """Copies of run 1 until the database at ``url`` holds ``count`` runs, all of one series (imported at once:
    a series sorts runs of one time by id)."""
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as connection:
        skipped = ("id", "name", "tags", "platform")
        columns = [column["name"] for column in sqlalchemy.inspect(connection).get_columns("run")]
        listed = ", ".join(column for column in columns if column not in skipped)
        connection.execute(text("DELETE FROM run_tag"))
        for copy in range(1, count + 1):
            if copy > 1:
                connection.execute(
                    text(
                        f"INSERT INTO run (name, tags, {listed}) SELECT name || ' copy {copy}', '[]', {listed} "
                        "FROM run WHERE id = 1"
                    )  # fmt: skip
                )
                for table, column in COPIED_BESIDE:
                    connection.execute(
                        text(
                            f"INSERT INTO {table} (run_id, {column}) "
                            f"SELECT :copy, {column} FROM {table} WHERE run_id = 1"
                        ),
                        {"copy": copy},
                    )
            connection.execute(
                text("UPDATE run SET tags = :tags, platform = :platform WHERE id = :copy"),
                {"tags": json.dumps([TAG]), "platform": PLATFORM, "copy": copy},
            )
            connection.execute(
                text("INSERT INTO run_tag (run_id, folded_tag) VALUES (:copy, :tag)"), {"copy": copy, "tag": TAG}
            )
        connection.execute(text("UPDATE run SET content_sha256 = NULL WHERE id > 1"))
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("ANALYZE"))
    engine.dispose()


def seed_imported(url: str, directory: Path) -> None:
    server, base = start_server(str(directory), EMUPLAN_DATABASE_URL=url)
    try:
        import_log(base)
    finally:
        stop_server(server)


@contextmanager
def databases_of(kind: str, directory: Path) -> Iterator[dict[int, str]]:
    """``{run count: database URL}`` for ``SIZES``, each seeded with the log imported over HTTP and copied."""
    if kind == "sqlite":
        urls = {size: f"sqlite:///{directory}/{size}.sqlite3" for size in SIZES}
        seed_imported(f"sqlite:///{directory}/seed.sqlite3", directory)
        for size in SIZES:
            shutil.copy(directory / "seed.sqlite3", directory / f"{size}.sqlite3")
            copy_runs(urls[size], size)
        yield urls
        return
    cluster = start_postgres()
    try:
        seed = cluster.create_database(template=TEMPLATE)
        seed_imported(cluster.url(seed), directory)
        urls = {size: cluster.url(cluster.create_database(template=seed)) for size in SIZES}
        for size in SIZES:
            copy_runs(urls[size], size)
        yield urls
    finally:
        stop_postgres(cluster)


def bench_database(kind: str, rounds: int) -> bool:
    """Prints the series' figures on one kind of database; whether every path kept to the target."""
    with tempfile.TemporaryDirectory() as directory, databases_of(kind, Path(directory)) as urls:
        servers = {}
        try:
            for size in SIZES:
                servers[size] = start_server(directory, EMUPLAN_DATABASE_URL=urls[size])
            print(f"{kind}: a series of {' and '.join(f'{s:,}' for s in SIZES)} runs, {rounds} paired rounds, "
                  f"median of {REQUESTS_PER_SAMPLE} GETs of each, in turn (load {load_average()})")  # fmt: skip
            cases = {
                path: lambda path=path: interleaved_get_seconds(
                    [servers[size][1] + path for size in SIZES], REQUESTS_PER_SAMPLE
                )
                for path in PATHS
            }
            values = paired_rounds(cases, rounds)
        finally:
            for server, _ in servers.values():
                stop_server(server)
    return print_growth(values, SIZES, RATIO_LIMIT, 48)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--databases", default="sqlite", help="comma-separated: sqlite, postgresql")
    args = parser.parse_args()
    failed = False
    for kind in args.databases.split(","):
        if kind not in ("sqlite", "postgresql"):
            parser.error(f"--databases: {kind!r} is neither sqlite nor postgresql")
        failed |= not bench_database(kind, args.rounds)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
