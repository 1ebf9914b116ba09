"""The run lists' strategy, plan and tag filters are answered from indexes (migrations 0008 and 0009), not
by reading every run row, and a page far from the newest walks an index of the runs in id order without
sorting them (on SQLite ``ix_run_id``, migration 0011), from the oldest end when the page is in the older
half: the queries ``list_runs`` and ``count_runs`` send are the ones the database plans so."""

import pytest
import sqlalchemy as sa
from alembic import command

from emuplan.store import runs
from emuplan.store.db import Database, alembic_config
from sql_capture import query_plan, sent_queries

pytestmark = pytest.mark.both_databases

LIST_INDEXES = {"ix_run_plan_id", "ix_run_strategy_folded"}
# A platform's series (migration 0014, tests/api/test_series_indexes.py).
SERIES_INDEXES = {"ix_run_platform_id", "ix_run_platform_ranks_id"}
# The list's sorts, one (column, id) index each (migrations 0017, 0018; by platform ix_run_platform_id).
SORT_INDEXES = {
    "ix_run_name_id", "ix_run_p50_id", "ix_run_peak_busbw_id", "ix_run_ranks_id", "ix_run_size_max_id",
    "ix_run_verdict_id", "ix_run_first_collective_id",
}  # fmt: skip


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({"strategy": "Data"}, "ix_run_strategy_folded"),
        ({"plan_id": 3}, "ix_run_plan_id"),
        ({"tag": "Fabric-A"}, "ix_run_tag_folded"),
        ({"tag": "Fabric-A", "strategy": "data"}, "ix_run_tag_folded"),
    ],
)
def test_a_filtered_page_and_its_count_are_found_through_an_index(database: Database, filters, index) -> None:
    def read(session):
        assert runs.list_runs(session, runs.RunFilters(**filters), limit=runs.RUNS_PER_PAGE, offset=50) == []
        assert runs.count_runs(session, runs.RunFilters(**filters)) == runs.RunCount(0, exact=True)

    listed, counted = sent_queries(database, read)
    assert "ORDER BY run" in listed[0] and "count(*)" in counted[0]
    for statement, parameters in (listed, counted):
        assert index in query_plan(database, statement, parameters), statement
    if "tag" in filters:
        # (folded_tag, run_id) hands a tag's runs over in id order: nothing is sorted.
        assert not {"TEMP", "Sort"} & set(query_plan(database, *listed, forbid_sort=True).split()), listed


def test_a_tag_alone_is_counted_in_its_index_without_reading_runs(database: Database) -> None:
    (counted,) = sent_queries(database, lambda session: runs.count_runs(session, runs.RunFilters(tag="Fabric-A")))
    assert "FROM run_tag" in counted[0] and "run." not in counted[0]
    assert "ix_run_tag_folded" in query_plan(database, *counted)


def test_a_deep_page_walks_an_index_of_the_ids_in_order_without_sorting(database: Database) -> None:
    def read(session):
        assert runs.list_runs(session, limit=runs.RUNS_PER_PAGE, offset=199 * runs.RUNS_PER_PAGE) == []

    (listed,) = sent_queries(database, read)
    plan = query_plan(database, *listed, forbid_sort=True)
    walk = (
        "SCAN run USING COVERING INDEX ix_run_id"
        if database.engine.dialect.name == "sqlite"
        else "Index Scan Backward using run_pkey on run"
    )
    assert walk in plan, plan
    assert not {"TEMP", "Sort"} & set(plan.split()), plan


