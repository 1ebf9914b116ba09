"""Simulating a saved plan through the API: a background job with progress and a result (the exact figures the
shared ASTRA-sim build prints), its time bound, refusals before anything starts, and 503 where it is not set up."""

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from astra_sim_binary import requires_astra_sim
from emuplan.main import create_app
from emuplan.settings import Settings
from paths import ASTRA_SIM

pytestmark = pytest.mark.both_databases

SEED_DATA = {"model": "fashion-mnist-mlp", "strategy": "data", "mode": "framework"}


@pytest.fixture
def astra_client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(database_url=database_url, demo=False, astra_sim=ASTRA_SIM))) as client:
        yield client


def save_plan(client: TestClient, **request) -> int:
    response = client.post("/api/plans", json={**SEED_DATA, **request})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def wait_until_done(client: TestClient, job_id: str, timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(f"/api/simulations/{job_id}").json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"simulation {job_id} never finished: {job}")


@requires_astra_sim
def test_a_simulation_runs_in_the_background_and_keeps_its_result(astra_client: TestClient) -> None:
    plan_id = save_plan(astra_client)
    response = astra_client.post(f"/api/plans/{plan_id}/simulate", json={})
    assert response.status_code == 202, response.text
    job = response.json()
    assert response.headers["location"] == f"/api/simulations/{job['id']}"
    assert (job["plan_id"], job["state"], job["ranks_done"], job["ranks_total"], job["result"]) == (
        plan_id, "starting", 0, None, None
    )  # fmt: skip
    assert job["request"] == {"gpu": "h100-sxm", "utilisation": 0.4, "timeout_s": 120.0}

    done = wait_until_done(astra_client, job["id"])
    assert done["state"] == "succeeded", done["error"]
    assert (done["ranks_done"], done["ranks_total"], done["error"]) == (4, 4, None)
    result = astra_client.get(f"/api/simulations/{job['id']}/result").json()
    assert result == done["result"]
    assert (result["step_ns"], result["rank_groups"], result["exit_note"]) == (
        155_951,
        [
            {
                "ranks": "0-3",
                "ranks_shown": "0-3",
                "count": 4,
                "step_ns": 155_951,
                "compute_ns": 16_000,
                "exposed_comm_ns": 139_951,
            }
        ],
        None,
    )
    assert result["network"] == {
        "dimensions": [{"topology": "Ring", "npus": 4, "bandwidth_gb_s": 12.5, "latency_ns": 5000.0}]
    }
    assert [(p["parallel_dim"], p["collectives_per_step"]) for p in result["planned_comm"]] == [("dp", 1)]

    listed = astra_client.get("/api/simulations", params={"plan_id": plan_id}).json()
    assert [item["id"] for item in listed] == [job["id"]]
    assert astra_client.get("/api/simulations", params={"plan_id": plan_id + 1}).json() == []
    # A finished job stays as it is when cancelled.
    cancelled = astra_client.delete(f"/api/simulations/{job['id']}")
    assert (cancelled.status_code, cancelled.json()["state"]) == (200, "succeeded")


@requires_astra_sim
def test_a_cancel_stops_astra_sim_and_keeps_no_result(astra_client: TestClient) -> None:
    # GPT-2 at 128 micro-batches: about 3 s to write its traces and 5 s in ASTRA-sim here, time for the cancel
    # (read by the running worker within a heartbeat, 0.5 s) to reach the binary.
    plan_id = save_plan(
        astra_client, model="gpt2", strategy="hybrid", tp=2, pp=2, dp=2, batch_size=256, seq_len=128, micro_batches=128
    )
    job = astra_client.post(f"/api/plans/{plan_id}/simulate", json={}).json()
    deadline = time.monotonic() + 60
    while astra_client.get(f"/api/simulations/{job['id']}").json()["state"] != "simulating":
        assert time.monotonic() < deadline, "the simulation never started"
        time.sleep(0.05)
    cancelled = astra_client.delete(f"/api/simulations/{job['id']}").json()
    assert (cancelled["state"], cancelled["error"], cancelled["result"], cancelled["ranks_total"]) == (
        "cancelled", "cancelled: ASTRA-sim was stopped", None, 8
    )  # fmt: skip
    # The worker is free again: the next simulation starts.
    seed = save_plan(astra_client)
    again = astra_client.post(f"/api/plans/{seed}/simulate", json={})
    assert again.status_code == 202
    assert wait_until_done(astra_client, again.json()["id"])["state"] == "succeeded"


@requires_astra_sim
def test_the_wall_time_bound_fails_the_job_and_keeps_no_result(astra_client: TestClient) -> None:
    # 512 micro-batches through 4 stages: each trace takes tens of ms to encode, past the bound before the second;
    # the bound covers writing them (the job is "exporting" until the binary runs) as well as ASTRA-sim's run.
    plan_id = save_plan(astra_client, strategy="pipeline", pp=4, gpus=4, micro_batches=512)
    job = astra_client.post(f"/api/plans/{plan_id}/simulate", json={"timeout_s": 0.001}).json()
    done = wait_until_done(astra_client, job["id"])
    assert (done["state"], done["error"], done["result"]) == (
        "failed", "timeout_s: writing the plan's traces ran past 0.001 s; ASTRA-sim was not started", None
    )  # fmt: skip
    response = astra_client.get(f"/api/simulations/{job['id']}/result")
    assert (response.status_code, response.json()["detail"]) == (
        409,
        f"simulation job {job['id']} is failed: no result "
        "(timeout_s: writing the plan's traces ran past 0.001 s; ASTRA-sim was not started)",
    )


def test_refusals_come_before_anything_starts(astra_client: TestClient) -> None:
    tutorial = save_plan(astra_client, mode="tutorial")
    response = astra_client.post(f"/api/plans/{tutorial}/simulate", json={})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("mode: a Chakra trace follows the framework's schedule")
    assert astra_client.post("/api/plans/999/simulate", json={}).status_code == 404
    framework = save_plan(astra_client)
    assert astra_client.post(f"/api/plans/{framework}/simulate", json={"gpu": "tpu"}).status_code == 422
    # ASTRA-sim needs every rank's trace: a plan past a bundle's ranks is refused at once, not by a failed job.
    huge = save_plan(astra_client, model="gpt2", strategy="hybrid", tp=2, pp=2, gpus=32768, batch_size=8192)
    response = astra_client.post(f"/api/plans/{huge}/simulate", json={})
    assert (response.status_code, response.json()["detail"]) == (
        422, "gpus: ASTRA-sim needs a trace for every rank and a bundle holds at most 16384; the plan has 32768"
    )  # fmt: skip
    assert astra_client.get("/api/simulations").json() == []
    assert astra_client.get("/api/simulations/nope").status_code == 404


def test_without_the_setting_the_answer_says_how_to_install_it(client: TestClient) -> None:
    plan_id = save_plan(client)
    response = client.post(f"/api/plans/{plan_id}/simulate", json={})
    assert response.status_code == 503
    assert response.json()["detail"] == (
        "ASTRA-sim is not set up on this machine: set EMUPLAN_ASTRA_SIM to ASTRA-sim's "
        "AstraSim_Analytical_Congestion_Unaware binary (docs/simulating.md says how to build it)"
    )
