"""Migration 0004 moves each run's curves out of ``run.summary`` into ``run_curves`` and back."""

import json
import sqlite3
from pathlib import Path

from alembic import command
from fastapi.testclient import TestClient

from emuplan import charts
from emuplan.main import create_app
from emuplan.results import parse_result_file, summarise
from emuplan.results.stats import strip_curves
from emuplan.settings import Settings
from emuplan.store.db import alembic_config, migrate
from paths import RESULTS


def test_curves_move_to_run_curves_and_figures_still_draw_them(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    url = f"sqlite:///{path}"
    command.upgrade(alembic_config(url), "0003")
    whole = summarise(parse_result_file((RESULTS / "generated-per-flow.csv").read_bytes(), "flows.csv").samples)
    whole = json.loads(json.dumps(whole))  # as the JSON column stores it
    with sqlite3.connect(path) as connection:
        connection.execute(
            "INSERT INTO run (id, name, tags, source_format, origin, origin_detail, sample_count, warnings, summary,"
            " created_at) VALUES (3, 'old run', '[]', 'per-flow', 'imported', '', 50, '[]', ?,"
            " '2026-11-21 10:00:00')",
            (json.dumps(whole),),
        )
    migrate(url)
    with sqlite3.connect(path) as connection:
        (listed,) = connection.execute("SELECT summary FROM run WHERE id = 3").fetchone()
        assert connection.execute("SELECT run_id FROM run_curves").fetchall() == [(3,)]
        (curves,) = connection.execute("SELECT summary FROM run_curves WHERE run_id = 3").fetchone()
    assert json.loads(listed) == strip_curves(whole)
    assert json.loads(curves) == whole
    with TestClient(create_app(Settings(database_url=url, demo=False))) as client:
        figure = client.get("/api/runs/3/figures/cdf").json()
        assert figure == json.loads(json.dumps(charts.cdf_figure(whole, title="old run: completion-time CDF")))
        assert client.get("/api/runs/3").json()["summary"] == strip_curves(whole)
    command.downgrade(alembic_config(url), "0003")
    with sqlite3.connect(path) as connection:
        assert json.loads(connection.execute("SELECT summary FROM run WHERE id = 3").fetchone()[0]) == whole