@pytest.mark.parametrize(
    ("filters", "ids", "walk"),
    [
        (
            {},
            "run.id",
            {"sqlite": "SCAN run USING COVERING INDEX ix_run_id", "postgresql": "Index Only Scan using run_pkey"},
        ),
        (
            {"tag": "Nightly"},
            "run_tag.run_id",
            {
                "sqlite": "SEARCH run_tag USING COVERING INDEX ix_run_tag_folded (folded_tag=?)",
                "postgresql": "Index Only Scan using ix_run_tag_folded",
            },
        ),
    ],
)
def test_a_page_in_the_older_half_walks_its_index_from_the_oldest_without_sorting(
    database: Database, filters, ids, walk
) -> None:
    def read(session):
        assert (
            runs.list_runs(session, runs.RunFilters(**filters), limit=runs.RUNS_PER_PAGE, offset=9_950, total=10_000)
            == []
        )

    ((statement, parameters),) = sent_queries(database, read)
    # The last page of 10,000 matches: the oldest 50, skipping none (SQLite's plan does not say which way).
    assert f"ORDER BY {ids} ASC" in statement, statement
    limit_and_offset = list(parameters.values() if isinstance(parameters, dict) else parameters)[-2:]
    assert limit_and_offset == [runs.RUNS_PER_PAGE, 0]
    plan = query_plan(database, statement, parameters, forbid_sort=True)
    # PostgreSQL names the walk's way: "Index Only Scan Backward" would be the newest first.
    assert walk[database.engine.dialect.name] in plan, plan
    assert not {"TEMP", "Sort"} & set(plan.split()), plan


@pytest.mark.parametrize(
    ("sort", "index"),
    [
        ("name", "ix_run_name_id"),
        ("p50", "ix_run_p50_id"),
        ("busbw", "ix_run_peak_busbw_id"),
        ("ranks", "ix_run_ranks_id"),
        ("size", "ix_run_size_max_id"),
        ("verdict", "ix_run_verdict_id"),
        ("platform", "ix_run_platform_id"),
        ("collective", "ix_run_first_collective_id"),
    ],
)
def test_each_part_of_a_sorted_page_walks_the_sorts_index_without_sorting(database: Database, sort, index) -> None:
    def read(session):
        assert runs.list_runs(session, sort=sort, limit=runs.RUNS_PER_PAGE) == []

    # An empty list: every part is read. The runs with the figure (each verdict) are walked in the sort's index;
    # those without it in id order, through that index or the ids' (PostgreSQL's choice on a few rows).
    *with_figure, without = [query for query in sent_queries(database, read) if "ORDER BY" in query[0]]
    assert len(with_figure) == (4 if sort == "verdict" else 1), with_figure  # fail, degraded, pass, not judged
    for statement, parameters in [*with_figure, without]:
        plan = query_plan(database, statement, parameters, forbid_sort=True)
        assert not {"TEMP", "Sort"} & set(plan.split()), plan
        assert index in plan or (statement, parameters) == without, plan


def test_sqlite_counts_all_runs_in_the_index_of_the_ids_not_the_run_rows(database: Database) -> None:
    if database.engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL checks each counted row's visibility in its heap, whichever index it walks")
    (counted,) = sent_queries(database, runs.count_runs)
    assert query_plan(database, *counted) == "SCAN run USING COVERING INDEX ix_run_id"


def run_indexes(database_url: str) -> set[str]:
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


def test_migration_0008_adds_the_list_indexes_and_takes_them_back(database_url: str) -> None:
    command.downgrade(alembic_config(database_url), "0010")
    assert run_indexes(database_url) == {"ix_run_content_sha256", *LIST_INDEXES}
    command.downgrade(alembic_config(database_url), "0007")
    assert run_indexes(database_url) == {"ix_run_content_sha256"}
    command.upgrade(alembic_config(database_url), "0010")
    assert run_indexes(database_url) == {"ix_run_content_sha256", *LIST_INDEXES}


def test_migration_0011_adds_the_id_index_on_sqlite_only_and_takes_it_back(database_url: str) -> None:
    id_index = {"ix_run_id"} if database_url.startswith("sqlite") else set()
    assert run_indexes(database_url) == {
        "ix_run_content_sha256", *LIST_INDEXES, *id_index, *SERIES_INDEXES, *SORT_INDEXES
    }  # fmt: skip
    command.downgrade(alembic_config(database_url), "0010")
    assert run_indexes(database_url) == {"ix_run_content_sha256", *LIST_INDEXES}
    command.upgrade(alembic_config(database_url), "0011")
    assert run_indexes(database_url) == {"ix_run_content_sha256", *LIST_INDEXES, *id_index}
