"""How many runs a list says it has: exact on SQLite, and on PostgreSQL exact up to ``EXACT_COUNT_LIMIT`` matches,
past it "about" the planner's estimate (counting would visit every match's row), with the pager's next link found
by asking for one run more than the page. The count a page sends reads at most the limit and one more."""

import re

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from emuplan.results.parse import parse_result_file
from emuplan.services import imports as run_imports
from emuplan.store import runs
from emuplan.store.db import Database
from sql_capture import query_plan, sent_queries

pytestmark = pytest.mark.both_databases

COPIES = runs.EXACT_COUNT_LIMIT + 60


def stored_runs(database: Database, count: int) -> None:
    """One imported run tagged ``nightly`` and copies of it in SQL (rows, tags) up to ``count`` runs, analysed on
    PostgreSQL as autovacuum would after so many inserts."""
    with database.writing() as session:
        parsed = parse_result_file(b"iteration,size,time_us\n0,8,1.5\n1,8,2.5\n", "r.csv")
        run_imports.save_run(session, parsed, name="run", tags=["Nightly"])
    with database.engine.begin() as connection:
        columns = [c["name"] for c in sa.inspect(connection).get_columns("run") if c["name"] not in ("id",)]
        copied = ", ".join("NULL" if name == "content_sha256" else name for name in columns)
        connection.exec_driver_sql(
            f"INSERT INTO run ({', '.join(columns)}) WITH RECURSIVE copy(n) AS "
            f"(SELECT 2 UNION ALL SELECT n + 1 FROM copy WHERE n < {count}) "
            f"SELECT {copied} FROM run, copy WHERE run.id = 1"
        )
        connection.exec_driver_sql(
            "INSERT INTO run_tag (run_id, folded_tag) SELECT id, 'nightly' FROM run WHERE id > 1"
        )
    if database.engine.dialect.name == "postgresql":
        with database.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("ANALYZE")


def test_a_count_at_the_limit_is_exact_on_both_databases(database: Database) -> None:
    stored_runs(database, runs.EXACT_COUNT_LIMIT)
    with database.read_session() as session:
        assert runs.count_runs(session) == runs.RunCount(runs.EXACT_COUNT_LIMIT, exact=True)
        assert runs.count_runs(session, runs.RunFilters(tag="nightly")) == runs.RunCount(1000, exact=True)
        assert runs.count_runs(session, runs.RunFilters(strategy="data")) == runs.RunCount(0, exact=True)


def test_past_the_limit_postgresql_estimates_and_the_page_says_about(client: TestClient, database: Database) -> None:
    stored_runs(database, COPIES)
    postgresql = database.engine.dialect.name == "postgresql"
    with database.read_session() as session:
        # ANALYZE counted the run table and the tag's entries: the planner's estimates are those counts.
        assert runs.count_runs(session) == runs.RunCount(COPIES, exact=not postgresql)
        assert runs.count_runs(session, runs.RunFilters(tag="Nightly")) == runs.RunCount(COPIES, exact=not postgresql)
    api = client.get("/api/runs", params={"offset": COPIES - 2})
    assert [run["id"] for run in api.json()] == [2, 1]
    header = "x-total-count-estimate" if postgresql else "x-total-count"
    assert api.headers[header] == "1060" and len({"x-total-count-estimate", "x-total-count"} & set(api.headers)) == 1
    first = client.get("/runs").text
    total = (
        '<span class="estimate" title="PostgreSQL\'s estimate: runs are counted exactly up to 1,000">about 1,100</span>'
        if postgresql
        else "1,060"
    )
    assert f"runs 1–50 of {total}, newest first" in first
    assert 'href="/runs?page=2" rel="next"' in first
    last = client.get("/runs?tag=nightly&page=22").text
    assert f"runs 1,051–1,060 of {total}, newest first" in last
    assert [int(i) for i in re.findall(r'name="run" value="(\d+)"', last)] == list(range(10, 0, -1))
    assert 'href="/runs?tag=nightly&amp;page=21" rel="prev"' in last and 'rel="next"' not in last
    past = client.get("/runs?tag=nightly&page=30").text
    if postgresql:  # an estimate bounds nothing: the page says where the list ends
        assert '<p class="empty" id="past-the-end">The list ends before page 30: ' in past
        assert '<a href="/runs?tag=nightly">its first page</a>.</p>' in past
    else:  # past the end: the last page
        assert "runs 1,051–1,060 of 1,060, newest first" in past
    assert f"The newest 50 of {total} runs" in client.get("/compare").text


def test_postgresql_counts_past_the_limit_without_visiting_every_match(database: Database) -> None:
    (counted,) = sent_queries(database, lambda session: runs.count_runs(session, runs.RunFilters(tag="nightly")))
    if database.engine.dialect.name == "sqlite":
        assert "LIMIT" not in counted[0]
        return
    # The count of at most the limit and one more, read in the tag's index; the estimate is an EXPLAIN (not a
    # SELECT), which reads nothing.
    assert "LIMIT" in counted[0] and list(counted[1].values())[-1] == runs.EXACT_COUNT_LIMIT + 1
    plan = query_plan(database, *counted)
    assert "Limit" in plan and "ix_run_tag_folded" in plan
