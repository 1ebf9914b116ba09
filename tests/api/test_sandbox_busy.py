"""A burst of model uploads while both sandbox slots are taken: 503 with Retry-After at once, and the
rest of the server keeps answering. Through real HTTP, where worker threads are what runs out."""

import threading
import time
from collections.abc import Iterator

import httpx2
import pytest

from emuplan.sandbox.runner import MAX_CONCURRENT_RUNS
from emuplan.settings import Settings
from live_server import LiveServer, start_server, stop_server

pytestmark = pytest.mark.sandbox

SLEEPER = b"import time\n\ntime.sleep(120)\n"
BURST = 45  # more than the 40 threads of the server's thread pool


@pytest.fixture
def short_sandbox_server(database_url: str) -> Iterator[LiveServer]:
    live = start_server(Settings(database_url=database_url, demo=False, sandbox_timeout_s=15))
    yield live
    stop_server(live)


def test_uploads_beyond_the_free_slots_get_503_at_once_and_pages_keep_answering(
    short_sandbox_server: LiveServer,
) -> None:
    url = short_sandbox_server.url
    finished: dict[str, tuple[float, httpx2.Response]] = {}

    def send(key: str, method: str, path: str, **kwargs) -> None:
        response = httpx2.request(method, url + path, timeout=120, **kwargs)
        finished[key] = (time.monotonic(), response)

    def upload(key: str) -> threading.Thread:
        form = {"model_class": "Sleeper", "input_shape": "4", "name": key}
        thread = threading.Thread(
            target=send, args=(key, "POST", "/api/models"), kwargs={"files": {"file": ("m.py", SLEEPER)}, "data": form}
        )
        thread.start()
        return thread

    sleepers = [upload(f"sleeper {index}") for index in range(MAX_CONCURRENT_RUNS)]
    # The sleepers hold both slots once the server has read their bodies; then everything else arrives.
    time.sleep(2)
    burst = [upload(f"burst {index}") for index in range(BURST)]
    for thread in burst:
        thread.join()
    send("health", "GET", "/api/health")
    send("page", "GET", "/runs")
    for thread in sleepers:
        thread.join()

    sleepers_done = min(finished[f"sleeper {index}"][0] for index in range(MAX_CONCURRENT_RUNS))
    for index in range(BURST):
        done, response = finished[f"burst {index}"]
        assert (response.status_code, response.headers.get("retry-after")) == (503, "10")
        assert response.json() == {"detail": "2 model runs are already in progress; try again in 10 s"}
        assert done < sleepers_done  # refused while the sandbox was still busy, not after waiting
    for key in ("health", "page"):
        done, response = finished[key]
        assert response.status_code == 200
        assert done < sleepers_done
    for index in range(MAX_CONCURRENT_RUNS):
        response = finished[f"sleeper {index}"][1]
        assert (response.status_code, response.json()) == (
            400,
            {"detail": "the model did not finish within the time limit of 15 s"},
        )
