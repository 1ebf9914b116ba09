"""A rank count inferred from nccl-tests' busbw/algbw factor (a log without rank lines) is labelled "inferred"
wherever the assumptions name their sources — the JSON, the run page, the compare table's source and the CLI —
and one read from the log's rank lines stays "file"."""

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from paths import SHARED_NCCL
from slower_sweep import B200_LOG

pytestmark = pytest.mark.both_databases

A100 = SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"  # prints its 16 rank lines


def _upload(client: TestClient, path) -> int:
    response = client.post("/api/runs", files={"file": (path.name, path.read_bytes())})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_an_inferred_rank_count_says_inferred_and_a_read_one_file(client: TestClient, cli_env) -> None:
    inferred, read = _upload(client, B200_LOG), _upload(client, A100)
    assert client.get(f"/api/runs/{inferred}/stats").json()["assumptions"]["sources"]["ranks"] == "inferred"
    assert client.get(f"/api/runs/{read}/stats").json()["assumptions"]["sources"]["ranks"] == "file"
    compared = client.get("/api/compare", params={"runs": f"{inferred},{read}"}).json()
    assert [a["sources"]["ranks"] for a in compared["assumptions"]] == ["inferred", "file"]
    # A typed rank count is the reader's, inferred or not.
    typed = client.get(f"/api/runs/{inferred}/stats", params={"ranks": 8}).json()["assumptions"]["sources"]
    assert typed["ranks"] == "query"

    assert "Ranks · inferred from the file's busbw/algbw factor" in client.get(f"/runs/{inferred}").text
    assert "Ranks · from file" in client.get(f"/runs/{read}").text

    runner = CliRunner()
    stats = runner.invoke(app, ["stats", str(inferred)], env={"COLUMNS": "1000"}).output
    # No link given: the page's words, the server's fallback not claimed as the link.
    assert (
        "assumed: no link speed given (the fallback 100 Gbit/s is not applied: no % of ideal), α 5 µs (settings), "
        "ranks 16 (inferred)"
    ) in stats
    document = json.loads(runner.invoke(app, ["stats", str(read), "--json"]).output)
    assert document["assumptions"]["sources"]["ranks"] == "file"
