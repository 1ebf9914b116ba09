"""Two real server processes (``emuplan serve``) on one PostgreSQL database: a measurement started on
one is reported by the other, refused a second time on the same host by either, and cancelled from the
other, its measuring processes killed. ``emuplan serve --workers 2`` runs two worker processes on one
port that answer for each other's jobs."""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from job_polling import wait_for
from ports import free_port
from postgres_server import TEMPLATE, PostgresServer

EMUPLAN = Path(sys.executable).with_name("emuplan")
LONG = {"world_size": 2, "backend": "gloo", "iterations": 100000, "warmup": 0}


class ServerProcess:
    def __init__(self, database_url: str, log: Path, *options: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = httpx2.Client(base_url=self.url)
        env = {**os.environ, "EMUPLAN_DATABASE_URL": database_url, "EMUPLAN_DEMO": "false"}
        self.log = log
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                [str(EMUPLAN), "serve", "--port", str(self.port), *options],
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx2.get(self.url + "/api/health").status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"emuplan serve did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)

    def children(self) -> list[int]:
        """The server's child processes (the measuring processes of a running job)."""
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(fields[1]) == self.process.pid:
                found.append(int(stat.parent.name))
        return found

    def stop(self) -> None:
        self.http.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> Iterator[str]:
    name = postgres.create_database(template=TEMPLATE)
    yield postgres.url(name)
    postgres.drop_database(name)


@pytest.fixture
def two_servers(postgres_url: str, tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    first = ServerProcess(postgres_url, tmp_path / "first.log")
    try:
        second = ServerProcess(postgres_url, tmp_path / "second.log")
    except RuntimeError:
        first.stop()
        raise
    yield first, second
    first.stop()
    second.stop()


def test_a_job_started_on_one_server_is_followed_refused_and_cancelled_on_the_other(two_servers) -> None:
    first, second = two_servers
    plan = httpx2.post(f"{first.url}/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data"})
    plan_id = plan.json()["id"]

    started = httpx2.post(f"{first.url}/api/plans/{plan_id}/measure", json=LONG, timeout=30)
    assert started.status_code == 202, started.text
    job_id = started.json()["id"]
    running = wait_for(second.http, job_id, ("running",))
    assert (running["plan_id"], running["world_size"], running["iterations_total"]) == (plan_id, 2, 100000)
    deadline = time.monotonic() + 30
    while httpx2.get(f"{second.url}/api/measurements/{job_id}").json()["iterations_done"] == 0:
        assert time.monotonic() < deadline, "no progress reached the second server"
        time.sleep(0.1)
    assert [job["id"] for job in httpx2.get(f"{second.url}/api/measurements").json()] == [job_id]
    assert len(first.children()) == 2 and second.children() == []  # the ranks run under the first server

    # One measurement at a time per host, whichever server is asked.
    busy = httpx2.post(f"{second.url}/api/plans/{plan_id}/measure", json=LONG, timeout=30)
    assert (busy.status_code, busy.headers["location"]) == (409, f"/api/measurements/{job_id}")
    assert busy.json()["detail"] == f"a measurement is already running (job {job_id}); wait for it or cancel it"

    cancelled = httpx2.delete(f"{second.url}/api/measurements/{job_id}", timeout=30)
    assert cancelled.status_code == 200
    assert (cancelled.json()["state"], cancelled.json()["error"]) == ("cancelled", "the measurement was cancelled")
    assert httpx2.get(f"{first.url}/api/measurements/{job_id}").json()["state"] == "cancelled"
    assert first.children() == []
    assert httpx2.get(f"{first.url}/api/runs").json() == []

    # The host is free again: a job started on the second server is followed to its run on the first.
    short = {"world_size": 2, "backend": "gloo", "iterations": 3, "warmup": 1}
    again = httpx2.post(f"{second.url}/api/plans/{plan_id}/measure", json=short, timeout=30)
    assert again.status_code == 202, again.text
    done = wait_for(first.http, again.json()["id"], ("succeeded", "failed", "cancelled"))
    assert (done["state"], done["error"], done["iterations_done"], done["iterations_total"]) == (
        "succeeded",
        None,
        4,
        4,
    )
    run = httpx2.get(f"{first.url}/api/runs/{done['run_id']}").json()
    # The data-parallel plan of this model has one gradient all-reduce per step: 3 measured samples.
    assert (run["origin"], run["plan_id"], run["ranks"], run["sample_count"]) == ("measured", plan_id, 2, 3)
    listed = httpx2.get(f"{first.url}/api/measurements").json()
    assert [(job["id"], job["state"]) for job in listed] == [(again.json()["id"], "succeeded"), (job_id, "cancelled")]


def test_serve_with_two_workers_answers_for_jobs_either_one_runs(postgres_url: str, tmp_path: Path) -> None:
    server = ServerProcess(postgres_url, tmp_path / "workers.log", "--workers", "2")
    try:
        # uvicorn's two worker processes under its supervisor (beside multiprocessing's resource tracker)
        workers = [pid for pid in server.children() if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(workers) == 2
        plan = httpx2.post(f"{server.url}/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data"})
        short = {"world_size": 2, "backend": "gloo", "iterations": 3, "warmup": 1}
        started = httpx2.post(f"{server.url}/api/plans/{plan.json()['id']}/measure", json=short, timeout=30)
        assert started.status_code == 202, started.text
        # Each poll lands on either worker (the kernel spreads the connections): every one knows the job.
        done = wait_for(server.http, started.json()["id"], ("succeeded", "failed", "cancelled"))
        assert (done["state"], done["iterations_done"]) == ("succeeded", 4)
        assert httpx2.get(f"{server.url}/api/runs/{done['run_id']}").json()["origin"] == "measured"
    finally:
        server.stop()
