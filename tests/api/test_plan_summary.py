"""A saved plan's summary names every parallel degree above 1: a Mixtral plan whose experts are split over 8 ranks
is "data (DP 8 · EP 8)", not just "data"."""

import re

import pytest
from fastapi.testclient import TestClient

from emuplan.wording import parallel_degrees

pytestmark = pytest.mark.both_databases


def _summary(page: str) -> str:
    return re.sub(r"<[^>]+>", "", page.split('<p class="sub">Saved plan #')[1].split("</p>")[0]).splitlines()[0]


def test_a_saved_plans_summary_names_every_parallel_degree(client: TestClient) -> None:
    mixtral = client.post("/api/plans", json={"model": "mixtral-8x7b", "mode": "framework", "ep": 8})
    assert mixtral.status_code == 201, mixtral.text
    hybrid = client.post(
        "/api/plans",
        json={"model": "llama-3-70b", "strategy": "hybrid", "mode": "framework", "tp": 8, "pp": 8, "dp": 16,
              "seq_len": 8192, "micro_batch": 1},
    )  # fmt: skip
    assert hybrid.status_code == 201, hybrid.text
    seed = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "gpus": 1})
    assert seed.status_code == 201, seed.text
    summaries = [_summary(client.get(f"/plans/{plan.json()['id']}").text) for plan in (mixtral, hybrid, seed)]
    assert summaries == [
        f"{mixtral.json()['id']} · mixtral-8x7b · data (DP 8 · EP 8) · framework mode · 100 trials · "
        "platform not said.",
        f"{hybrid.json()['id']} · llama-3-70b · hybrid (TP 8 · PP 8 · DP 16) · framework mode · 100 trials · "
        "platform not said.",
        f"{seed.json()['id']} · fashion-mnist-mlp · data (1 GPU) · tutorial mode · 8 trials · platform not said.",
    ]
    # A plan stored before expert parallelism existed has no "ep" among its inputs.
    assert parallel_degrees({"tp": 2, "pp": 1, "dp": 4}) == "TP 2 · DP 4"
