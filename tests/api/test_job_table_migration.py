"""Migration 0021 moves the measurement, simulation and relabel jobs' three tables into the one ``job`` table,
ids kept, so every job's URL answers as before; a downgrade moves them back."""

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from emuplan.main import create_app
from emuplan.settings import Settings
from emuplan.store.db import alembic_config, migrate

pytestmark = pytest.mark.both_databases

STARTED = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
FINISHED = datetime(2026, 12, 1, 9, 5, tzinfo=UTC)
LIFETIME = {"cancel_requested": False, "heartbeat_at": FINISHED, "started_at": STARTED, "finished_at": FINISHED}
ROWS = {
    "measurement_job": [
        {"id": "m-done", "plan_id": 3, "request": {"world_size": 2, "backend": "gloo", "scheduling": "normal"},
         "state": "succeeded", "iterations_done": 12, "iterations_total": 12, "warmup": False, "error": None,
         "run_id": 7, "host": "box", "running_on": None, **LIFETIME},
        {"id": "m-live", "plan_id": 3, "request": {"world_size": 2, "backend": "gloo"}, "state": "running",
         "iterations_done": 4, "iterations_total": 12, "warmup": True, "error": None, "run_id": None, "host": "box",
         "running_on": "box", **LIFETIME, "heartbeat_at": STARTED, "finished_at": None},
    ],
    "simulation_job": [
        {"id": "s-failed", "plan_id": 3, "request": {"gpu": "h100-sxm", "utilisation": 0.5, "timeout_s": 60},
         "state": "failed", "ranks_done": 2, "ranks_total": 8, "error": "ASTRA-sim stopped", "result": None,
         **LIFETIME},
    ],
    "relabel_job": [
        {"id": "r-cancelled", "run_id": 7, "request": {"collectives": {"a": "b"}}, "state": "cancelled",
         "bytes_done": 10, "bytes_total": 100, "error": "cancelled; the run is unchanged", **LIFETIME},
    ],
}  # fmt: skip


def rows(connection: sa.Connection, name: str) -> list[dict]:
    table = sa.Table(name, sa.MetaData(), autoload_with=connection)
    return [dict(row) for row in connection.execute(sa.select(table).order_by(table.c.id)).mappings()]


def test_the_three_job_tables_become_one_and_come_back(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(alembic_config(url), "0020")
    engine = create_engine(url)
    with engine.begin() as connection:
        for name, stored in ROWS.items():
            connection.execute(sa.Table(name, sa.MetaData(), autoload_with=connection).insert(), stored)
        before = {name: rows(connection, name) for name in ROWS}
    migrate(url)
    with engine.begin() as connection:
        holds = dict(connection.execute(sa.text("SELECT id, holds FROM job")).all())
    assert holds == {"m-done": None, "m-live": "measurement on box", "s-failed": None, "r-cancelled": None}
    with TestClient(create_app(Settings(database_url=url, demo=False))) as client:
        measured = client.get("/api/measurements/m-done").json()
        assert {key: measured[key] for key in ("state", "iterations_done", "run_id", "world_size", "scheduling")} == {
            "state": "succeeded", "iterations_done": 12, "run_id": 7, "world_size": 2, "scheduling": "normal"
        }  # fmt: skip
        simulated = client.get("/api/simulations/s-failed").json()
        assert (simulated["ranks_done"], simulated["ranks_total"], simulated["error"]) == (2, 8, "ASTRA-sim stopped")
        relabelled = client.get("/api/relabel-jobs/r-cancelled").json()
        assert (relabelled["bytes_done"], relabelled["bytes_total"], relabelled["url"]) == (
            10, 100, "/api/relabel-jobs/r-cancelled"
        )  # fmt: skip
        generic = client.get("/api/jobs/s-failed").json()
        assert (generic["kind"], generic["plan_id"], generic["progress"]) == (
            "simulation", 3, {"ranks_done": 2, "ranks_total": 8}
        )  # fmt: skip
        assert client.get("/api/simulations/m-done").status_code == 404
    command.downgrade(alembic_config(url), "0020")
    with engine.begin() as connection:
        assert {name: rows(connection, name) for name in ROWS} == before
        assert "job" not in sa.inspect(connection).get_table_names()
    engine.dispose()
