"""What a training step costs, through the API, the pages' documents, saved comparisons and the CLI: the
demo's data, tensor and pipeline runs read with their seed plans (or with a plan picked for them)."""

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.main import create_app
from emuplan.settings import Settings

pytestmark = pytest.mark.both_databases

# The generated demo runs (seeded) at p50: data 13,997.8 µs; tensor 100,032.9 µs; pipeline 20,556.2 +
# 20,983.7 + 21,776.8 + 22,838.7 = 86,155.4 µs (tests/unit/test_step_cost.py computes them from the CSVs).
DEMO_STEP_P50_US = {"data": 13997.8, "tensor": 100032.9, "pipeline": 86155.4}


@pytest.fixture
def demo_client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(database_url=database_url, demo=True))) as client:
        yield client


def _demo_ids(client: TestClient) -> tuple[dict[str, int], dict[str, int]]:
    """Run and plan ids of the demo by strategy."""
    runs = {run["strategy"]: run["id"] for run in client.get("/api/runs").json()}
    plans = {plan["strategy"]: plan["id"] for plan in client.get("/api/plans").json()}
    return runs, plans


def test_the_demo_comparison_leads_with_the_step_cost_of_each_strategy(demo_client: TestClient) -> None:
    runs, plans = _demo_ids(demo_client)
    (saved,) = demo_client.get("/api/comparisons").json()
    document = demo_client.get("/api/compare", params={"runs": ",".join(map(str, saved["run_ids"]))}).json()
    table = document["step_cost"]
    by_strategy = {row["strategy"]: row for row in table["rows"]}
    assert {s: row["step"]["p50_us"] for s, row in by_strategy.items()} == pytest.approx(DEMO_STEP_P50_US, rel=1e-9)
    assert {s: row["plan"]["id"] for s, row in by_strategy.items()} == plans
    assert {row["plan"]["source"] for row in table["rows"]} == {"linked"}
    assert table["ranking"] == [runs["data"], runs["pipeline"], runs["tensor"]]
    assert table["baseline_run_id"] == runs["data"]
    assert by_strategy["tensor"]["ratio_p50"] == pytest.approx(100032.9 / 13997.8)
    assert [row["collectives_per_step"] for row in (r["step"] for r in table["rows"])] == [1, 1, 4]
    figure = document["figures"]["step_cost"]
    assert [trace["name"] for trace in figure["data"]] == ["all_reduce", "all_gather"]
    assert figure["layout"]["barmode"] == "stack"
    # Bars in ms: the data run's all-reduce, the tensor run's all-gather, the pipeline's four all-reduces.
    rounded = [[None if value is None else round(value, 4) for value in trace["y"]] for trace in figure["data"]]
    assert rounded == [[13.9978, None, 86.1554], [None, 100.0329, None]]


def test_a_plan_picked_for_every_run_is_a_what_if(demo_client: TestClient) -> None:
    runs, plans = _demo_ids(demo_client)
    ids = ",".join(str(runs[s]) for s in ("data", "tensor", "pipeline"))
    document = demo_client.get("/api/compare", params={"runs": ids, "plan": plans["data"]}).json()
    rows = {row["strategy"]: row for row in document["step_cost"]["rows"]}
    # The data run's own plan stays its linked one; the others read it as a what-if on their fabric.
    assert {s: row["plan"]["source"] for s, row in rows.items()} == {
        "data": "linked", "tensor": "chosen", "pipeline": "chosen",
    }  # fmt: skip
    # The data plan's one 971,048-byte all-reduce: measured by the data run, missing on the tensor run
    # (no all-reduce), and between the pipeline run's 803,840 B and nothing above it there: extrapolated.
    assert [r["basis"] for r in rows["data"]["cost"]["rows"]] == ["measured"]
    assert rows["tensor"]["cost"]["rows"][0]["missing_reason"] == "the run has no all_reduce"
    assert rows["tensor"]["step"]["p50_us"] is None
    assert [r["basis"] for r in rows["pipeline"]["cost"]["rows"]] == ["extrapolated"]
    assert document["step_cost"]["ranking"] == [runs["data"], runs["pipeline"]]
    one = demo_client.get("/api/compare", params={"runs": ids, "plans": f"{runs['tensor']}:{plans['pipeline']}"}).json()
    assert {row["run_id"]: row["plan"]["id"] for row in one["step_cost"]["rows"]} == {
        runs["data"]: plans["data"],
        runs["tensor"]: plans["pipeline"],
        runs["pipeline"]: plans["pipeline"],
    }


