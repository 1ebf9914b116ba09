"""Saved comparisons and share links: hashed storage, token strength, 410 after revoke or expiry."""

import hashlib
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from emuplan.api.routes.comparisons import RedactShareTokens, redact_share_tokens
from emuplan.store.db import Database
from emuplan.store.tables import ShareLink

pytestmark = pytest.mark.both_databases


def _add_runs(client: TestClient, names: list[str]) -> list[int]:
    """Real imports through the upload API: a tiny per-iteration CSV per run."""
    ids = []
    for index, name in enumerate(names):
        csv = "iteration,data size,collective,completion time (ms)\n" + "".join(
            f"{i},971048,all_reduce,{10 + index + i / 10}\n" for i in range(5)
        )
        response = client.post("/api/runs", files={"file": (f"{name}.csv", csv.encode())}, data={"name": name})
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


@pytest.fixture
def comparison_id(client: TestClient, database: Database) -> int:
    run_ids = _add_runs(client, ["data", "tensor", "pipeline"])
    response = client.post(
        "/api/comparisons",
        json={"name": "dp vs tp vs pp", "run_ids": run_ids, "baseline_run_id": run_ids[0], "options": {"log_x": False}},
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_comparison_is_saved_with_runs_baseline_and_options(client: TestClient, database: Database) -> None:
    run_ids = _add_runs(client, ["a", "b"])
    created = client.post("/api/comparisons", json={"name": " a vs b ", "run_ids": run_ids}).json()
    assert created["name"] == "a vs b"
    assert created["run_ids"] == run_ids
    assert created["baseline_run_id"] == run_ids[0]  # the first run when none is named
    assert created["options"] == {"log_x": True, "assumptions": {}, "plans": {}}  # each run's own, linked plans
    assert client.get(f"/api/comparisons/{created['id']}").json() == created
    assert [c["id"] for c in client.get("/api/comparisons").json()] == [created["id"]]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "x", "run_ids": []}, "runs: choose at least one run to compare"),
        ({"name": "x", "run_ids": [999]}, "runs: no run with id 999"),
        ({"name": "  ", "run_ids": [1]}, "name: a comparison needs a name"),
        ({"name": "x", "run_ids": [1], "baseline_run_id": 2}, "baseline_run_id: run 2 is not one of the compared runs"),
    ],
)
def test_bad_comparison_is_refused_with_the_field_named(client, database, body, message) -> None:
    _add_runs(client, ["only"])
    response = client.post("/api/comparisons", json=body)
    assert response.status_code == 422
    assert response.json()["detail"] == message
    assert client.get("/api/comparisons").json() == []


def test_share_token_is_256_bits_shown_once_and_stored_only_as_its_sha256(
    client: TestClient, database: Database, comparison_id: int
) -> None:
    response = client.post(f"/api/comparisons/{comparison_id}/shares", json={})
    assert response.status_code == 201
    assert response.headers["cache-control"] == "no-store"
    share = response.json()
    token = share["token"]
    assert len(token) == 43  # token_urlsafe(32): 32 random bytes = 256 bits
    assert share["path"] == f"/s/{token}"
    assert share["state"] == "active" and share["expires_at"] is None
    with database.read_session() as session:
        stored = session.exec(select(ShareLink)).one()
    assert stored.token_hash == hashlib.sha256(token.encode()).hexdigest()
    # The token itself appears nowhere in the database file.
    database_file = Path(database.url.removeprefix("sqlite:///"))
    for path in (database_file, database_file.with_name(database_file.name + "-wal")):
        assert token.encode() not in (path.read_bytes() if path.exists() else b"")
    listed = client.get(f"/api/comparisons/{comparison_id}/shares").json()
    assert listed == [{k: v for k, v in share.items() if k not in ("token", "path")}]
    assert "token" not in listed[0]


def test_two_links_get_different_tokens(client: TestClient, comparison_id: int) -> None:
    first = client.post(f"/api/comparisons/{comparison_id}/shares", json={}).json()["token"]
    second = client.post(f"/api/comparisons/{comparison_id}/shares", json={}).json()["token"]
    assert first != second


def test_share_page_opens_with_no_referrer_and_unknown_token_is_404(client: TestClient, comparison_id: int) -> None:
    token = client.post(f"/api/comparisons/{comparison_id}/shares", json={}).json()["token"]
    page = client.get(f"/s/{token}")
    assert page.status_code == 200
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "dp vs tp vs pp" in page.text
    shared = client.get(f"/api/shared/{token}")
    assert shared.status_code == 200
    assert shared.headers["referrer-policy"] == "no-referrer"
    assert shared.json()["comparison"]["name"] == "dp vs tp vs pp"
    run_id = shared.json()["runs"][0]["run_id"]
    figure = client.get(f"/api/shared/{token}/runs/{run_id}/figures/cdf")
    assert (figure.status_code, figure.headers["cache-control"]) == (200, "no-store")
    assert client.get("/s/" + "A" * 43).status_code == 404
    assert client.get("/api/shared/" + "A" * 43).status_code == 404


