"""The demo's first start measures the three seed plans on local processes and stores measured runs."""

import pytest
from sqlmodel import select

from emuplan.demo import DEMO_COMPARISON_NAME, load_demo
from emuplan.measure import demo as measure_demo
from emuplan.measure.options import MeasurementOptions
from emuplan.store.db import Database
from emuplan.store.tables import Comparison, Plan, Run

SMALL = MeasurementOptions(world_size=2, backend="gloo", iterations=3, warmup=1, timeout_s=120)


def stored(database: Database):
    with database.read_session() as session:
        return (
            list(session.exec(select(Plan).order_by(Plan.id))),
            list(session.exec(select(Run).order_by(Run.id))),
            list(session.exec(select(Comparison))),
        )


def test_first_start_measures_the_seed_plans_and_labels_the_runs(
    database: Database, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(measure_demo, "DEMO_OPTIONS", SMALL)  # the demo's 4 × 40 takes too long for a unit test
    assert load_demo(database, measure_locally=True) is True
    progress = capsys.readouterr().err.splitlines()
    assert progress[0] == "demo: measuring the 3 seed plans on 2 local gloo processes"
    assert "demo: seed plan 3/3 (pipeline parallel): iteration 4/4" in progress

    plans, runs, comparisons = stored(database)
    assert [run.strategy for run in runs] == ["data", "tensor", "pipeline"]
    assert {run.origin for run in runs} == {"measured"}
    assert [run.name for run in runs] == [
        f"Demo {strategy} parallel (measured locally: 2 gloo processes, 3 iterations)"
        for strategy in ("data", "tensor", "pipeline")
    ]
    assert all(run.origin_detail.startswith("measured locally (gloo, world size 2, host ") for run in runs)
    assert [run.plan_id for run in runs] == [plan.id for plan in plans]
    assert [run.sample_count for run in runs] == [3, 3, 12]
    assert [[group["size_bytes"] for group in run.summary["groups"]] for run in runs] == [
        [971048],
        [25755648],
        [2600, 33024, 131584, 803840],
    ]
    assert all(run.tags == ["demo"] for run in runs)
    [comparison] = comparisons
    assert (comparison.name, comparison.run_ids) == (DEMO_COMPARISON_NAME, [run.id for run in runs])

    # A second start measures nothing and adds nothing.
    assert load_demo(database, measure_locally=True) is False
    assert capsys.readouterr().err == ""
    assert len(stored(database)[1]) == 3


def test_when_measuring_fails_generated_runs_stand_in(
    database: Database, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(measure_demo, "DEMO_OPTIONS", MeasurementOptions(world_size=2, timeout_s=0.2))
    assert load_demo(database, measure_locally=True) is True
    assert (
        "demo: measuring failed, generated runs stand in: measurement timed out after 0.2 s" in capsys.readouterr().err
    )
    _, runs, _ = stored(database)
    assert {run.origin for run in runs} == {"generated"}
