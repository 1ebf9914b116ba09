"""Migration 0018 gives stored runs their first collective (what the runs list sorts by collective) and the
indexes of the sorts by verdict and collective; a downgrade takes them away."""

import pytest
import sqlalchemy as sa
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from emuplan.main import create_app
from emuplan.settings import Settings
from emuplan.store.db import alembic_config, migrate
from old_schema import RUN_BEFORE_0018, old_run

pytestmark = pytest.mark.both_databases


def test_stored_runs_sort_by_their_first_collective_and_by_verdict(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(alembic_config(url), "0017")
    stored = {
        1: (["reduce_scatter", "all_gather"], "pass"),
        2: ([], None),
        3: (["all_reduce"], "fail"),
        4: (["all_gather"], "degraded"),
    }
    engine = create_engine(url)
    with engine.begin() as connection:
        for run_id, (collectives, verdict) in stored.items():
            row = {key: value for key, value in old_run(f"run {run_id}", id=run_id).items() if key != "summary"}
            connection.execute(
                RUN_BEFORE_0018.insert().values(
                    **row, kind="size-sweep", collectives=collectives, verdict=verdict, note="", facts={}
                )
            )
    migrate(url)
    with TestClient(create_app(Settings(database_url=url, demo=False))) as client:

        def ids(sort: str) -> list[int]:
            return [run["id"] for run in client.get("/api/runs", params={"sort": sort}).json()]

        assert ids("collective") == [4, 3, 1, 2]
        assert ids("verdict") == [3, 4, 1, 2]
    with engine.begin() as connection:
        indexes = {index["name"] for index in sa.inspect(connection).get_indexes("run")}
    assert {"ix_run_verdict_id", "ix_run_first_collective_id"} <= indexes
    command.downgrade(alembic_config(url), "0017")
    with engine.begin() as connection:
        columns = {column["name"] for column in sa.inspect(connection).get_columns("run")}
        indexes = {index["name"] for index in sa.inspect(connection).get_indexes("run")}
    assert "first_collective" not in columns
    assert not {"ix_run_verdict_id", "ix_run_first_collective_id"} & indexes
    engine.dispose()
