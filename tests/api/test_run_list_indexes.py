"""The run lists' strategy and plan filters are answered from indexes (migration 0008), not by reading
every run row: the queries ``list_runs`` and ``count_runs`` send are the ones the database plans with them."""

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import event

from emuplan.store import runs
from emuplan.store.db import Database, alembic_config

pytestmark = pytest.mark.both_databases

LIST_INDEXES = {"ix_run_plan_id", "ix_run_strategy_folded"}


def sent_queries(database: Database, read) -> list[tuple[str, object]]:
    """The SELECT statements (with their parameters) that ``read(session)`` sends."""
    sent = []

    def record(_connection, _cursor, statement, parameters, _context, _executemany):
        if statement.startswith("SELECT"):
            sent.append((statement, parameters))

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        with database.read_session() as session:
            read(session)
    finally:
        event.remove(database.engine, "before_cursor_execute", record)
    return sent


def query_plan(database: Database, statement: str, parameters) -> str:
    with database.engine.connect() as connection:
        if database.engine.dialect.name == "sqlite":
            rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            return "\n".join(row[-1] for row in rows)
        # A handful of rows is read faster sequentially: forbid that, to see whether an index serves the query.
        connection.exec_driver_sql("SET enable_seqscan = off")
        return "\n".join(row[0] for row in connection.exec_driver_sql(f"EXPLAIN {statement}", parameters).all())


@pytest.mark.parametrize(
    ("filters", "index"),
    [({"strategy": "Data"}, "ix_run_strategy_folded"), ({"plan_id": 3}, "ix_run_plan_id")],
)
def test_a_filtered_page_and_its_count_are_found_through_an_index(database: Database, filters, index) -> None:
    def read(session):
        assert runs.list_runs(session, **filters, limit=runs.RUNS_PER_PAGE, offset=50) == []
        assert runs.count_runs(session, **filters) == 0

    listed, counted = sent_queries(database, read)
    assert "ORDER BY run.id DESC" in listed[0] and "count(*)" in counted[0]
    for statement, parameters in (listed, counted):
        assert index in query_plan(database, statement, parameters), statement


def test_migration_0008_adds_the_list_indexes_and_takes_them_back(database_url: str) -> None:
    def run_indexes() -> set[str]:
        # SQLAlchemy's reflection skips SQLite's expression indexes: ask the catalogues.
        engine = sa.create_engine(database_url)
        catalogue = (
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'run' AND sql IS NOT NULL"
            if engine.dialect.name == "sqlite"
            else "SELECT indexname FROM pg_indexes WHERE tablename = 'run' AND indexname <> 'run_pkey'"
        )
        try:
            with engine.connect() as connection:
                return set(connection.exec_driver_sql(catalogue).scalars())
        finally:
            engine.dispose()

    assert run_indexes() == {"ix_run_content_sha256", *LIST_INDEXES}
    command.downgrade(alembic_config(database_url), "0007")
    assert run_indexes() == {"ix_run_content_sha256"}
    command.upgrade(alembic_config(database_url), "head")
    assert run_indexes() == {"ix_run_content_sha256", *LIST_INDEXES}
