"""Migration 0013 stores each run's kind and a sweep's peak busbw, from its stored statistics by the rule new
imports use (``results.analysis.run_analysis.run_kind``); the list shows them, and a downgrade takes them away."""

import json

import pytest
import sqlalchemy as sa
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from emuplan.main import create_app
from emuplan.results import parse_result_file, summarise
from emuplan.results.analysis.stats import strip_curves
from emuplan.settings import Settings
from emuplan.store.db import alembic_config, migrate
from emuplan.store.tables import CachedSummary, Run
from old_schema import RUN_BEFORE_0013, old_run
from paths import RESULTS
from slower_sweep import B200_LOG

pytestmark = pytest.mark.both_databases


def statistics_of(data: bytes, file_name: str) -> dict:
    parsed = parse_result_file(data, file_name)
    summary = summarise(parsed.samples, ranks=parsed.ranks, reported_avg_busbw=parsed.reported_avg_busbw)
    return json.loads(json.dumps(strip_curves(summary)))  # as the JSON column stores it


def test_stored_runs_get_their_kind_and_a_sweeps_peak_busbw(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(alembic_config(url), "0012")
    stored = {
        1: ("B200 sweep", statistics_of(B200_LOG.read_bytes(), "b200-allreduce.txt")),
        # Three runs of the sweep pasted together: three values per size, still a sweep (the old rule's
        # "one sample per size" read it as a distribution).
        2: ("B200 sweep ×3", statistics_of(B200_LOG.read_bytes() * 3, "b200-allreduce.txt")),
        3: ("per iteration", statistics_of((RESULTS / "generated-per-iteration.csv").read_bytes(), "g.csv")),
        4: ("no statistics", {}),
    }
    engine = create_engine(url)
    with engine.begin() as connection:
        for run_id, (name, summary) in stored.items():
            row = {key: value for key, value in old_run(name, id=run_id).items() if key != "summary"}
            connection.execute(RUN_BEFORE_0013.insert().values(**row, p50_us=None, p99_us=None))
            connection.execute(CachedSummary.__table__.insert().values(run_id=run_id, summary=summary))
    migrate(url)
    run = Run.__table__
    with engine.begin() as connection:
        figures = connection.execute(sa.select(run.c.id, run.c.kind, run.c.peak_busbw_gbps).order_by(run.c.id)).all()
    # The B200 log's largest busbw cell: 702.91 GB/s at 2 GiB in-place (the same in each of the three runs).
    assert figures == [
        (1, "size-sweep", 702.91),
        (2, "size-sweep", 702.91),
        (3, "distribution", None),
        (4, "distribution", None),
    ]
    with TestClient(create_app(Settings(database_url=url, demo=False))) as client:
        listed = client.get("/api/runs").json()
        assert [(r["id"], r["kind"], r["peak_busbw_gbps"]) for r in listed] == [
            (4, "distribution", None),
            (3, "distribution", None),
            (2, "size-sweep", 702.91),
            (1, "size-sweep", 702.91),
        ]
        assert client.get("/api/runs/2/stats").json()["kind"] == "size-sweep"
    command.downgrade(alembic_config(url), "0012")
    with engine.begin() as connection:
        columns = {column["name"] for column in sa.inspect(connection).get_columns("run")}
    assert not {"kind", "peak_busbw_gbps"} & columns
    engine.dispose()
