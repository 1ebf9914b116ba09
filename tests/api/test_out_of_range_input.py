"""Integers past int64 and JSON nested past Python's recursion limit: 4xx naming the field, never 500.
Through the real HTTP server, where a 500 is what the user saw."""

import httpx2
import pytest
from fastapi.testclient import TestClient

from live_server import LiveServer

pytestmark = pytest.mark.both_databases

BIG = "99999999999999999999"
NESTED = b'{"a": ' * 100_000


@pytest.mark.parametrize(
    ("method", "path", "location"),
    [
        ("GET", f"/api/runs/{BIG}", ["path", "run_id"]),
        ("GET", f"/api/runs/{BIG}/stats", ["path", "run_id"]),
        ("GET", f"/api/runs/{BIG}/figures/cdf", ["path", "run_id"]),
        ("GET", f"/api/runs/{BIG}/samples.csv", ["path", "run_id"]),
        ("GET", f"/api/runs/{BIG}/samples.parquet", ["path", "run_id"]),
        ("DELETE", f"/api/runs/{BIG}", ["path", "run_id"]),
        ("GET", f"/api/runs?plan={BIG}", ["query", "plan"]),
        ("GET", f"/api/compare?runs=1&baseline={BIG}", ["query", "baseline"]),
        ("GET", f"/api/plans/{BIG}", ["path", "plan_id"]),
        ("GET", f"/api/plans/{BIG}/kccb", ["path", "plan_id"]),
        ("GET", f"/api/plans/{BIG}/workload?format=chakra", ["path", "plan_id"]),
        ("GET", f"/api/plans?offset={BIG}", ["query", "offset"]),
        ("GET", f"/api/models/{BIG}", ["path", "definition_id"]),
        ("GET", f"/api/models?offset={BIG}", ["query", "offset"]),
        ("GET", f"/api/comparisons/{BIG}", ["path", "comparison_id"]),
        ("GET", f"/api/comparisons/{BIG}/shares", ["path", "comparison_id"]),
        ("DELETE", f"/api/comparisons/1/shares/{BIG}", ["path", "share_id"]),
        ("GET", f"/api/shared/some-token/runs/{BIG}/figures/cdf", ["path", "run_id"]),
        ("GET", f"/plan?from={BIG}", ["query", "from"]),
        ("GET", f"/plans/{BIG}", ["path", "plan_id"]),
        ("GET", f"/runs/{BIG}", ["path", "run_id"]),
        ("GET", f"/comparisons/{BIG}", ["path", "comparison_id"]),
    ],
)
def test_an_id_past_int64_in_a_path_or_query_is_422_naming_it(
    live_server: LiveServer, method: str, path: str, location: list[str]
) -> None:
    response = httpx2.request(method, live_server.url + path)
    assert response.status_code == 422
    problem = response.json()["detail"][0]
    assert (problem["loc"], problem["msg"]) == (location, "Input should be less than or equal to 9223372036854775807")


def test_ids_past_int64_in_bodies_forms_and_lists_are_422(live_server: LiveServer) -> None:
    url = live_server.url
    compare = httpx2.get(f"{url}/api/compare?runs=1,{BIG}")
    assert (compare.status_code, compare.json()) == (422, {"detail": f"runs: {BIG} is not a run id (0 to 2^63 − 1)"})
    comparison = httpx2.post(f"{url}/api/comparisons", json={"name": "x", "run_ids": [int(BIG)]})
    assert (comparison.status_code, comparison.json()["detail"][0]["loc"]) == (422, ["body", "run_ids", 0])
    plan = httpx2.post(f"{url}/api/plans/preview", json={"model_definition_id": int(BIG)})
    assert plan.status_code == 422
    assert ["body", "model_definition_id"] in [problem["loc"] for problem in plan.json()["detail"]]
    csv = b"iteration,size,collective,time_ms\n0,1024,all_reduce,1.5\n"
    upload = httpx2.post(f"{url}/api/runs", files={"file": ("r.csv", csv)}, data={"plan_id": BIG})
    assert (upload.status_code, upload.json()) == (
        422,
        {"detail": "plan_id: Input should be less than or equal to 9223372036854775807"},
    )
    # The pages' filters ignore what cannot be an id.
    assert httpx2.get(f"{url}/runs?plan={BIG}").status_code == 200


