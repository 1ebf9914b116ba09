"""Background measurements through the API: start without blocking, progress, one at a time, cancel,
failures store nothing and leave no worker behind."""

import socket
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from emuplan.services.jobs.engine import runner
from job_polling import wait_for
from scheduling import EXPECTED_REALTIME_POLICY

pytestmark = pytest.mark.both_databases

LONG = {"world_size": 2, "backend": "gloo", "iterations": 100000, "warmup": 0}


def create_seed_plan(client: TestClient, strategy: str = "pipeline") -> int:
    response = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": strategy})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def worker_pids(client: TestClient, job_id: str) -> list[int]:
    return runner(client.app.state.database).job(job_id).launcher.worker_pids


def running(pids: list[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def test_measure_runs_in_the_background_and_stores_a_measured_run(client: TestClient) -> None:
    plan_id = create_seed_plan(client)
    response = client.post(
        f"/api/plans/{plan_id}/measure", json={"world_size": 2, "backend": "gloo", "iterations": 3, "warmup": 1}
    )
    # The answer comes before the workers are up: still starting, no iteration count known yet.
    assert response.status_code == 202, response.text
    job = response.json()
    assert (job["iterations_done"], job["iterations_total"]) == (0, None)
    assert response.headers["location"] == f"/api/measurements/{job['id']}"
    assert (job["plan_id"], job["state"], job["world_size"], job["backend"], job["scheduling"], job["run_id"]) == (
        plan_id,
        "starting",
        2,
        "gloo",
        "realtime",
        None,
    )

    done = wait_for(client, job["id"], ("succeeded", "failed"))
    assert done["state"] == "succeeded", done["error"]
    assert (done["iterations_done"], done["iterations_total"], done["warmup"]) == (4, 4, False)
    run = client.get(f"/api/runs/{done['run_id']}").json()
    assert (run["origin"], run["plan_id"], run["strategy"], run["ranks"], run["sample_count"]) == (
        "measured",
        plan_id,
        "pipeline",
        2,
        12,
    )
    assert run["origin_detail"] == (
        f"measured locally (gloo, world size 2, host {socket.gethostname()}, timed at {EXPECTED_REALTIME_POLICY}); "
        "3 iterations after 1 warm-up iteration (excluded)"
    )
    assert [group["size_bytes"] for group in run["summary"]["groups"]] == [2600, 33024, 131584, 803840]
    assert [job["id"] for job in client.get("/api/measurements").json()] == [job["id"]]
    assert running(worker_pids(client, job["id"])) == []


def test_normal_scheduling_is_kept_when_asked_for(client: TestClient) -> None:
    plan_id = create_seed_plan(client, "data")
    body = {"world_size": 2, "backend": "gloo", "iterations": 2, "warmup": 0, "scheduling": "normal"}
    job = client.post(f"/api/plans/{plan_id}/measure", json=body).json()
    done = wait_for(client, job["id"], ("succeeded", "failed"))
    assert done["state"] == "succeeded", done["error"]
    assert client.get(f"/api/runs/{done['run_id']}").json()["origin_detail"] == (
        f"measured locally (gloo, world size 2, host {socket.gethostname()}, timed at normal priority (as asked)); "
        "2 iterations after 0 warm-up iterations (excluded)"
    )


def test_one_measurement_at_a_time_and_cancel_kills_the_workers(client: TestClient) -> None:
    plan_id = create_seed_plan(client, "data")
    job = client.post(f"/api/plans/{plan_id}/measure", json=LONG).json()
    wait_for(client, job["id"], ("running",))

    busy = client.post(f"/api/plans/{plan_id}/measure", json=LONG)
    assert busy.status_code == 409
    assert busy.json()["detail"] == (f"a measurement is already running (job {job['id']}); wait for it or cancel it")
    assert busy.headers["location"] == f"/api/measurements/{job['id']}"

    progressing = client.get(f"/api/measurements/{job['id']}").json()
    assert progressing["iterations_total"] == 100000

    cancelled = client.delete(f"/api/measurements/{job['id']}")
    assert cancelled.status_code == 200
    assert (cancelled.json()["state"], cancelled.json()["error"]) == ("cancelled", "the measurement was cancelled")
    assert running(worker_pids(client, job["id"])) == []
    assert client.get("/api/runs").json() == []

    # Free again: the next measurement may start.
    again = client.post(f"/api/plans/{plan_id}/measure", json={**LONG, "iterations": 1})
    assert again.status_code == 202
    assert wait_for(client, again.json()["id"], ("succeeded", "failed"))["state"] == "succeeded"


def test_a_measurement_that_times_out_fails_and_stores_nothing(client: TestClient) -> None:
    plan_id = create_seed_plan(client, "data")
    # Workers take longer than 0.5 s to import torch; 1,000 iterations could take 0.07 s at the least (any more
    # would be refused as unable to end within the timeout).
    job = client.post(f"/api/plans/{plan_id}/measure", json={**LONG, "iterations": 1000, "timeout_s": 0.5}).json()
    failed = wait_for(client, job["id"], ("succeeded", "failed"))
    assert failed["state"] == "failed"
    assert failed["error"].startswith("measurement timed out after 0.5 s")
    assert failed["run_id"] is None
    assert client.get("/api/runs").json() == []
    assert running(worker_pids(client, job["id"])) == []


def test_a_measurement_that_cannot_end_within_its_timeout_is_refused_before_it_starts(client: TestClient) -> None:
    plan_id = create_seed_plan(client, "data")
    response = client.post(f"/api/plans/{plan_id}/measure", json={**LONG, "timeout_s": 0.5})
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "100000 iterations of 1 collective take at least 7 s on local processes (20 µs a call and its bytes at 20 "
        "GB/s, far faster than measured), more than the timeout of 0.5 s; choose fewer iterations or a longer "
        "timeout (at most 3600 s)"
    )
    assert client.get("/api/measurements").json() == []


def test_bad_requests_are_refused_before_anything_starts(client: TestClient) -> None:
    plan_id = create_seed_plan(client, "tensor")
    assert client.post("/api/plans/999/measure", json={}).json() == {"detail": "no plan with id 999"}
    assert client.post("/api/plans/999/measure", json={}).status_code == 404
    response = client.post(f"/api/plans/{plan_id}/measure", json={"world_size": 5})
    assert response.status_code == 422
    assert response.json()["detail"] == (
        "plan.kccb[0].data_sizes[0]: all_gather of 25755648 bytes does not split into 5 equal per-rank pieces; "
        "choose a world size that divides it"
    )
    response = client.post(
        f"/api/plans/{plan_id}/measure", json={"iterations": 0, "backend": "mpi", "scheduling": "turbo"}
    )
    assert response.status_code == 422
    assert {error["loc"][-1] for error in response.json()["detail"]} == {"iterations", "backend", "scheduling"}
    assert client.get("/api/measurements/nope").status_code == 404
    assert client.delete("/api/measurements/nope").status_code == 404
    assert client.get("/api/measurements").json() == []


def test_a_measurement_past_its_bounds_is_refused_with_the_reason(client: TestClient) -> None:
    plan_id = create_seed_plan(client)
    response = client.post(
        f"/api/plans/{plan_id}/measure", json={"iterations": 100_001, "warmup": 10_001, "timeout_s": 3601}
    )
    assert response.status_code == 422
    assert {error["loc"][-1] for error in response.json()["detail"]} == {"iterations", "warmup", "timeout_s"}
    # GPT-2's 498 MB gradient all-reduce on 64 local ranks: the workers themselves, not only their buffers.
    gpt2 = client.post("/api/plans", json={"model": "gpt2", "strategy": "data", "gpus": 64}).json()["id"]
    response = client.post(f"/api/plans/{gpt2}/measure", json={"world_size": 64, "backend": "gloo"})
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("64 local processes would need about ")
    assert (
        "MiB per rank: the worker itself, its buffers and gloo's copy of the largest), more than half the "
        in (response.json()["detail"])
    )
    assert client.get("/api/measurements").json() == []


def test_every_job_answers_and_cancels_at_api_jobs_too(client: TestClient) -> None:
    plan_id = create_seed_plan(client, "data")
    job = client.post(f"/api/plans/{plan_id}/measure", json=LONG).json()
    wait_for(client, job["id"], ("running",))
    generic = client.get(f"/api/jobs/{job['id']}").json()
    assert (generic["kind"], generic["plan_id"], generic["state"], generic["finished_at"]) == (
        "measurement", plan_id, "running", None
    )  # fmt: skip
    assert generic["progress"]["iterations_total"] == 100000
    assert [listed["id"] for listed in client.get("/api/jobs", params={"kind": "measurement"}).json()] == [job["id"]]
    cancelled = client.delete(f"/api/jobs/{job['id']}").json()
    assert (cancelled["state"], cancelled["error"], cancelled["result"]) == (
        "cancelled", "the measurement was cancelled", None
    )  # fmt: skip
    assert running(worker_pids(client, job["id"])) == []
    assert client.get(f"/api/measurements/{job['id']}").json()["state"] == "cancelled"
    assert client.get("/api/jobs/nope").json() == {"detail": "no job 'nope'"}
