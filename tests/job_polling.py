"""Following a measurement job until it reaches a state, through a TestClient or an HTTP client whose
base URL is a real server (both take a path)."""

import time


def wait_for(client, job_id: str, states: tuple[str, ...], timeout_s: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(f"/api/measurements/{job_id}").json()
        if job["state"] in states:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached {states}: {job}")
