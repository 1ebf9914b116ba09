"""Migration 0009 keeps the ``run`` row narrow: the statistics move to ``run_summary``, the lists' overall
median and p99 become columns, and each run's case-folded tags become ``run_tag`` rows; downgrading puts
the statistics back into ``run.summary``."""

import json

import pytest
import sqlalchemy as sa
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from emuplan.main import create_app
from emuplan.results import parse_result_file, summarise
from emuplan.results.analysis.stats import strip_curves
from emuplan.services import imports as run_imports
from emuplan.settings import Settings
from emuplan.store import runs
from emuplan.store.db import Database, alembic_config, migrate
from emuplan.store.tables import CachedSummary, Run, RunTag
from old_schema import RUN, RUN_0017, old_run
from paths import RESULTS

pytestmark = pytest.mark.both_databases

RUN_SUMMARY, RUN_TAG = CachedSummary.__table__, RunTag.__table__
NARROW_RUN_COLUMNS = {
    "id", "name", "plan_id", "strategy", "tags", "source_format", "origin", "origin_detail", "file_name",
    "content_sha256", "sample_count", "ranks", "hosts", "warnings", "p50_us", "p99_us", "created_at",
}  # fmt: skip


def statistics_of(file_name: str) -> dict:
    parsed = parse_result_file((RESULTS / file_name).read_bytes(), file_name)
    return json.loads(json.dumps(strip_curves(summarise(parsed.samples))))  # as the JSON column stores it


def run_columns(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return {column["name"] for column in sa.inspect(engine).get_columns("run")}
    finally:
        engine.dispose()


def test_the_statistics_leave_the_run_row_and_tags_become_rows_and_both_come_back(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(alembic_config(url), "0008")
    statistics = statistics_of("generated-per-iteration.csv")
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            RUN.insert().values(**old_run("tagged", id=4, tags=["Fabric-A", "fabric-a", "Straße"], summary=statistics))
        )
        connection.execute(RUN.insert().values(**old_run("untagged", id=7, summary={})))
    migrate(url)
    # platform from 0012 on, kind and peak_busbw_gbps from 0013, verdict from 0015, the list's and managing's 0017
    assert run_columns(url) == NARROW_RUN_COLUMNS | {"platform", "kind", "peak_busbw_gbps", "verdict"} | RUN_0017
    with engine.begin() as connection:
        assert connection.execute(sa.select(RUN_SUMMARY).order_by(RUN_SUMMARY.c.run_id)).all() == [
            (4, statistics),
            (7, {}),
        ]
        assert connection.execute(sa.select(RUN_TAG).order_by(RUN_TAG.c.folded_tag)).all() == [
            (4, "fabric-a"),
            (4, "strasse"),
        ]
        figures = sa.select(Run.__table__.c.id, Run.__table__.c.p50_us, Run.__table__.c.p99_us).order_by("id")
        assert connection.execute(figures).all() == [
            (4, statistics["overall"]["p50_us"], statistics["overall"]["p99_us"]),
            (7, None, None),
        ]
    with TestClient(create_app(Settings(database_url=url, demo=False))) as client:
        assert client.get("/api/runs/4").json()["summary"] == statistics
        listed = client.get("/api/runs", params={"tag": "STRASSE"})
        assert [(run["id"], run["tags"], run["p50_us"]) for run in listed.json()] == [
            (4, ["Fabric-A", "fabric-a", "Straße"], statistics["overall"]["p50_us"])
        ]
        assert listed.headers["x-total-count"] == "1"
    command.downgrade(alembic_config(url), "0008")
    assert run_columns(url) == NARROW_RUN_COLUMNS - {"p50_us", "p99_us"} | {"summary"}
    with engine.begin() as connection:
        assert connection.execute(sa.select(RUN.c.id, RUN.c.summary).order_by(RUN.c.id)).all() == [
            (4, statistics),
            (7, {}),
        ]
        assert not {"run_summary", "run_tag"} & set(sa.inspect(connection).get_table_names())
    migrate(url)
    with engine.begin() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(RUN_TAG)).scalar_one() == 2
    engine.dispose()


def test_tags_match_in_any_case_unicode_too_and_leave_with_their_run(database: Database) -> None:
    with database.writing() as session:
        parsed = parse_result_file(b"iteration,size,time_ms\n0,8,1\n1,8,3\n", "r.csv")
        tagged = run_imports.save_run(session, parsed, name="tagged", tags=["ÜBER", "über ", "Straße"])
        other = run_imports.save_run(
            session, parse_result_file(b"iteration,size,time_ms\n0,8,2\n", "s.csv"), name="other"
        )
    with database.read_session() as session:
        assert [(r.name, r.tags, r.p50_us, r.p99_us) for r in runs.list_runs(session, runs.RunFilters(tag="über"))] == [
            ("tagged", ["Straße", "ÜBER", "über"], 1000.0, 3000.0)
        ]
        assert runs.count_runs(session, runs.RunFilters(tag="STRASSE")) == runs.RunCount(1, exact=True)
        assert runs.count_runs(session, runs.RunFilters(tag="strasse", strategy="data")) == runs.RunCount(0, exact=True)
        assert session.exec(sa.select(RunTag.folded_tag).order_by(RunTag.folded_tag)).scalars().all() == [
            "strasse",
            "über",
        ]
    with database.writing() as session:
        runs.delete_run(session, tagged.id)
    with database.read_session() as session:
        assert session.exec(sa.select(RunTag)).all() == []
        assert session.exec(sa.select(CachedSummary.run_id)).scalars().all() == [other.id]
        assert runs.count_runs(session, runs.RunFilters(tag="über")) == runs.RunCount(0, exact=True)
