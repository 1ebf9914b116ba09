"""Migration 0012 adds the ``platform`` table and the ``platform`` columns of runs and plans, and takes them away
again: every run and plan is kept, and on SQLite the run table keeps what a rebuild would lose."""

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import create_engine

from emuplan.store.db import alembic_config, migrate
from old_schema import RUN, old_run

pytestmark = pytest.mark.both_databases

STRATEGY_INDEX_SQL = "CREATE INDEX ix_run_strategy_folded ON run (lower(strategy))"


def columns(connection: sa.Connection, table: str) -> set[str]:
    return {column["name"] for column in sa.inspect(connection).get_columns(table)}


def test_0012_adds_the_platform_table_and_columns_and_takes_them_back(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(alembic_config(url), "0011")
    engine = create_engine(url)
    at_0011 = {key: value for key, value in old_run("kept").items() if key != "summary"}  # run_summary's since 0009
    with engine.begin() as connection:
        run_id = connection.execute(RUN.insert().values(**at_0011).returning(RUN.c.id)).scalar_one()
    migrate(url)
    with engine.begin() as connection:
        assert sa.inspect(connection).has_table("platform")
        assert "platform" in columns(connection, "run") and "platform" in columns(connection, "plan")
        assert connection.execute(sa.text("SELECT id, name, platform FROM run")).all() == [(run_id, "kept", None)]
        connection.execute(sa.text("UPDATE run SET platform = 'h100-ndr'"))
    command.downgrade(alembic_config(url), "0011")
    with engine.begin() as connection:
        assert not sa.inspect(connection).has_table("platform")
        assert "platform" not in columns(connection, "run") | columns(connection, "plan")
        assert connection.execute(sa.text("SELECT id, name FROM run")).all() == [(run_id, "kept")]
        if connection.dialect.name == "sqlite":
            # Dropped in place, not rebuilt: the expression index and AUTOINCREMENT are still there.
            index_sql = "SELECT sql FROM sqlite_master WHERE name = 'ix_run_strategy_folded'"
            assert connection.exec_driver_sql(index_sql).scalar_one() == STRATEGY_INDEX_SQL
            table_sql = connection.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'run'").scalar_one()
            assert "AUTOINCREMENT" in table_sql
    migrate(url)
    with engine.begin() as connection:
        assert connection.execute(sa.text("SELECT id, platform FROM run")).all() == [(run_id, None)]
    engine.dispose()
