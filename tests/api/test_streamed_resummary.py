"""A huge stored run relabelled or linked to a plan is summarised again from its tables copied to disk
(results/streaming/streamed.py's ``stored_result``), never loaded whole, into the summary the in-memory path gives: by a
relabel job (PATCH answers 202, ``services/jobs/relabel.py``) that changes the run only when it succeeds."""

import tempfile
import time

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.main import create_app
from emuplan.settings import Settings, get_settings
from emuplan.store import runs, table_files
from emuplan.store.db import Database
from fixtures.generate_results import per_flow_table, per_iteration_table, write_csv
from fixtures.summaries import assert_same

pytestmark = pytest.mark.both_databases


def generated(kind: str, path):
    """2,000 pipeline iterations over four sizes with their rare multi-second spikes, or 400 iterations of
    per-flow records over 8 ranks."""
    table = per_iteration_table(2000, seed=7) if kind == "per-iteration" else per_flow_table(400, 8, 2, seed=5)
    write_csv(table, path)
    return path


def job_started(answer) -> dict:
    """The relabel job a PATCH answered with (202, the job as Location)."""
    assert answer.status_code == 202, answer.text
    job = answer.json()
    assert answer.headers["location"] == job["url"] == job["cancel_url"] == f"/api/relabel-jobs/{job['id']}"
    return job


def job_ended(client: TestClient, job: dict) -> dict:
    deadline = time.monotonic() + 120
    while job["finished_at"] is None and time.monotonic() < deadline:
        time.sleep(0.05)
        job = client.get(job["url"]).json()
    return job


@pytest.mark.parametrize("kind", ["per-iteration", "per-flow"])
def test_a_run_over_the_threshold_is_summarised_again_streamed_as_in_memory(
    database_url, database: Database, tmp_path, monkeypatch, kind
):
    """The same file imported twice (a blank line apart): one run relabelled and linked under the default
    threshold (in memory), the other where every run is over it (streamed, its samples stored in parts)."""
    monkeypatch.setattr(table_files, "PART_BYTES", 2 << 10)
    path = generated(kind, tmp_path / "run.csv")
    again = tmp_path / "again.csv"
    again.write_bytes(path.read_bytes() + b"\n")
    in_memory = Settings(database_url=database_url, demo=False)
    streamed = Settings(database_url=database_url, demo=False, streamed_import_above_bytes=1)
    with TestClient(create_app(in_memory)) as client:
        first, second = (
            client.post("/api/runs", files={"file": (each.name, each.read_bytes(), "text/csv")}).json()["id"]
            for each in (path, again)
        )
        plan = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "gpus": 16}).json()
        changes = {"collectives": {"all_reduce": "all_gather"}, "plan_id": plan["id"]}
        assert client.patch(f"/api/runs/{first}", json=changes).status_code == 200
    with TestClient(create_app(streamed)) as client:
        job = job_started(client.patch(f"/api/runs/{second}", json=changes))
        assert (job["run_id"], job["request"], job["state"]) == (second, changes, "starting")
        ended = job_ended(client, job)
        assert (ended["state"], ended["error"]) == ("succeeded", None)
        assert ended["bytes_done"] == ended["bytes_total"] > 0
        assert client.get(f"/api/runs/{second}").json()["plan_id"] == plan["id"]
    with database.read_session() as session:
        expected, got = runs.get_run(session, first), runs.get_run(session, second)
        assert [got.ranks, got.warnings, got.kind] == [expected.ranks, expected.warnings, expected.kind]
        assert (got.p50_us, got.p99_us, got.peak_busbw_gbps) == (expected.p50_us, expected.p99_us, None)
        assert "collective set after import: all_reduce → all_gather" in got.warnings
        assert_same(runs.summary_with_curves(session, expected), runs.summary_with_curves(session, got))
        assert_same(expected.summary, got.summary)
        assert {group["collective"] for group in got.summary["groups"]} == {"all_gather"}
        assert "samples.part2" in table_files.part_kinds(session, second, "samples")
        samples = runs.load_samples(session, second)
        assert samples.to_pylist() == runs.load_samples(session, first).to_pylist()


def test_a_run_whose_summary_again_does_not_fit_its_memory_answers_413_and_stays_as_it_was(
    database_url, database: Database, tmp_path, monkeypatch
):
    """4 MiB for the streamed summary gives DuckDB 1 MB, less than its sort asks for at once (set on the settings
    object past the setting's 64 MiB floor): the relabel job fails saying so (what a request answered 413 with),
    the run keeps its samples and summary, and its temporary copy is gone."""
    path = generated("per-iteration", tmp_path / "run.csv")
    settings = Settings(database_url=database_url, demo=False)
    with TestClient(create_app(settings)) as client:
        run_id = client.post("/api/runs", files={"file": (path.name, path.read_bytes(), "text/csv")}).json()["id"]
    with database.read_session() as session:
        before = runs.get_run(session, run_id)
        summary, samples = runs.summary_with_curves(session, before), runs.load_samples(session, run_id)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    tiny = settings.model_copy(update={"streamed_import_above_bytes": 1, "streamed_import_memory_bytes": 4 << 20})
    with TestClient(create_app(tiny)) as client:
        answer = client.patch(f"/api/runs/{run_id}", json={"collectives": {"all_reduce": "all_gather"}})
        ended = job_ended(client, job_started(answer))
        assert ended["state"] == "failed"
        assert ended["error"].startswith("run.csv: summarising it takes more than the 4194304 bytes")
        assert ended["error"].endswith("; the run is unchanged")
    assert list(temporary.iterdir()) == []
    with database.read_session() as session:
        after = runs.get_run(session, run_id)
        assert (after.warnings, after.summary) == (before.warnings, before.summary)
        assert runs.summary_with_curves(session, after) == summary
        assert runs.load_samples(session, run_id).to_pylist() == samples.to_pylist()


