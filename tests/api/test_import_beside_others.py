"""Another user's import never holds the database while it reads its file (issue 42): the duplicate check runs on a
read session before parsing, and the write transaction opens only to store. Through a real server on both
databases: while a slow streamed import (160 MB of CSV in 1 MB of gzip, seconds of reading) is in progress, a
sign-in and a small upload are answered, never 500 (the audit's: 500 "database is locked" after 10 s), before the
import ends; the same file again is refused as a duplicate before it is read; a write that waits past the busy
timeout for a lock held elsewhere is a 503 with Retry-After."""

import threading
import time
import zlib
from collections.abc import Iterator

import httpx2
import pytest
from sqlalchemy import text

from emuplan.roles import Role
from emuplan.settings import Settings
from emuplan.store.db import BUSY_RETRY_AFTER_S, BUSY_TIMEOUT_S, Database
from live_server import LiveServer, start_server, stop_server

pytestmark = pytest.mark.both_databases

TIMEOUT_S = 120
# 8 M per-iteration rows (160 MB once gunzipped, 1 MB of gzip): seconds to read, streamed.
ROWS = (
    b"2600,all_reduce,18.25\n",
    b"33024,all_reduce,19.5\n",
    b"131584,all_reduce,20.125\n",
    b"803840,all_reduce,24\n",
)


def slow_csv_gz(blocks: int = 2_000_000, per_write: int = 50_000) -> bytes:
    packer = zlib.compressobj(1, wbits=31)  # gzip
    chunk = b"".join(ROWS) * per_write
    parts = [packer.compress(b"Data Size,Collective,Completion Time (ms)\n")]
    parts += [packer.compress(chunk) for _ in range(blocks // per_write)]
    return b"".join([*parts, packer.flush()])


SLOW_CSV_GZ = slow_csv_gz()
SMALL_CSV = b"iteration,size,collective,time_ms\n" + b"".join(
    b"%d,1024,all_reduce,%d.5\n" % (i, i + 1) for i in range(5)
)


@pytest.fixture
def server(database_url: str) -> Iterator[LiveServer]:
    # Every table streamed (results/streaming/streamed.py), the path that held SQLite's write lock while it read.
    live = start_server(Settings(database_url=database_url, demo=False, auth="accounts", streamed_import_above_bytes=1))
    yield live
    stop_server(live)


def signed_in(server: LiveServer, name: str, password: str) -> httpx2.Client:
    client = httpx2.Client(base_url=server.url, follow_redirects=False, timeout=TIMEOUT_S)
    assert client.post("/sign-in", data={"name": name, "password": password}).status_code == 303
    return client


class Timed:
    """One request on a thread: its answer, and when it came."""

    def __init__(self, send) -> None:
        self.answer: httpx2.Response | None = None
        self.ended = 0.0
        self.thread = threading.Thread(target=self._run, args=(send,))
        self.thread.start()

    def _run(self, send) -> None:
        self.answer = send()
        self.ended = time.monotonic()

    def wait(self) -> httpx2.Response:
        self.thread.join(TIMEOUT_S)
        assert self.answer is not None
        return self.answer


def test_a_sign_in_and_an_upload_during_a_slow_import_are_answered_before_it_ends(
    server: LiveServer, add_account
) -> None:
    importer = signed_in(server, "ada", add_account("ada", Role.editor))
    other_password = add_account("bob", Role.editor)
    started = time.monotonic()
    slow = Timed(lambda: importer.post("/api/runs", files={"file": ("slow.csv.gz", SLOW_CSV_GZ, "application/gzip")}))
    time.sleep(1.0)  # the 1 MB body is in; its 160 MB are being read
    assert slow.thread.is_alive(), "the import ended before the others began: make it slower"
    sign_in = Timed(lambda: httpx2.post(f"{server.url}/sign-in", data={"name": "bob", "password": other_password},
                                         timeout=TIMEOUT_S))  # fmt: skip
    sign_in_response = sign_in.wait()
    bob = httpx2.Client(base_url=server.url, cookies=sign_in_response.cookies, timeout=TIMEOUT_S)
    small = Timed(lambda: bob.post("/api/runs", files={"file": ("small.csv", SMALL_CSV, "text/csv")}))
    small_response = small.wait()
    slow_response = slow.wait()
    assert (sign_in_response.status_code, sign_in_response.headers["location"]) == (303, "/")
    assert small_response.status_code == 201, small_response.text
    assert slow_response.status_code == 201, slow_response.text
    # Both answered while the import was still reading: nothing waited for its transaction.
    assert sign_in.ended < small.ended < slow.ended
    import_s = slow.ended - started

    # The same bytes again: refused by their digest before any is read.
    again_started = time.monotonic()
    again = importer.post("/api/runs", files={"file": ("again.csv.gz", SLOW_CSV_GZ, "application/gzip")})
    again_s = time.monotonic() - again_started
    assert (again.status_code, again.json()) == (
        409,
        {
            "detail": f"again.csv.gz: identical content was already imported as run {slow_response.json()['id']} "
            "('slow.csv.gz')",
            "existing_run_id": slow_response.json()["id"],
        },
    )
    assert again_s < import_s / 4, (again_s, import_s)
    assert [run["name"] for run in importer.get("/api/runs").json()] == ["slow.csv.gz", "small.csv"]  # newest first


BUSY = (
    f"the database is busy with another write (waited {BUSY_TIMEOUT_S} s for its lock); "
    f"try again in {BUSY_RETRY_AFTER_S} s"
)


def test_a_write_that_waits_past_the_busy_timeout_is_a_503_with_retry_after(
    server: LiveServer, add_account, database: Database
) -> None:
    password = add_account("ada", Role.editor)
    sqlite = database.engine.dialect.name == "sqlite"
    client = None if sqlite else signed_in(server, "ada", password)
    # Another writer (a stuck process) holds the lock the request's transaction needs, past the busy timeout.
    with database.write_session() as holder:
        if sqlite:
            holder.execute(text("SELECT 1"))  # a write session's transaction begins IMMEDIATE: SQLite's one writer
            # The sign-in's own write (its session) waits, and the form says to come back.
            answer = httpx2.post(f"{server.url}/sign-in", data={"name": "ada", "password": password}, timeout=TIMEOUT_S)
            assert BUSY in answer.text
        else:
            holder.execute(text("LOCK TABLE run IN EXCLUSIVE MODE"))  # reads go on, writes to runs wait
            answer = client.post("/api/runs", files={"file": ("small.csv", SMALL_CSV, "text/csv")})
            assert answer.json() == {"detail": BUSY}
        assert (answer.status_code, answer.headers["retry-after"]) == (503, str(BUSY_RETRY_AFTER_S))
        holder.rollback()
    with database.read_session() as session:
        assert session.execute(text("SELECT count(*) FROM run")).scalar_one() == 0
