"""Migration 0004 moves each run's curves out of ``run.summary`` into ``run_curves`` and back."""

import json

import pytest
import sqlalchemy as sa
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from emuplan import charts
from emuplan.main import create_app
from emuplan.results import parse_result_file, summarise
from emuplan.results.analysis.stats import strip_curves
from emuplan.settings import Settings
from emuplan.store.db import alembic_config, migrate
from emuplan.store.tables import RunCurves
from old_schema import RUN, old_run
from paths import RESULTS

pytestmark = pytest.mark.both_databases

RUN_CURVES = RunCurves.__table__


def test_curves_move_to_run_curves_and_figures_still_draw_them(empty_database_url: str) -> None:
    url = empty_database_url
    command.upgrade(alembic_config(url), "0003")
    whole = summarise(parse_result_file((RESULTS / "generated-per-flow.csv").read_bytes(), "flows.csv").samples)
    whole = json.loads(json.dumps(whole))  # as the JSON column stores it
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(
            RUN.insert().values(**old_run("old run", id=3, source_format="per-flow", sample_count=50, summary=whole))
        )
    command.upgrade(alembic_config(url), "0008")  # the last revision with run.summary (0009 moves it)
    with engine.begin() as connection:
        listed = connection.execute(sa.select(RUN.c.summary).where(RUN.c.id == 3)).scalar_one()
        assert connection.execute(sa.select(RUN_CURVES.c.run_id)).all() == [(3,)]
        curves = connection.execute(sa.select(RUN_CURVES.c.summary).where(RUN_CURVES.c.run_id == 3)).scalar_one()
    assert listed == strip_curves(whole)
    assert curves == whole
    migrate(url)
    with TestClient(create_app(Settings(database_url=url, demo=False))) as client:
        figure = client.get("/api/runs/3/figures/cdf").json()
        assert figure == json.loads(json.dumps(charts.cdf_figure(whole, title="Completion-time CDF")))
        assert client.get("/api/runs/3").json()["summary"] == strip_curves(whole)
    command.downgrade(alembic_config(url), "0003")
    with engine.begin() as connection:
        assert connection.execute(sa.select(RUN.c.summary).where(RUN.c.id == 3)).scalar_one() == whole
        assert not sa.inspect(connection).has_table("run_curves")
    engine.dispose()
