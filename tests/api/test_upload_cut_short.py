"""A failed or interrupted upload over real HTTP leaves nothing behind: no run, no table, no spooled file, and
the import budget's reservation released. The client is a raw socket, so that it can stop mid-body."""

import json
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlmodel import func, select

from emuplan.results.budget import POOL
from emuplan.settings import Settings
from emuplan.store.db import Database
from emuplan.store.tables import Run, RunTable
from live_server import LiveServer, start_server, stop_server

pytestmark = pytest.mark.both_databases
BOUNDARY = "cut-short-boundary"
LIMIT = 1_000_000
CSV = b"iteration,size,collective,time_us\n" + b"".join(
    b"%d,1024,all_reduce,%d.5\n" % (i, 10 + i % 7) for i in range(10_000)
)


def part(file_name: str, content: bytes) -> bytes:
    return (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n'
            "Content-Type: text/csv\r\n\r\n"
        ).encode()
        + content
        + b"\r\n"
    )


def body(*parts: bytes) -> bytes:
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


def headers(**extra: str) -> bytes:
    lines = [
        "POST /api/runs HTTP/1.1",
        "Host: 127.0.0.1",
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}",
        *(f"{name.replace('_', '-')}: {value}" for name, value in extra.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def connect(server: LiveServer) -> socket.socket:
    address = urlsplit(server.url)
    return socket.create_connection((address.hostname, address.port), timeout=30)


def answer_of(connection: socket.socket) -> tuple[int, bytes]:
    """The status and body of the server's answer (it closes the connection or sends a Content-Length)."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += connection.recv(65536)
    head, _, rest = received.partition(b"\r\n\r\n")
    length = int(
        next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")).split(b":")[1]
    )
    while len(rest) < length:
        rest += connection.recv(65536)
    return int(head.split(b" ")[1]), rest


@pytest.fixture
def spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory the server spools uploads to (the live server runs in this process)."""
    directory = tmp_path / "spool"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


@pytest.fixture
def server(database_url: str, spool: Path) -> Iterator[LiveServer]:
    live = start_server(Settings(database_url=database_url, demo=False, max_upload_bytes=LIMIT))
    yield live
    stop_server(live)


def wait_until(condition, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def assert_nothing_left(server: LiveServer, spool: Path) -> None:
    wait_until(lambda: not any(spool.iterdir()) and POOL.reserved == 0, "the spool deleted, the budget released")
    database = Database(server.settings.database_url)
    try:
        with database.read_session() as session:
            assert session.exec(select(func.count()).select_from(Run)).one() == 0
            assert session.exec(select(func.count()).select_from(RunTable)).one() == 0
    finally:
        database.dispose()


def test_a_client_that_goes_away_mid_body_leaves_nothing(server: LiveServer, spool: Path) -> None:
    sent = body(part("first.csv", CSV), part("second.csv", CSV))
    connection = connect(server)
    connection.sendall(headers(Content_Length=str(len(sent))) + sent[: len(sent) - 100_000])
    # The server is spooling (its directory exists, the declared size reserved) when the client leaves.
    wait_until(lambda: any(spool.iterdir()) and POOL.reserved == len(sent), "the upload spooling")
    connection.close()
    assert_nothing_left(server, spool)


def test_a_body_that_passes_the_limit_while_streaming_is_refused_with_413(server: LiveServer, spool: Path) -> None:
    # Chunked: no declared size to refuse up front, so the count stops it once past the limit.
    sent = body(*(part(f"part-{index}.csv", CSV) for index in range(5)))
    assert len(sent) > LIMIT
    connection = connect(server)
    connection.sendall(headers(Transfer_Encoding="chunked"))
    for start in range(0, len(sent), 65536):
        piece = sent[start : start + 65536]
        try:
            connection.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        except OSError:  # the server answered and closed: the rest is not read
            break
    status, answer = answer_of(connection)
    connection.close()
    assert (status, answer) == (
        413,
        b'{"detail":"Upload is larger than the limit of 1000000 bytes (EMUPLAN_MAX_UPLOAD_BYTES)."}',
    )
    assert_nothing_left(server, spool)


@pytest.mark.parametrize(
    ("sent", "status", "detail"),
    [
        (
            part("first.csv", CSV) + part("second.csv", CSV[:1000]),
            400,
            "The upload was cut short while second.csv was arriving (the body ended before its closing boundary): "
            "nothing was imported.",
        ),
        (
            b"--another-boundary\r\n" + part("first.csv", CSV),
            400,
            "Malformed multipart body: Expected boundary character 99, got 97 at index 4",
        ),
        (
            body(part("bad.csv", b"iteration,size,collective,time_us\n0,1024,all_reduce,fast\n")),
            400,
            "bad.csv: line 2, column 'time_us': 'fast' is not a number",
        ),
    ],
    ids=["no closing boundary", "malformed multipart", "a file that cannot be read"],
)
def test_a_body_that_cannot_be_read_is_refused_and_leaves_nothing(
    server: LiveServer, spool: Path, sent: bytes, status: int, detail: str
) -> None:
    connection = connect(server)
    connection.sendall(headers(Content_Length=str(len(sent))) + sent)
    answer = answer_of(connection)
    connection.close()
    assert (answer[0], json.loads(answer[1])) == (status, {"detail": detail})
    assert_nothing_left(server, spool)
