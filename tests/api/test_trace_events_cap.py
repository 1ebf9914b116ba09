"""EMUPLAN_MAX_TRACE_EVENTS over HTTP: a profiler trace of more events is a 413 naming the file, nothing stored."""

import json

import pytest
from fastapi.testclient import TestClient

from emuplan.settings import Settings

pytestmark = pytest.mark.both_databases


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, demo=False, max_trace_events=3)


def test_a_trace_past_the_cap_is_a_413_and_stores_nothing(client: TestClient) -> None:
    events = [{"ph": "X", "name": "ProfilerStep#1", "ts": 0.0, "dur": 100.0}] + [
        {
            "ph": "X",
            "name": "gloo:broadcast",
            "ts": ts,
            "dur": 5.0,
            "args": {"Input Dims": [[8]], "Input type": ["float"]},
        }
        for ts in (10.0, 20.0, 30.0)
    ]
    info = {"backend": "gloo", "rank": 0, "world_size": 1, "pg_config": [{"pg_name": "0", "pg_size": 1}]}
    trace = json.dumps({"distributedInfo": info, "traceEvents": events}).encode()
    answer = client.post("/api/runs", files={"file": ("rank0.pt.trace.json", trace, "application/json")})
    assert (answer.status_code, answer.json()) == (
        413,
        {
            "detail": "rank0.pt.trace.json: 4 traceEvents, more than the 3 a trace may hold "
            "(EMUPLAN_MAX_TRACE_EVENTS); profile fewer steps (torch.profiler.schedule's active)"
        },
    )
    assert client.get("/api/runs").json() == []
