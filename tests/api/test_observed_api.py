"""Observed runs through the CLI and the API on both databases: a real DDP job's profiler traces imported as one
run and held against the plan of the same model, an Inspector dump directory uploaded as a zip, and a dump cut
short refused with nothing stored."""

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.store.db import Database
from inspector_job import INSPECTOR_2_30_JOB, INSPECTOR_JOB, zipped_dump
from profiled_ddp import saved_ddp_plan

pytestmark = pytest.mark.both_databases
runner = CliRunner()


def test_a_jobs_traces_import_as_one_observed_run_that_matches_its_plan(
    traces: list[Path], cli_env: str, client: TestClient
) -> None:
    plan_id = saved_ddp_plan(Database(cli_env))
    imported = runner.invoke(app, ["import", "--job", *map(str, traces), "--plan", str(plan_id), "--json"])
    assert imported.exit_code == 0, imported.output
    run = json.loads(imported.stdout)
    assert (run["origin"], run["source_format"], run["ranks"], run["hosts"]) == ("observed", "pytorch-profiler", 2, 1)
    assert (run["file_name"], run["sample_count"], run["plan_id"]) == ("rank0.json and 1 more", 8, plan_id)
    assert run["summary"]["observed"]["steps"] == [2, 3]
    compared = runner.invoke(app, ["observed", str(run["id"]), "--json"])
    assert compared.exit_code == 0, compared.output
    document = json.loads(compared.stdout)
    assert (document["plan_id"], document["steps"], document["predicted_pct"]) == (plan_id, 2, 100.0)
    assert document["counts"]["matched"] == 4 and document["summary"] == "plan predicted 100 % of the bytes per step"
    text = runner.invoke(app, ["observed", str(run["id"])])
    assert text.stdout.splitlines()[0] == (
        f"run {run['id']} against plan {plan_id} (ThreeLayers data (framework)), per step over 2 steps: "
        "plan predicted 100 % of the bytes per step"
    )
    page = client.get(f"/runs/{run['id']}")
    assert page.status_code == 200
    assert '<p id="observed-summary"><strong>plan predicted 100 % of the bytes per step</strong></p>' in page.text
    assert page.text.count('<tr class="observed-matched">') == 4
    again = runner.invoke(app, ["import", "--job", *map(str, reversed(traces))])
    assert again.exit_code == 2 and f"already imported as run {run['id']}" in again.output


def test_an_inspector_dump_directory_uploads_as_a_zip(client: TestClient) -> None:
    upload = client.post("/api/runs", files={"file": ("nccl-inspector-4242.zip", zipped_dump(INSPECTOR_JOB))})
    assert upload.status_code == 201, upload.text
    run = upload.json()
    assert (run["origin"], run["source_format"], run["ranks"], run["hosts"]) == ("observed", "nccl-inspector", 2, 2)
    assert [g["label"] for g in run["summary"]["groups"]] == [
        "all_reduce · 1048576 B · 0xc0ffee",
        "all_gather · 131072 B · 0xc0ffee",
    ]
    stats = client.get(f"/api/runs/{run['id']}/stats").json()
    assert stats["stragglers"]["slowest_rank"]["name"] == "1"
    plan = client.post(
        "/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "mode": "framework", "gpus": 2}
    )
    plan_id = plan.json()["id"]
    no_steps = client.get(f"/api/runs/{run['id']}/observed-vs-plan", params={"plan": plan_id})
    assert no_steps.status_code == 422 and "records no training steps" in no_steps.json()["detail"]
    compared = client.get(f"/api/runs/{run['id']}/observed-vs-plan", params={"plan": plan_id, "steps": 3})
    assert compared.status_code == 200, compared.text
    assert compared.json()["counts"] == {
        "matched": 0,
        "count differs": 0,
        "size differs": 1,
        "missing": 0,
        "unexpected": 1,
    }


def test_an_nccl_2_30_dump_with_p2p_records_uploads_with_its_communicator_s_name(client: TestClient) -> None:
    upload = client.post("/api/runs", files={"file": ("nccl-inspector-2.30.zip", zipped_dump(INSPECTOR_2_30_JOB))})
    assert upload.status_code == 201, upload.text
    run = upload.json()
    assert (run["source_format"], run["ranks"], run["sample_count"]) == ("nccl-inspector", 2, 2)
    assert [g["label"] for g in run["summary"]["groups"]] == ["all_reduce · 1048576 B · default_pg (0xc0ffee)"]
    assert [warning.split(":")[0] for warning in run["warnings"]] == [
        f"nccl-inspector-2.30.zip/nccl-inspector-4242/{path.name}" for path in INSPECTOR_2_30_JOB
    ]
    assert run["warnings"][0].endswith(": 2 p2p_perf records skipped (line 2, 4): point-to-point sends and receives "
                                       "(p2p_perf, NCCL_INSPECTOR_ENABLE_P2P) and event records are not collectives "
                                       "of a communicator; its collectives are read")  # fmt: skip


def test_a_dump_cut_short_is_refused_and_nothing_stored(client: TestClient) -> None:
    content = INSPECTOR_JOB[0].read_bytes()
    upload = client.post("/api/runs", files={"file": ("gpu-a-pid101.log", content[: content.index(b"\n") + 120])})
    assert upload.status_code == 400
    assert upload.json()["detail"].startswith("gpu-a-pid101.log: line 2: not a JSON object: ")
    assert client.get("/api/runs").json() == []


def test_a_run_that_was_not_observed_has_no_plan_comparison(client: TestClient) -> None:
    csv = b"iteration,duration_us\n0,10\n1,12\n"
    run_id = client.post("/api/runs", files={"file": ("r.csv", csv)}).json()["id"]
    answer = client.get(f"/api/runs/{run_id}/observed-vs-plan")
    assert answer.status_code == 422 and answer.json()["detail"].startswith(f"run {run_id} is not an observed run")


def test_a_collective_set_after_import_is_what_the_plan_comparison_reads(client: TestClient) -> None:
    run_id = client.post("/api/runs", files={"file": ("dump.zip", zipped_dump(INSPECTOR_JOB))}).json()["id"]
    changed = client.patch(f"/api/runs/{run_id}", json={"collectives": {"all_gather": "all_to_all"}})
    assert changed.status_code == 200, changed.text
    plan = client.post(
        "/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "mode": "framework", "gpus": 2}
    )
    compared = client.get(f"/api/runs/{run_id}/observed-vs-plan", params={"plan": plan.json()["id"], "steps": 3})
    assert [(row["status"], row["collective"]) for row in compared.json()["rows"]] == [
        ("size differs", "all_reduce"),
        ("unexpected", "all_to_all"),
    ]
