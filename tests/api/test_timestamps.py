"""Every timestamp the API answers with carries its timezone (UTC), read back from a real SQLite file."""

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

pytestmark = pytest.mark.both_databases

LLAMA_CONFIG = b'{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 1000, "max_position_embeddings": 128}'  # noqa: E501
PER_ITERATION_CSV = (
    b"iteration,data size,collective,completion time (ms)\n0,971048,all_reduce,10\n1,971048,all_reduce,11\n"
)


def read_back_as_utc(text: str, started: datetime) -> datetime:
    moment = datetime.fromisoformat(text)
    assert moment.utcoffset() == timedelta(0), text
    assert started - timedelta(seconds=1) <= moment <= datetime.now(UTC), text
    return moment


def test_plans_models_runs_comparisons_and_share_links_answer_utc_timestamps(client: TestClient) -> None:
    started = datetime.now(UTC)
    plan_id = client.post("/api/plans", json={"model": "fashion-mnist-mlp"}).json()["id"]
    model = client.post("/api/models", files={"file": ("config.json", LLAMA_CONFIG)})
    assert model.status_code == 201, model.text
    run = client.post("/api/runs", files={"file": ("a.csv", PER_ITERATION_CSV)})
    assert run.status_code == 201, run.text
    comparison_id = client.post("/api/comparisons", json={"name": "one", "run_ids": [run.json()["id"]]}).json()["id"]
    before_share = datetime.now(UTC)
    share = client.post(f"/api/comparisons/{comparison_id}/shares", json={"expires_in_days": 1}).json()
    after_share = datetime.now(UTC)
    client.delete(f"/api/comparisons/{comparison_id}/shares/{share['id']}")

    stamps = [
        client.get(f"/api/plans/{plan_id}").json()["created_at"],
        client.get("/api/plans").json()[0]["created_at"],
        client.get(f"/api/models/{model.json()['id']}").json()["created_at"],
        client.get("/api/models").json()[0]["created_at"],
        client.get(f"/api/runs/{run.json()['id']}").json()["created_at"],
        client.get("/api/runs").json()[0]["created_at"],
        client.get(f"/api/comparisons/{comparison_id}").json()["created_at"],
    ]
    [listed_share] = client.get(f"/api/comparisons/{comparison_id}/shares").json()
    stamps += [listed_share["created_at"], listed_share["revoked_at"]]
    for text in stamps:
        read_back_as_utc(text, started)
    expires_at = datetime.fromisoformat(listed_share["expires_at"])
    assert expires_at.utcoffset() == timedelta(0)
    assert before_share + timedelta(days=1) <= expires_at <= after_share + timedelta(days=1)
