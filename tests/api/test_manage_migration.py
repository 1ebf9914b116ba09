"""Migration 0017 gives stored runs their collectives and range of data sizes from their stored statistics (what
the runs list shows and filters by), an empty note and no facts; plans and comparisons no tags and an empty
note; share links an empty label. A downgrade takes them away."""

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
from emuplan.store.tables import CachedSummary
from old_schema import RUN_BEFORE_0017, old_run
from paths import RESULTS, SHARED_NCCL

pytestmark = pytest.mark.both_databases


def statistics_of(path) -> dict:
    parsed = parse_result_file(path.read_bytes(), path.name)
    summary = summarise(parsed.samples, ranks=parsed.ranks, reported_avg_busbw=parsed.reported_avg_busbw)
    return json.loads(json.dumps(strip_curves(summary)))  # as the JSON column stores it


def test_stored_runs_get_their_collectives_and_size_range(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(alembic_config(url), "0016")
    stored = {
        1: ("V100 broadcast", statistics_of(SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"), "size-sweep"),
        2: ("iterations", statistics_of(RESULTS / "generated-per-iteration.csv"), "distribution"),
        3: ("no statistics", {}, "distribution"),
    }
    engine = create_engine(url)
    with engine.begin() as connection:
        for run_id, (name, summary, kind) in stored.items():
            row = {key: value for key, value in old_run(name, id=run_id).items() if key != "summary"}
            connection.execute(RUN_BEFORE_0017.insert().values(**row, kind=kind))
            connection.execute(CachedSummary.__table__.insert().values(run_id=run_id, summary=summary))
    migrate(url)
    with TestClient(create_app(Settings(database_url=url, demo=False))) as client:
        listed = client.get("/api/runs").json()
        assert [(r["id"], r["collectives"], r["size_min_bytes"], r["size_max_bytes"], r["facts"]) for r in listed] == [
            (3, [], None, None, {}),
            (2, ["all_reduce"], 2600, 803840, {}),
            (1, ["broadcast"], 8, 8589934592, {}),
        ]
        assert client.get("/api/runs/1").json()["note"] == ""
        assert [r["id"] for r in client.get("/api/runs", params={"collective": "broadcast", "size": 1024}).json()] == [
            1
        ]
        assert [r["id"] for r in client.get("/api/runs", params={"sort": "size"}).json()] == [1, 2, 3]
        assert client.patch("/api/runs/1", json={"facts": {"nic": "ConnectX-5"}}).json()["facts"] == {
            "nic": "ConnectX-5"
        }
    command.downgrade(alembic_config(url), "0016")
    with engine.begin() as connection:
        columns = {column["name"] for column in sa.inspect(connection).get_columns("run")}
        tables = set(sa.inspect(connection).get_table_names())
    assert not {"collectives", "size_min_bytes", "size_max_bytes", "note", "facts"} & columns
    assert "run_fact" not in tables
    engine.dispose()
