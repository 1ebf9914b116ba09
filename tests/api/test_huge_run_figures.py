"""A run's CDF and delay figures are drawn from its stored summary, never from its samples, and the delay
chart draws every trial above p99.9 at its own iteration with its own time (as float32, what Plotly gets)."""

import base64

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete

from emuplan.store.db import Database
from emuplan.store.tables import RunTable

pytestmark = pytest.mark.both_databases

TRIALS = 100_000


def spiky_csv() -> tuple[bytes, np.ndarray]:
    """One all-reduce size timed ``TRIALS`` times (ns precision), with spikes planted in pairs one iteration
    apart: two spikes in one of the chart's buckets, where a bucket's maximum alone keeps only the first."""
    durations = np.random.default_rng(5).lognormal(3.0, 0.1, TRIALS).round(3)
    for start in range(700, TRIALS - 2, TRIALS // 20):
        durations[start : start + 2] = [900.0 + start % 97, 500.0 + start % 89]
    lines = "".join(f"{i},1048576,all_reduce,{d:.3f}\n" for i, d in enumerate(durations))
    return b"iteration,size,collective,time_us\n" + lines.encode(), durations


def decoded(values: dict | list) -> np.ndarray:
    if isinstance(values, list):
        return np.asarray(values, dtype=np.float32)
    return np.frombuffer(base64.b64decode(values["bdata"]), dtype="<f4")


def test_the_delay_chart_draws_every_trial_above_p999_at_its_iteration(client: TestClient) -> None:
    data, durations = spiky_csv()
    run = client.post("/api/runs", files={"file": ("spiky.csv", data)}).json()
    p999 = client.get(f"/api/runs/{run['id']}/stats").json()["groups"][0]["p99_9_us"]
    above = np.flatnonzero(durations > p999)
    assert len(above) == 99  # the 40 planted and 59 of the body's (a trial tied with p99.9 is not above it)
    figure = client.get(f"/api/runs/{run['id']}/figures/delay").json()
    (trace,) = figure["data"]
    assert figure["layout"]["yaxis"]["title"]["text"] == "completion time (µs)"
    drawn = dict(zip(decoded(trace["x"]).astype(np.int64).tolist(), decoded(trace["y"]).tolist(), strict=True))
    assert len(drawn) <= 2000
    assert {int(i): float(np.float32(durations[i])) for i in above}.items() <= drawn.items()


def test_cdf_and_delay_figures_need_no_samples(client: TestClient, database: Database) -> None:
    run = client.post("/api/runs", files={"file": ("spiky.csv", spiky_csv()[0])}).json()
    paths = [f"/api/runs/{run['id']}/figures/{kind}" for kind in ("cdf", "delay")]
    before = [client.get(path).json() for path in paths]
    with database.write_session() as session:
        session.exec(delete(RunTable).where(RunTable.run_id == run["id"]))
        session.commit()
    assert [client.get(path).json() for path in paths] == before
