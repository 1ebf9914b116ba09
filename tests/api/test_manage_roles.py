"""Who may manage what with sign-in on (EMUPLAN_AUTH=accounts): a viewer reads, an editor renames, retags,
annotates and links runs, plans, comparisons and share links, only an admin deletes runs, plans and comparisons
(revoking one share link stays the editor's, who shares). Each refusal is 403 and changes nothing."""

import httpx2
import pytest

from emuplan.roles import Role
from emuplan.store import accounts
from emuplan.store.db import Database
from live_server import LiveServer

pytestmark = pytest.mark.both_databases

NEEDS_ADMIN = (
    "This needs the admin role (read, plan, upload, measure, share, delete runs, plans and comparisons and manage "
    "accounts)"
)
RUN_CSV = b"iteration,size,collective,time_ms\n" + b"".join(b"%d,1024,all_reduce,%d.5\n" % (i, i + 1) for i in range(5))


def client_of(server: LiveServer, database: Database, name: str, role: Role) -> httpx2.Client:
    """A client sending an API token of a new account with this role (no password sign-in: no Argon2)."""
    with database.writing() as session:
        account, _ = accounts.create_account(session, name, role)
        _, token = accounts.create_api_token(session, account.id, "tests", None)
    return httpx2.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def test_the_role_matrix_of_managing(accounts_server: LiveServer, database: Database) -> None:
    viewer, editor, admin = (
        client_of(accounts_server, database, name, role)
        for name, role in (("vi", Role.viewer), ("ed", Role.editor), ("ad", Role.admin))
    )
    run_id = editor.post("/api/runs", files={"file": ("r.csv", RUN_CSV)}, data={"name": "r"}).json()["id"]
    plan_id = editor.post("/api/plans", json={"model": "fashion-mnist-mlp", "gpus": 4}).json()["id"]
    comparison_id = editor.post("/api/comparisons", json={"name": "c", "run_ids": [run_id]}).json()["id"]
    share_id = editor.post(f"/api/comparisons/{comparison_id}/shares", json={}).json()["id"]
    edits = [
        (f"/api/runs/{run_id}", {"name": "renamed", "tags": ["t"], "note": "n", "facts": {"nic": "CX7"}}),
        (f"/api/runs/{run_id}", {"plan_id": plan_id}),
        (f"/api/plans/{plan_id}", {"name": "p", "tags": ["t"], "note": "n"}),
        (f"/api/comparisons/{comparison_id}", {"name": "c2", "tags": ["t"], "note": "n"}),
        (f"/api/comparisons/{comparison_id}/shares/{share_id}", {"label": "vendor"}),
    ]
    for path, body in edits:
        refused = viewer.patch(path, json=body)
        assert refused.status_code == 403 and refused.json()["detail"].startswith("This needs the editor role"), path
        assert editor.patch(path, json=body).status_code == 200, path
    # Each page offers only what the role may do: editors the edit form, admins the delete button too.
    for path in (f"/runs/{run_id}", f"/plans/{plan_id}", f"/comparisons/{comparison_id}"):
        offered = [
            [control in client.get(path).text for control in ('id="manage-form"', 'id="delete-open"')]
            for client in (viewer, editor, admin)
        ]
        assert offered == [[False, False], [True, False], [True, True]], path
    # Every reader sees what a delete would do; only an admin does it.
    deletions = [f"/api/runs/{run_id}", f"/api/plans/{plan_id}", f"/api/comparisons/{comparison_id}"]
    for path in deletions:
        assert viewer.get(f"{path}/deletion").status_code == 200
        for refused in (viewer.delete(path), editor.delete(path)):
            assert refused.status_code == 403, path
            assert refused.json()["detail"].startswith(NEEDS_ADMIN)
        assert editor.get(path).status_code == 200  # still there
    assert viewer.delete(f"/api/comparisons/{comparison_id}/shares/{share_id}").status_code == 403
    assert editor.delete(f"/api/comparisons/{comparison_id}/shares/{share_id}").json()["state"] == "revoked"
    assert admin.delete(f"/api/plans/{plan_id}").json()["unlinked_run_ids"] == [run_id]
    assert admin.delete(f"/api/comparisons/{comparison_id}").status_code == 200
    assert admin.delete(f"/api/runs/{run_id}").status_code == 204
    assert [editor.get(path).status_code for path in deletions] == [404, 404, 404]
