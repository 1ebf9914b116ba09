"""A platform's series is read from its newest index entries (migration 0014), never by reading and sorting every
run: the query ``services.trend.series_runs`` sends is the one the database plans so."""

import pytest
import sqlalchemy as sa
from alembic import command
from test_run_list_indexes import SERIES_INDEXES, run_indexes

from emuplan.services import trend
from emuplan.store.db import Database, alembic_config
from sql_capture import query_plan, sent_queries

pytestmark = pytest.mark.both_databases


@pytest.mark.parametrize(
    ("filters", "indexes"),
    [
        ({}, {"ix_run_platform_id"}),
        ({"tag": "Nightly"}, {"ix_run_platform_id"}),
        # On an empty table PostgreSQL may walk the list's (ranks, id) index instead (migration 0017): as free of
        # sorting; with runs of many platforms the (platform, ranks, id) one reads fewer entries.
        ({"ranks": 16}, {"ix_run_platform_ranks_id", "ix_run_ranks_id"}),
    ],
)
def test_a_series_walks_its_platform_index_newest_first_without_sorting(database: Database, filters, indexes) -> None:
    ((statement, parameters),) = sent_queries(
        database, lambda session: trend.series_runs(session, "h100-ndr", **filters)
    )
    assert "ORDER BY run.id DESC" in statement and "run_summary" not in statement, statement
    plan = query_plan(database, statement, parameters, forbid_sort=True)
    assert any(index in plan for index in indexes), plan
    assert not {"TEMP", "Sort"} & set(plan.split()), plan


def test_migration_0014_adds_the_series_indexes_and_figures_and_takes_them_back(database_url: str) -> None:
    def tables() -> set[str]:
        engine = sa.create_engine(database_url)
        try:
            return set(sa.inspect(engine).get_table_names())
        finally:
            engine.dispose()

    assert run_indexes(database_url) >= SERIES_INDEXES and "run_trend_figures" in tables()
    command.downgrade(alembic_config(database_url), "0013")
    assert not SERIES_INDEXES & run_indexes(database_url) and "run_trend_figures" not in tables()
    command.upgrade(alembic_config(database_url), "head")
    assert run_indexes(database_url) >= SERIES_INDEXES and "run_trend_figures" in tables()
