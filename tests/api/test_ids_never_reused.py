"""Ids are never handed out twice, so a share link never shows a run it was not made with."""

import sqlite3
from pathlib import Path

from alembic import command
from fastapi.testclient import TestClient

from emuplan.store.db import alembic_config, migrate


def add_run(client: TestClient, name: str, offset: float) -> int:
    csv = "iteration,size,collective,time_ms\n" + "".join(f"{i},1024,all_reduce,{offset + i / 10}\n" for i in range(5))
    response = client.post("/api/runs", files={"file": (f"{name}.csv", csv.encode())}, data={"name": name})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_a_deleted_runs_id_is_never_given_to_a_new_run_and_the_share_link_keeps_its_runs(client: TestClient) -> None:
    first, second = add_run(client, "run 44", 10), add_run(client, "run 45", 20)
    comparison = client.post("/api/comparisons", json={"name": "44 vs 45", "run_ids": [first, second]}).json()
    token = client.post(f"/api/comparisons/{comparison['id']}/shares", json={}).json()["token"]
    assert client.delete(f"/api/runs/{second}").status_code == 204
    newcomer = add_run(client, "uploaded later", 30)
    assert newcomer == second + 1
    shared = client.get(f"/api/shared/{token}").json()
    assert [(run["run_id"], run["name"]) for run in shared["runs"]] == [(first, "run 44")]
    assert client.get(f"/api/shared/{token}/runs/{second}/figures/cdf").status_code == 404


def test_the_migration_keeps_every_row_and_continues_after_the_highest_id(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    command.upgrade(alembic_config(url), "0001")
    with sqlite3.connect(tmp_path / "old.sqlite3") as connection:
        connection.execute(
            "INSERT INTO run (id, name, tags, source_format, origin, origin_detail, sample_count, warnings, summary,"
            " created_at) VALUES (7, 'old run', '[]', 'per-iteration-csv', 'imported', '', 1, '[]', '{}',"
            " '2026-11-21 10:00:00')"
        )
        connection.execute("INSERT INTO run_table (run_id, kind, row_count, parquet) VALUES (7, 'samples', 1, x'00')")
    migrate(url)
    with sqlite3.connect(tmp_path / "old.sqlite3") as connection:
        connection.execute("PRAGMA foreign_keys=ON")
        assert connection.execute("SELECT id, name FROM run").fetchall() == [(7, "old run")]
        assert connection.execute("SELECT run_id, kind FROM run_table").fetchall() == [(7, "samples")]
        connection.execute("DELETE FROM run WHERE id = 7")
        assert connection.execute("SELECT count(*) FROM run_table").fetchone() == (0,)  # the cascade survived
        connection.execute(
            "INSERT INTO run (name, tags, source_format, origin, origin_detail, sample_count, warnings, summary,"
            " created_at) VALUES ('new run', '[]', 'per-iteration-csv', 'imported', '', 1, '[]', '{}',"
            " '2026-11-23 10:00:00')"
        )
        assert connection.execute("SELECT id FROM run").fetchall() == [(8,)]