def test_revoked_link_answers_410_and_is_kept(client: TestClient, database: Database, comparison_id: int) -> None:
    share = client.post(f"/api/comparisons/{comparison_id}/shares", json={}).json()
    revoked = client.delete(f"/api/comparisons/{comparison_id}/shares/{share['id']}")
    assert revoked.status_code == 200
    assert revoked.json()["state"] == "revoked"
    page = client.get(share["path"])
    assert page.status_code == 410
    assert "revoked" in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    assert client.get(f"/api/shared/{share['token']}").status_code == 410
    # Revoking never deletes: the owner still sees the link and when it stopped.
    listed = client.get(f"/api/comparisons/{comparison_id}/shares").json()
    assert [(s["id"], s["state"]) for s in listed] == [(share["id"], "revoked")]
    assert client.delete(f"/api/comparisons/{comparison_id}/shares/{share['id'] + 1}").status_code == 404


def test_expired_link_answers_410(client: TestClient, database: Database, comparison_id: int) -> None:
    share = client.post(f"/api/comparisons/{comparison_id}/shares", json={"expires_in_days": 7}).json()
    expires_at = datetime.fromisoformat(share["expires_at"])
    assert timedelta(days=6, hours=23) < expires_at - datetime.now(UTC) <= timedelta(days=7)
    assert client.get(share["path"]).status_code == 200
    with database.writing() as session:  # a week passes
        link = session.get(ShareLink, share["id"])
        link.expires_at = datetime.now(UTC) - timedelta(seconds=1)
        session.add(link)
    page = client.get(share["path"])
    assert page.status_code == 410
    assert "expired" in page.text
    assert client.get(f"/api/shared/{share['token']}").json()["detail"].startswith("This share link was expired")
    assert client.get(f"/api/comparisons/{comparison_id}/shares").json()[0]["state"] == "expired"


@pytest.mark.parametrize("days", [0, -1, 4000])
def test_expiry_out_of_range_is_refused(client: TestClient, comparison_id: int, days: float) -> None:
    response = client.post(f"/api/comparisons/{comparison_id}/shares", json={"expires_in_days": days})
    assert response.status_code == 422
    assert response.json()["detail"].startswith("expires_in_days: must be between 0 and 3650")


def test_share_for_missing_comparison_is_404(client: TestClient) -> None:
    assert client.post("/api/comparisons/42/shares", json={}).status_code == 404


def test_access_log_lines_never_carry_a_token() -> None:
    token = "Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eHF1dXg"
    assert redact_share_tokens(f"/s/{token}") == "/s/[redacted]"
    assert redact_share_tokens(f"/api/shared/{token}/x") == "/api/shared/[redacted]/x"
    assert redact_share_tokens("/runs/3") == "/runs/3"
    # uvicorn's access logger formats '%s - "%s %s HTTP/%s" %d' with the path as an argument.
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/s/{token}", "1.1", 200),
        None,
    )
    assert RedactShareTokens().filter(record)
    assert token not in record.getMessage()
    assert "/s/[redacted]" in record.getMessage()


def test_shared_json_is_the_compare_document_of_its_runs_and_nothing_else(client: TestClient) -> None:
    run_ids = _add_runs(client, ["data", "tensor", "pipeline", "private"])
    compared = run_ids[:3]
    comparison = client.post(
        "/api/comparisons", json={"name": "three", "run_ids": compared, "baseline_run_id": compared[1]}
    ).json()
    token = client.post(f"/api/comparisons/{comparison['id']}/shares", json={}).json()["token"]
    shared = client.get(f"/api/shared/{token}").json()
    direct = client.get(f"/api/compare?runs={','.join(map(str, compared))}&baseline={compared[1]}&log_x=true").json()
    assert {k: v for k, v in shared.items() if k != "comparison"} == direct
    assert [run["name"] for run in shared["runs"]] == ["data", "tensor", "pipeline"]
    assert shared["baseline_run_id"] == compared[1]
    assert len(shared["ks_tests"]) == 3
    assert "private" not in client.get(f"/s/{token}").text
    figure = client.get(f"/api/shared/{token}/runs/{compared[0]}/figures/delay")
    assert figure.status_code == 200
    assert figure.json() == client.get(f"/api/runs/{compared[0]}/figures/delay").json()
    # The token opens its own runs only.
    assert client.get(f"/api/shared/{token}/runs/{run_ids[3]}/figures/delay").status_code == 404


def test_shared_comparison_drops_a_deleted_run(client: TestClient) -> None:
    run_ids = _add_runs(client, ["kept", "deleted"])
    comparison = client.post("/api/comparisons", json={"name": "two", "run_ids": run_ids}).json()
    token = client.post(f"/api/comparisons/{comparison['id']}/shares", json={}).json()["token"]
    assert client.delete(f"/api/runs/{run_ids[0]}").status_code == 204
    shared = client.get(f"/api/shared/{token}").json()
    assert [run["name"] for run in shared["runs"]] == ["deleted"]
    assert shared["baseline_run_id"] == run_ids[1]
    assert client.get(f"/s/{token}").status_code == 200


@pytest.mark.parametrize("path", ["/plans/99", "/runs/99", "/comparisons/99"])
def test_pages_of_missing_things_are_404(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert "99" in response.json()["detail"]


def test_compare_page_names_a_missing_run(client: TestClient) -> None:
    run_ids = _add_runs(client, ["one"])
    response = client.get(f"/compare?runs={run_ids[0]},77")
    assert response.status_code == 404
    assert "run 77 does not exist" in response.text
    assert client.get("/compare?runs=1,x").status_code == 422
