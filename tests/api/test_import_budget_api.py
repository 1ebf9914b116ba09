"""The import budget over HTTP: compressed Arrow/Feather bombs refused with 413 and nothing stored, and an
upload that does not fit beside the imports in flight turned away with 503 + Retry-After at once."""

import http.client
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from emuplan.main import create_app
from emuplan.results.budget import POOL, ImportBudget, ImportLimits
from emuplan.settings import Settings
from emuplan.store.db import Database
from emuplan.store.tables import Run
from live_server import LiveServer, start_server, stop_server


def zstd_feather(rows: int, batches: int) -> bytes:
    batch = pa.record_batch([pa.array(np.zeros(rows))], names=["time_ms"])
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, batch.schema, options=ipc.IpcWriteOptions(compression="zstd")) as writer:
        for _ in range(batches):
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def stored_runs(database_url: str) -> int:
    database = Database(database_url)
    try:
        with database.read_session() as session:
            return len(session.exec(select(Run)).all())
    finally:
        database.dispose()


@pytest.mark.both_databases
@pytest.mark.parametrize(
    ("rows", "batches", "settings", "message"),
    [
        # The audit's 6.6 KB file, stored as a run of 25 M samples (0.16 → 2.08 GB) before.
        (25_000_000, 1, {}, "bomb.feather: more than 20000000 rows (EMUPLAN_MAX_IMPORT_ROWS)"),
        (100_000, 20, {"max_decompressed_bytes": 4_000_000}, "bomb.feather: decompresses to more than 4000000 bytes"),
    ],
    ids=["the audit's 6.6 KB feather", "decompressed bytes"],
)
def test_feather_bombs_are_refused_with_413_and_nothing_is_stored(database_url, rows, batches, settings, message):
    data = zstd_feather(rows, batches)
    assert len(data) < 20_000
    with TestClient(create_app(Settings(database_url=database_url, demo=False, **settings))) as client:
        response = client.post("/api/runs", files={"file": ("bomb.feather", data)})
    assert response.status_code == 413
    assert response.json()["detail"].startswith(message)
    assert stored_runs(database_url) == 0
    assert POOL.reserved == 0


BOUNDARY = "budget-boundary"


def multipart(file_name: str, rows: int) -> bytes:
    # Rows of ~250 bytes: the text, not the rows, is most of what this upload holds.
    note = file_name.ljust(230, "x")
    lines = "".join(f"{index},8,{1 + index % 7}.5,{note}\n" for index in range(rows))
    return (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n'
        f"Content-Type: text/csv\r\n\r\niteration,size,time_ms,note\n{lines}\r\n--{BOUNDARY}--\r\n"
    ).encode()


def send_headers(url: str, body_bytes: int) -> http.client.HTTPConnection:
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
    connection.putrequest("POST", "/api/runs")
    connection.putheader("Content-Type", f"multipart/form-data; boundary={BOUNDARY}")
    connection.putheader("Content-Length", str(body_bytes))
    connection.endheaders()
    return connection


@pytest.fixture
def small_pool_server(database_url: str) -> Iterator[LiveServer]:
    # Room for one 600 KB upload (its text and 2,500 rows at 80 bytes: 0.8 MB), not for two (1.2 MB declared).
    live = start_server(Settings(database_url=database_url, demo=False, import_memory_bytes=1_000_000))
    yield live
    stop_server(live)


def test_an_upload_that_does_not_fit_beside_one_in_flight_gets_503_at_once(small_pool_server: LiveServer):
    first_body, second_body = multipart("first.csv", 2500), multipart("second.csv", 2500)
    assert 600_000 < len(first_body) < 700_000
    first = send_headers(small_pool_server.url, len(first_body))
    first.send(first_body[:65536])  # the first import is admitted, and its body still streaming in
    deadline = time.monotonic() + 10
    while POOL.reserved != len(first_body) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert POOL.reserved == len(first_body)

    second = send_headers(small_pool_server.url, len(second_body))
    second.send(second_body)
    refused = second.getresponse()
    assert (refused.status, refused.getheader("Retry-After")) == (503, "10")
    assert refused.getheader("Content-Type") == "application/json"
    assert b"the imports in progress hold the 1000000 bytes of memory all imports share" in refused.read()

    first.send(first_body[65536:])
    answer = first.getresponse()
    assert answer.status == 201, answer.read()
    answer.read()
    assert POOL.reserved == 0
    # Alone, the second one fits.
    second = send_headers(small_pool_server.url, len(second_body))
    second.send(second_body)
    assert second.getresponse().status == 201
    assert stored_runs(small_pool_server.settings.database_url) == 2


def test_the_import_answers_503_and_507_are_documented(client: TestClient) -> None:
    """Schemathesis cannot make the pool busy or the disk full, so it never sees these answers: OpenAPI lists
    them, with the Retry-After the 503 carries, on the two routes that import (an upload, a huge run relabelled)."""
    paths = client.get("/openapi.json").json()["paths"]
    for operation in (paths["/api/runs"]["post"], paths["/api/runs/{run_id}"]["patch"]):
        busy, disk_full = operation["responses"]["503"], operation["responses"]["507"]
        assert busy["headers"]["Retry-After"]["schema"] == {"type": "integer"}
        for answer in (busy, disk_full):
            assert answer["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorMessage"}
    assert "503" not in paths["/api/runs/{run_id}/stats"]["get"]["responses"]


@pytest.mark.both_databases
def test_a_run_summarised_again_in_memory_holds_its_rows_in_the_shared_pool(database_url: str) -> None:
    """Relabelling a run loads its tables whole: 5,000 rows hold 400 KB (80 bytes each) beside the imports in
    flight, and are turned away with 503 when those hold the pool, as an upload is; the run is left as it was."""
    settings = Settings(database_url=database_url, demo=False, import_memory_bytes=1_000_000)
    csv = "iteration,size,time_ms,collective\n" + "".join(f"{i},8,{1 + i % 7}.5,all_reduce\n" for i in range(5000))
    relabel = {"collectives": {"all_reduce": "all_gather"}}
    with TestClient(create_app(settings)) as client:
        run_id = client.post("/api/runs", files={"file": ("r.csv", csv.encode())}).json()["id"]
        with ImportBudget(ImportLimits.from_settings(settings)) as in_flight:
            in_flight.holds(700_000, "another.csv")
            busy = client.patch(f"/api/runs/{run_id}", json=relabel)
            assert POOL.reserved == 700_000
        assert (busy.status_code, busy.headers["Retry-After"]) == (503, "10")
        assert busy.json()["detail"] == (
            "r.csv: the imports in progress hold the 1000000 bytes of memory all imports share "
            "(EMUPLAN_IMPORT_MEMORY_BYTES); try again in 10 s"
        )
        assert client.get(f"/api/runs/{run_id}").json()["collectives"] == ["all_reduce"]
        relabelled = client.patch(f"/api/runs/{run_id}", json=relabel)
        assert relabelled.status_code == 200, relabelled.text
        assert relabelled.json()["collectives"] == ["all_gather"]
    assert POOL.reserved == 0
