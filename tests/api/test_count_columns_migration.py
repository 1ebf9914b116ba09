"""Migration 0010 declares ``plan.trials`` and the run counts BIGINT on SQLite (PostgreSQL has them so since
0005) by rebuilding ``plan`` and ``run``: every row, the rows that hang off them, their foreign keys, the
expression index, AUTOINCREMENT and the highest id handed out all survive the upgrade and the downgrade."""

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import create_engine

from emuplan.store.db import alembic_config
from emuplan.store.tables import CachedSummary, RunCurves, RunTable, RunTag
from old_schema import PLAN_BEFORE_0012, RUN_BEFORE_0012

pytestmark = pytest.mark.both_databases

PLAN, RUN = PLAN_BEFORE_0012, RUN_BEFORE_0012
HANGING_OFF_RUN = (CachedSummary.__table__, RunTag.__table__, RunCurves.__table__, RunTable.__table__)
CREATED = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)
BEYOND_INT32 = 2**40
COUNT_COLUMNS = [("plan", "trials"), ("run", "sample_count"), ("run", "ranks"), ("run", "hosts")]
STRATEGY_INDEX_SQL = "CREATE INDEX ix_run_strategy_folded ON run (lower(strategy))"


def plan_row(id: int) -> dict:
    return {
        "id": id, "name": f"plan {id}", "model_name": "llama", "model_definition_id": None, "strategy": "data",
        "mode": "training", "trials": BEYOND_INT32 + id, "inputs": {"world": 8}, "request": None,
        "workload": {"collectives": []}, "created_at": CREATED,
    }  # fmt: skip


def run_row(id: int, plan_id: int | None, ranks: int | None) -> dict:
    return {
        "id": id, "name": f"run {id}", "plan_id": plan_id, "strategy": "Data", "tags": ["Fabric-A"],
        "source_format": "per-iteration-csv", "origin": "imported", "origin_detail": "", "file_name": "r.csv",
        "content_sha256": f"{id:064x}", "sample_count": BEYOND_INT32 + id, "ranks": ranks, "hosts": ranks,
        "warnings": ["one"], "p50_us": 1.5, "p99_us": 9.25, "created_at": CREATED,
    }  # fmt: skip


PLANS = [plan_row(1), plan_row(2)]
RUNS = [run_row(1, 1, BEYOND_INT32), run_row(2, None, None)]
HANGING_ROWS = [
    [(1, {"overall": {"p50_us": 1.5}}), (2, {})],
    [(1, "fabric-a"), (2, "fabric-a")],
    [(1, {"curves": [1, 2]})],
    [(1, "samples", 3, b"PAR1")],
]


def without_id(row: dict) -> dict:
    return {name: value for name, value in row.items() if name != "id"}


def rows(connection: sa.Connection, table: sa.Table) -> list[tuple]:
    return connection.execute(sa.select(table).order_by(*table.primary_key.columns)).all()


def as_tuples(table: sa.Table, values: list[dict]) -> list[tuple]:
    return [tuple(row[column.name] for column in table.columns) for row in values]


def declared_count_types(connection: sa.Connection) -> list[str]:
    declared = {
        (table, column["name"]): str(column["type"])
        for table in ("plan", "run")
        for column in sa.inspect(connection).get_columns(table)
    }
    return [declared[column] for column in COUNT_COLUMNS]


def assert_everything_kept(connection: sa.Connection) -> None:
    assert rows(connection, PLAN) == as_tuples(PLAN, PLANS)
    assert rows(connection, RUN) == as_tuples(RUN, RUNS)
    assert [rows(connection, table) for table in HANGING_OFF_RUN] == HANGING_ROWS
    if connection.dialect.name == "sqlite":
        index_sql = "SELECT sql FROM sqlite_master WHERE name = 'ix_run_strategy_folded'"
        assert connection.exec_driver_sql(index_sql).scalar_one() == STRATEGY_INDEX_SQL
        sequences = "SELECT name, seq FROM sqlite_sequence WHERE name IN ('plan', 'run') ORDER BY name"
        assert connection.exec_driver_sql(sequences).all() == [("plan", 3), ("run", 3)]


def test_the_counts_become_bigint_on_sqlite_and_come_back_with_every_row(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(alembic_config(url), "0009")
    engine = create_engine(url)
    with engine.begin() as connection:
        # The database hands out the ids (a PostgreSQL sequence only counts those it gave).
        connection.execute(PLAN.insert(), [without_id(row) for row in [*PLANS, plan_row(3)]])
        connection.execute(RUN.insert(), [without_id(row) for row in [*RUNS, run_row(3, None, None)]])
        # The newest plan and run are deleted: their ids must never be handed out again.
        connection.execute(RUN.delete().where(RUN.c.id == 3))
        connection.execute(PLAN.delete().where(PLAN.c.id == 3))
        for table, values in zip(HANGING_OFF_RUN, HANGING_ROWS, strict=True):
            connection.execute(table.insert(), [dict(zip(table.columns.keys(), row, strict=True)) for row in values])
        on_sqlite = connection.dialect.name == "sqlite"
        assert declared_count_types(connection) == (["INTEGER"] * 4 if on_sqlite else ["BIGINT"] * 4)
        assert_everything_kept(connection)

    command.upgrade(alembic_config(url), "0010")
    with engine.begin() as connection:
        assert declared_count_types(connection) == ["BIGINT"] * 4
        assert_everything_kept(connection)

    command.downgrade(alembic_config(url), "0009")
    with engine.begin() as connection:
        assert declared_count_types(connection) == (["INTEGER"] * 4 if on_sqlite else ["BIGINT"] * 4)
        assert_everything_kept(connection)

    command.upgrade(alembic_config(url), "0010")
    with engine.begin() as connection:
        if on_sqlite:
            connection.exec_driver_sql("PRAGMA foreign_keys=ON")
        assert_everything_kept(connection)
        # The foreign keys still act: deleting the plan clears the run's plan, deleting the run its rows.
        connection.execute(PLAN.delete().where(PLAN.c.id == 1))
        connection.execute(RUN.delete().where(RUN.c.id == 1))
        assert connection.execute(sa.select(RUN.c.id, RUN.c.plan_id)).all() == [(2, None)]
        assert [[row[0] for row in rows(connection, table)] for table in HANGING_OFF_RUN] == [[2], [2], [], []]
        new_plan = connection.execute(PLAN.insert().values(without_id(plan_row(0))).returning(PLAN.c.id))
        new_run = connection.execute(RUN.insert().values(without_id(run_row(0, None, 1))).returning(RUN.c.id))
        assert (new_plan.scalar_one(), new_run.scalar_one()) == (4, 4)
    engine.dispose()