def test_a_run_reads_its_step_with_its_linked_or_a_chosen_plan(demo_client: TestClient) -> None:
    runs, plans = _demo_ids(demo_client)
    linked = demo_client.get(f"/api/runs/{runs['pipeline']}/stats").json()["step_cost"]
    assert linked["plan"]["source"] == "linked"
    assert linked["step"]["p50_us"] == pytest.approx(86155.4)
    assert linked["by_dimension"]["pp"]["collectives_per_step"] == 4
    assert linked["training"]["p50_s"] == pytest.approx(8 * 86155.4 / 1e6)
    chosen = demo_client.get(f"/api/runs/{runs['pipeline']}/stats", params={"plan": plans["tensor"]}).json()
    assert chosen["step_cost"]["plan"] == {
        "id": plans["tensor"], "name": "Seed MLP: tensor parallel (tutorial)", "strategy": "tensor",
        "mode": "tutorial", "trials": 8, "source": "chosen",
    }  # fmt: skip
    page = demo_client.get(f"/runs/{runs['pipeline']}", params={"plan": plans["tensor"]}).text
    assert f'data-stats-url="/api/runs/{runs["pipeline"]}/stats?plan={plans["tensor"]}"' in page


def test_a_pipelined_plan_costs_every_stage_and_the_step_is_the_longest(demo_client: TestClient) -> None:
    """The seed MLP in framework mode over 2 stages × 2 replicas: stage 0 (fc1, fc2) all-reduces one 935,424-byte
    bucket, stage 1 (fc3, fc4) one of 35,624, each beside its activations and gradients; read on the demo's
    pipeline run (all-reduces of 2,600 to 803,840 B), stage 0 takes longest and is the step."""
    runs, _ = _demo_ids(demo_client)
    body = {"model": "fashion-mnist-mlp", "mode": "framework", "strategy": "hybrid", "pp": 2, "dp": 2}
    plan = demo_client.post("/api/plans", json=body).json()
    assert [len(stage["collectives"]) for stage in plan["workload"]["stages"]] == [3, 3]
    cost = demo_client.get(f"/api/runs/{runs['pipeline']}/stats", params={"plan": plan["id"]}).json()["step_cost"]
    assert [(stage["stage"], stage["bounds_step"]) for stage in cost["stages"]] == [(0, True), (1, False)]
    assert cost["bounding_stage"] == 0
    assert cost["stages"][0]["p50_us"] > cost["stages"][1]["p50_us"]
    assert cost["step"]["p50_us"] == cost["stages"][0]["p50_us"]
    assert [row["bytes_total"] for row in cost["rows"] if row["op"] == "all_reduce"] == [935424]


@pytest.mark.parametrize(
    ("params", "status", "detail"),
    [
        ({"plans": "1:x"}, 422, "plans: expected run:plan pairs such as 4:1,5:2, got '1:x'"),
        ({"plans": "99:1"}, 422, "plans: run 99 is not one of the compared runs"),
        ({"plan": 999}, 404, "no plan with id 999"),
    ],
)
def test_bad_plan_choices_are_refused_by_name(demo_client: TestClient, params: dict, status: int, detail: str) -> None:
    response = demo_client.get("/api/compare", params={"runs": "1,2,3", **params})
    assert (response.status_code, response.json()["detail"]) == (status, detail)


