"""Demo content on start: the three seed plans, three generated runs labelled as such, one comparison."""

import pytest
from fastapi.testclient import TestClient

from emuplan.demo import DEMO_COMPARISON_NAME, DEMO_SHAPES, generated_run_csv
from emuplan.main import create_app
from emuplan.settings import Settings

pytestmark = pytest.mark.both_databases


def test_demo_is_loaded_once_with_seed_plans_and_honestly_labelled_runs(database_url: str) -> None:
    settings = Settings(database_url=database_url, demo=True)
    with TestClient(create_app(settings)) as client:
        plans = client.get("/api/plans").json()
        runs = client.get("/api/runs").json()
        comparisons = client.get("/api/comparisons").json()
        home = client.get("/").text
        data_run = next(run for run in runs if run["strategy"] == "data")
        run_page = client.get(f"/runs/{data_run['id']}").text
        data_stats = client.get(f"/api/runs/{data_run['id']}/stats").json()
    with TestClient(create_app(settings)) as client:  # a second start adds nothing
        assert len(client.get("/api/runs").json()) == 3
        assert len(client.get("/api/comparisons").json()) == 1
        # Nor does one after the demo comparison was renamed, or deleted: the rest of the demo is kept.
        comparison_id = client.get("/api/comparisons").json()[0]["id"]
        assert client.patch(f"/api/comparisons/{comparison_id}", json={"name": "ours now"}).status_code == 200
    with TestClient(create_app(settings)) as client:
        assert [c["name"] for c in client.get("/api/comparisons").json()] == ["ours now"]
        assert client.delete(f"/api/comparisons/{comparison_id}").status_code == 200
    with TestClient(create_app(settings)) as client:
        assert (len(client.get("/api/plans").json()), len(client.get("/api/runs").json())) == (3, 3)
        assert client.get("/api/comparisons").json() == []
    documents = {}
    with TestClient(create_app(settings)) as client:
        for plan in plans:
            documents[plan["strategy"]] = client.get(f"/api/plans/{plan['id']}").json()["workload"]
    assert {strategy: doc["kccb"]["data_sizes"] for strategy, doc in documents.items()} == {
        "data": [971048],
        "tensor": [6438912],
        "pipeline": [2600, 33024, 131584, 803840],
    }
    assert {doc["trials"] for doc in documents.values()} == {8}
    assert {doc["mode"] for doc in documents.values()} == {"tutorial"}
    assert sorted(run["strategy"] for run in runs) == ["data", "pipeline", "tensor"]
    assert {run["origin"] for run in runs} == {"generated"}
    assert all("not a KCCB result" in run["origin_detail"] for run in runs)
    assert {run["plan_id"] for run in runs} == {plan["id"] for plan in plans}
    assert [c["name"] for c in comparisons] == [DEMO_COMPARISON_NAME]
    assert sorted(comparisons[0]["run_ids"]) == sorted(run["id"] for run in runs)
    assert f'href="/comparisons/{comparisons[0]["id"]}"' in home
    assert "Generated demo data, not a KCCB result." in home
    assert "Generated demo data, not a KCCB result." in run_page
    # Linked to its seed plan, the run has a network model: % of ideal is computed and shown.
    pct_of_ideal = data_stats["groups"][0]["pct_of_ideal"]
    assert pct_of_ideal is not None and 0 < pct_of_ideal < 100
    assert f'data-key="pct_of_ideal">{pct_of_ideal:,.1f}</td>' in run_page
    # Under 100 % the assumptions are plausible: no note that the link is slower than the one measured.
    assert (data_stats["above_ideal_pct"], 'id="above-ideal"' in run_page) == (None, False)


def test_generated_runs_are_reproducible_and_shaped_like_the_seed_charts() -> None:
    data, tensor, pipeline = DEMO_SHAPES
    assert generated_run_csv(data) == generated_run_csv(data)
    assert generated_run_csv(data) != generated_run_csv(data, seed=1)
    rows = generated_run_csv(pipeline).decode().splitlines()
    assert rows[0] == "iteration,data_size_bytes,collective,completion_time_ms"
    assert len(rows) == 1 + 4 * pipeline.iterations
    assert {row.split(",")[1] for row in rows[1:]} == {"2600", "33024", "131584", "803840"}
