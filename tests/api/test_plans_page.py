"""/plans: every stored plan, newest first, a page of 50 at a time, with the runs linked to each (a link to the
runs list filtered by it)."""

import re

import pytest
from fastapi.testclient import TestClient

from emuplan.services.plans import plan_request
from emuplan.store import plans as plan_store
from emuplan.store.db import Database
from emuplan.workload.document import PlanRequest
from paths import SHARED_NCCL

pytestmark = pytest.mark.both_databases


def save_plans(database: Database, count: int) -> list[int]:
    request = PlanRequest(model="fashion-mnist-mlp", strategy="data")
    document, _ = plan_request(request)
    with database.writing() as session:
        return [plan_store.save_document(session, document, request, f"plan {n}").id for n in range(1, count + 1)]


def listed_ids(page: str) -> list[int]:
    return [int(plan_id) for plan_id in re.findall(r'<td data-label="Name"><a href="/plans/(\d+)">', page)]


def test_plans_are_listed_newest_first_a_page_at_a_time_with_their_linked_runs(
    client: TestClient, database: Database
) -> None:
    assert 'No plans yet. <a href="/plan">Plan one</a>.' in client.get("/plans").text
    ids = save_plans(database, 51)
    log = (SHARED_NCCL / "a100-16rank-allreduce-2.17.txt").read_bytes()
    upload = client.post("/api/runs", files={"file": ("a100.txt", log)}, data={"plan_id": str(ids[-1])})
    assert upload.status_code == 201, upload.text

    first = client.get("/plans").text
    assert listed_ids(first) == ids[::-1][:50]
    assert "plans 1–50 of 51" in first and 'href="/plans?page=2" rel="next"' in first
    assert '<td data-label="Runs linked" class="num"><a href="/runs?plan=51">1</a></td>' in first
    assert first.count('<td data-label="Runs linked" class="num">0</td>') == 49
    second = client.get("/plans?page=2").text
    assert listed_ids(second) == [ids[0]] and "plans 51–51 of 51" in second
    assert 'href="/plans?page=1" rel="prev"' in second and 'rel="next"' not in second
    # Past the end or not a number: the nearest page there is.
    assert listed_ids(client.get("/plans?page=9").text) == [ids[0]]
    assert listed_ids(client.get("/plans?page=x").text) == ids[::-1][:50]
    assert '<a href="/plans" id="all-plans">All plans</a>' in client.get("/").text
