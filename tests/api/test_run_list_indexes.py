"""The run lists' strategy and plan filters are answered from indexes (migration 0008), not by reading
every run row: the queries ``list_runs`` and ``count_runs`` send are the ones the database plans with them."""

import pytest
import sqlalchemy as sa
from alembic import command

from emuplan.store import runs
from emuplan.store.db import Database, alembic_config
from sql_capture import query_plan, sent_queries

pytestmark = pytest.mark.both_databases

LIST_INDEXES = {"ix_run_plan_id", "ix_run_strategy_folded"}


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