def test_saved_assumptions_and_plans_survive_the_share_link(demo_client: TestClient) -> None:
    runs, plans = _demo_ids(demo_client)
    ids = [runs["data"], runs["pipeline"]]
    created = demo_client.post(
        "/api/comparisons",
        json={"name": "on NVLink", "run_ids": ids, "assumptions": {"link_gbps": 7200, "latency_us": 2},
              "plans": {str(runs["pipeline"]): plans["data"]}},
    )  # fmt: skip
    assert created.status_code == 201, created.text
    comparison = created.json()
    assert comparison["options"] == {
        "log_x": True,
        "assumptions": {"link_gbps": 7200.0, "latency_us": 2.0},
        "plans": {str(runs["pipeline"]): plans["data"]},
    }
    token = demo_client.post(f"/api/comparisons/{comparison['id']}/shares", json={}).json()["token"]
    shared = demo_client.get(f"/api/shared/{token}").json()
    assert [(a["link_gbps"], a["latency_us"], a["sources"]["link_gbps"]) for a in shared["assumptions"]] == [
        (7200.0, 2.0, "query"),
        (7200.0, 2.0, "query"),
    ]
    assert {row["run_id"]: row["plan"]["id"] for row in shared["step_cost"]["rows"]} == {
        runs["data"]: plans["data"],
        runs["pipeline"]: plans["data"],
    }
    expected_note = (
        "Saved with a link of 7,200 Gbit/s per rank, α 2 µs for every run; run "
        f"#{runs['pipeline']} read with plan “Seed MLP: data parallel (tutorial)”. Every share link shows it so."
    )
    assert expected_note in demo_client.get(f"/s/{token}").text
    saved_page = demo_client.get(f"/comparisons/{comparison['id']}").text
    assert expected_note in saved_page
    assert "link_gbps=7200.0&amp;latency_us=2.0" in saved_page  # the page's JSON twin asks for them too
    # A figure through the link is drawn under the saved assumptions, not the server's default link.
    figure = demo_client.get(f"/api/shared/{token}/runs/{runs['data']}/figures/cdf")
    assert figure.status_code == 200


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"plans": {"99": 1}}, "plans: run 99 is not one of the compared runs"),
        ({"plans": {"1": 999}}, "plans: no plan with id 999 (for run 1)"),
    ],
)
def test_a_comparison_saved_with_a_bad_plan_is_refused(demo_client: TestClient, body: dict, detail: str) -> None:
    response = demo_client.post("/api/comparisons", json={"name": "x", "run_ids": [1, 2], **body})
    assert (response.status_code, response.json()["detail"]) == (422, detail)
    assert len(demo_client.get("/api/comparisons").json()) == 1  # only the demo's: nothing half-written


def test_the_cli_prints_the_same_step_costs(database_url: str, cli_env: str, demo_client: TestClient) -> None:
    runs, plans = _demo_ids(demo_client)
    # Wide enough for every line whole: tests/api/test_cli_fits.py reads the CLI at 80 columns.
    runner = CliRunner(env={"COLUMNS": "1000"})
    ids = [str(runs[s]) for s in ("data", "tensor", "pipeline")]
    result = runner.invoke(app, ["compare", *ids])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"training step (lower is better; ×base: ÷ run {runs['data']}'s step at p50):"
    assert lines[2].split()[-5:] == ["14.00", "1.00×", "19.19", "1", "971,048"]
    assert lines[3].split()[-5:] == ["100.03", "7.15×", "122.98", "1", "25,755,648"]
    assert lines[4].split()[-5:] == ["86.16", "6.15×", "119.53", "4", "971,048"]
    as_json = json.loads(runner.invoke(app, ["compare", *ids, "--plan", str(plans["data"]), "--json"]).output)
    api = demo_client.get("/api/compare", params={"runs": ",".join(ids), "plan": plans["data"]}).json()
    assert as_json["step_cost"] == api["step_cost"]
    stats = runner.invoke(app, ["stats", str(runs["pipeline"])])
    assert stats.exit_code == 0, stats.output
    assert "  86.16 ms per step at p50, 119.53 ms with every collective at its p99" in stats.output.splitlines()
    refused = runner.invoke(app, ["compare", *ids, "--plan", "1:x"])
    assert (refused.exit_code, refused.output.strip()) == (
        2,
        "error: plans: expected run:plan pairs such as 4:1,5:2, got '1:x'",
    )