def test_a_cancelled_relabel_job_leaves_the_run_as_it_was(database_url, database: Database, tmp_path):
    """Cancelled at once (the job's copy and DuckDB summary of 500,000 rows (~0.7 s) take far longer than the DELETE's
    round trip, and its last transaction reads the cancel flag before it changes anything): the job ends
    cancelled, the run keeps its collectives, plan, samples and statistics; the name, given beside, is changed at
    once; a second relabelling may then start."""
    path = tmp_path / "run.csv"
    write_csv(per_iteration_table(500_000, seed=3), path)
    settings = Settings(database_url=database_url, demo=False, streamed_import_above_bytes=1)
    with TestClient(create_app(settings)) as client:
        run_id = client.post("/api/runs", files={"file": (path.name, path.read_bytes(), "text/csv")}).json()["id"]
        with database.read_session() as session:
            before = runs.get_run(session, run_id)
            curves, samples = runs.summary_with_curves(session, before), runs.load_samples(session, run_id)
        changes = {"collectives": {"all_reduce": "all_gather"}, "name": "renamed"}
        job = job_started(client.patch(f"/api/runs/{run_id}", json=changes))
        assert job["request"] == {"collectives": {"all_reduce": "all_gather"}}
        second = client.patch(f"/api/runs/{run_id}", json={"plan_id": None, "collectives": {"all_reduce": "broadcast"}})
        assert second.status_code == 409
        assert second.json()["detail"] == (
            f"run {run_id} is being summarised again (job {job['id']}); wait for it or cancel it"
        )
        assert second.headers["location"] == job["url"]
        cancelled = client.delete(job["cancel_url"]).json()
        assert cancelled["state"] == "cancelled", cancelled
        assert cancelled["error"].endswith("; the run is unchanged")
        assert client.get(job["url"]).json() == cancelled
        assert [each["id"] for each in client.get("/api/relabel-jobs", params={"run_id": run_id}).json()] == [job["id"]]
    with database.read_session() as session:
        after = runs.get_run(session, run_id)
        assert after.name == "renamed"
        assert (after.warnings, after.summary, after.p50_us, after.plan_id) == (
            before.warnings, before.summary, before.p50_us, None
        )  # fmt: skip
        assert runs.summary_with_curves(session, after) == curves
        assert runs.load_samples(session, run_id).to_pylist() == samples.to_pylist()


def test_a_run_under_the_threshold_is_relabelled_in_the_request(database_url, tmp_path):
    """The default threshold: 200 with the changed run, no job."""
    path = generated("per-iteration", tmp_path / "run.csv")
    with TestClient(create_app(Settings(database_url=database_url, demo=False))) as client:
        run_id = client.post("/api/runs", files={"file": (path.name, path.read_bytes(), "text/csv")}).json()["id"]
        answer = client.patch(f"/api/runs/{run_id}", json={"collectives": {"all_reduce": "all_gather"}})
        assert answer.status_code == 200, answer.text
        assert answer.json()["warnings"][-1] == "collective set after import: all_reduce → all_gather"
        assert client.get("/api/relabel-jobs", params={"run_id": run_id}).json() == []


def test_openapi_documents_the_relabel_job_a_patch_may_answer_with(client):
    patch = client.get("/openapi.json").json()["paths"]["/api/runs/{run_id}"]["patch"]["responses"]
    assert patch["202"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/RelabelJobPublic"}
    assert set(client.get("/openapi.json").json()["paths"]["/api/relabel-jobs/{job_id}"]) == {"get", "delete"}


def test_a_plan_linked_to_a_huge_run_is_deleted_once_the_run_is_unlinked_by_its_job(
    database_url, cli_env, monkeypatch, tmp_path
):
    """Unlinking the run in the DELETE would compute its statistics again inside the request (minutes at 100 M
    rows): 409 naming the run and how to unlink it, through the API and the CLI alike; the run keeps its plan."""
    path = generated("per-iteration", tmp_path / "run.csv")
    settings = Settings(database_url=database_url, demo=False, streamed_import_above_bytes=1)
    with TestClient(create_app(settings)) as client:
        plan_id = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "gpus": 16}).json()[
            "id"
        ]
        run_id = client.post(
            "/api/runs", files={"file": (path.name, path.read_bytes(), "text/csv")}, data={"plan_id": str(plan_id)}
        ).json()["id"]
        refused = client.delete(f"/api/plans/{plan_id}")
        expected = (
            f"plan {plan_id} is linked to huge run {run_id}, whose statistics are computed again by a job once "
            f"unlinked: unlink it first (emuplan runs edit {run_id} --no-plan, or PATCH /api/runs/{run_id} with "
            '{"plan_id": null}), then delete the plan'
        )
        assert (refused.status_code, refused.json()["detail"]) == (409, expected)
        monkeypatch.setenv("EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES", "1")
        get_settings.cache_clear()
        command = CliRunner().invoke(app, ["plans", "delete", str(plan_id), "--yes"])
        assert (command.exit_code, command.stderr.strip()) == (2, f"error: {expected}")
        assert client.get(f"/api/runs/{run_id}").json()["plan_id"] == plan_id
        unlinked = job_ended(client, job_started(client.patch(f"/api/runs/{run_id}", json={"plan_id": None})))
        assert unlinked["state"] == "succeeded"
        deleted = client.delete(f"/api/plans/{plan_id}")
        assert (deleted.status_code, deleted.json()["unlinked_run_ids"]) == (200, [])