def test_json_nested_past_the_recursion_limit_is_400_naming_the_file(live_server: LiveServer) -> None:
    url = live_server.url
    nested = "not valid JSON (objects or arrays nested too deeply: line 1 column 1 (char 0))"
    run = httpx2.post(f"{url}/api/runs", files={"file": ("report.json", NESTED)})
    assert (run.status_code, run.json()) == (400, {"detail": f"report.json: {nested}"})
    model = httpx2.post(f"{url}/api/models", files={"file": ("config.json", NESTED)})
    assert (model.status_code, model.json()) == (400, {"detail": f"config.json: {nested}"})
    csv = b"iteration,size,collective,time_ms\n0,1024,all_reduce,1.5\n"
    # A form field is capped at 64 KiB: 9,000 objects (54,000 bytes) nest past the recursion limit within it.
    mapping = httpx2.post(
        f"{url}/api/runs", files={"file": ("r.csv", csv)}, data={"column_map": NESTED.decode()[: 6 * 9000]}
    )
    assert (mapping.status_code, mapping.json()) == (422, {"detail": f"column_map: {nested}"})
    assert httpx2.get(f"{url}/api/runs").json() == []


LARGEST = 2**63 - 1


def test_the_largest_int64_ids_are_looked_up_on_every_database(client: TestClient) -> None:
    """On PostgreSQL ids are BIGINT like SQLite's INTEGER: the largest id the API accepts is not found, not 500."""
    not_found = {
        f"/api/runs/{LARGEST}": f"run {LARGEST} does not exist",
        f"/api/runs/{LARGEST}/stats": f"run {LARGEST} does not exist",
        f"/api/plans/{LARGEST}": f"no plan with id {LARGEST}",
        f"/api/models/{LARGEST}": f"no model definition with id {LARGEST}",
        f"/api/comparisons/{LARGEST}": f"no comparison with id {LARGEST}",
    }
    assert {path: (client.get(path).status_code, client.get(path).json()) for path in not_found} == {
        path: (404, {"detail": detail}) for path, detail in not_found.items()
    }
    assert client.get(f"/api/runs?plan={LARGEST}").json() == []
    assert client.get(f"/api/plans?offset={LARGEST}").json() == []
    csv = b"iteration,size,collective,time_ms\n0,1024,all_reduce,1.5\n"
    upload = client.post("/api/runs", files={"file": ("r.csv", csv)}, data={"plan_id": str(LARGEST)})
    assert (upload.status_code, upload.json()) == (422, {"detail": f"plan_id: no plan with id {LARGEST}"})


@pytest.mark.parametrize(
    ("field", "value", "maximum"),
    [
        ("epochs", 2**60, 2**20),
        ("dataset_size", 2**62, 2**40),
        ("batch_size", 2**63, 2**30),
        ("link_gbps", 1e308, 10**6),
    ],
)
def test_plan_numbers_that_would_overflow_the_database_are_422_naming_the_field(
    live_server: LiveServer, field: str, value: float, maximum: int
) -> None:
    """epochs = 2^60 was stored as 2^63 trials (500 OverflowError) and previewed as 7.4e19 trials."""
    for path in ("/api/plans/preview", "/api/plans"):
        response = httpx2.post(live_server.url + path, json={"model": "fashion-mnist-mlp", field: value})
        assert response.status_code == 422, response.text
        problem = response.json()["detail"][0]
        assert (problem["loc"], problem["msg"]) == (["body", field], f"Input should be less than or equal to {maximum}")
    assert httpx2.get(live_server.url + "/api/plans").json() == []


def test_the_largest_plan_numbers_are_planned_and_stored(client: TestClient) -> None:
    """Every bound at once stays within int64: 2^40 samples in batches of 2^30, 2^20 epochs."""
    body = {"model": "gpt2", "dataset_size": 2**40, "batch_size": 2**30, "epochs": 2**20, "gpus": 64}
    response = client.post("/api/plans", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["trials"] == 2**30
