"""Ids are never handed out twice, so a share link never shows a run it was not made with."""

import pytest
import sqlalchemy as sa
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from emuplan.store.db import alembic_config, migrate
from emuplan.store.tables import Run, RunTable
from old_schema import RUN, old_run

pytestmark = pytest.mark.both_databases

RUN_TABLE = RunTable.__table__


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


def test_the_migration_keeps_every_row_and_continues_after_the_highest_id(empty_database_url: str) -> None:
    command.upgrade(alembic_config(empty_database_url), "0002")
    engine = create_engine(empty_database_url)
    with engine.begin() as connection:
        first, second = (
            connection.execute(RUN.insert().values(**old_run(name)).returning(RUN.c.id)).scalar_one()
            for name in ("old run", "newest run")
        )
        connection.execute(RUN_TABLE.insert().values(run_id=first, kind="samples", row_count=1, parquet=b"\0"))
    migrate(empty_database_url)
    with engine.begin() as connection:
        if connection.dialect.name == "sqlite":
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
        assert connection.execute(sa.select(RUN.c.id, RUN.c.name).order_by(RUN.c.id)).all() == [
            (1, "old run"),
            (2, "newest run"),
        ]
        connection.execute(RUN.delete().where(RUN.c.id == second))
        assert connection.execute(sa.select(RUN_TABLE.c.run_id, RUN_TABLE.c.kind)).all() == [(1, "samples")]
        connection.execute(RUN.delete().where(RUN.c.id == first))
        assert connection.execute(sa.select(sa.func.count()).select_from(RUN_TABLE)).scalar() == 0  # the cascade
        # The statistics are run_summary's now; a run states its kind since 0013.
        at_head = {key: value for key, value in old_run("new run", kind="distribution").items() if key != "summary"}
        head_run = Run.__table__
        newcomer = connection.execute(head_run.insert().values(**at_head).returning(head_run.c.id)).scalar_one()
    engine.dispose()
    assert newcomer == 3
