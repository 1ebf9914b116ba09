"""SQLite: an upload's commit leaves its tables in the WAL, and they reach the database file once the answer
is out (the checkpoint used to run inside the commit: ~0.2 s of a 2M-row upload's answer)."""

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from emuplan.store.db import WAL_AUTOCHECKPOINT_PAGES, Database


def per_iteration_csv(rows: int) -> bytes:
    durations = np.random.default_rng(0).gamma(4.0, 5.0, rows)  # distinct values: ~1.4 MB of Parquet
    table = pa.table({"iteration": np.arange(rows), "time_us": durations})
    sink = io.BytesIO()
    pacsv.write_csv(table, sink)
    return sink.getvalue()


def test_connections_checkpoint_only_past_64_mb_of_wal(database_url):
    database = Database(database_url)
    try:
        with database.read_session() as session:
            pages = session.connection().exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
    finally:
        database.dispose()
    assert (pages, WAL_AUTOCHECKPOINT_PAGES) == (16384, 16384)


def test_an_uploads_tables_reach_the_database_file_after_the_answer(client, database_url):
    database_file = Path(database_url.removeprefix("sqlite:///"))
    before = database_file.stat().st_size
    answer = client.post("/api/runs", files={"file": ("run.csv", per_iteration_csv(200_000))})
    assert answer.status_code == 201
    samples = client.get(f"/api/runs/{answer.json()['id']}/samples.parquet").content
    assert len(samples) > 1_000_000
    # TestClient runs the background tasks before post() returns, as a server does after sending the answer.
    assert database_file.stat().st_size - before > len(samples)
