"""Who may do what, through a real server with sign-in on: the role matrix (signed out, viewer, editor,
admin), accounts managed by an admin over the API, the /admin page and `emuplan users`, and pages that
offer each role only what it may do."""

import re
from urllib.parse import quote

import httpx2
import pytest
from typer.testing import CliRunner

from emuplan.cli import app as cli_app
from emuplan.roles import Role
from emuplan.store import accounts as store
from emuplan.store.db import Database
from live_server import LiveServer

pytestmark = pytest.mark.both_databases

ROLES = ("signed out", "viewer", "editor", "admin")
RUN_CSV = b"iteration,size,collective,time_ms\n" + b"".join(b"%d,1024,all_reduce,%d.5\n" % (i, i + 1) for i in range(5))
PRESET = {"model": "fashion-mnist-mlp", "strategy": "data"}
SIGN_IN_TIMEOUT_S = 60


def client_for(server: LiveServer, name: str | None, password: str | None) -> httpx2.Client:
    client = httpx2.Client(base_url=server.url, follow_redirects=False, timeout=SIGN_IN_TIMEOUT_S)
    if name is not None:
        response = client.post("/sign-in", data={"name": name, "password": password})
        assert response.status_code == 303, response.text
    return client


@pytest.fixture
def clients(accounts_server: LiveServer, add_account) -> dict[str, httpx2.Client]:
    """A client per role, signed in with a session (as a browser is); "signed out" has no credentials."""
    made = {"signed out": client_for(accounts_server, None, None)}
    for role in ("viewer", "editor", "admin"):
        made[role] = client_for(accounts_server, role, add_account(role, Role(role)))
    yield made
    for client in made.values():
        client.close()


def test_the_role_matrix_through_the_api_and_the_pages(clients: dict[str, httpx2.Client]) -> None:
    editor = clients["editor"]
    plan_id = editor.post("/api/plans", json=PRESET).json()["id"]
    run_ids = {
        role: editor.post(
            "/api/runs", files={"file": (f"{role}.csv", RUN_CSV.replace(b"1.5", f"{i}.25".encode()))}
        ).json()["id"]
        for i, role in enumerate(ROLES)
    }
    # (method, path, JSON body) → the status each role gets, signed out / viewer / editor / admin.
    matrix = [
        ("GET", "/api/runs", None, (401, 200, 200, 200)),
        ("GET", f"/api/plans/{plan_id}", None, (401, 200, 200, 200)),
        # A preview computes and stores nothing: a read, whatever its method.
        ("POST", "/api/plans/preview", PRESET, (401, 200, 200, 200)),
        ("POST", "/api/plans", PRESET, (401, 403, 201, 201)),
        # The editor's and admin's bodies are read (and refused: 0 processes), so their role passed.
        ("POST", f"/api/plans/{plan_id}/measure", {"world_size": 0}, (401, 403, 422, 422)),
        ("DELETE", "/api/runs/{run}", None, (401, 403, 403, 204)),
        ("GET", "/api/admin/accounts", None, (401, 403, 403, 200)),
        ("POST", "/api/admin/accounts", {"name": "new"}, (401, 403, 403, 201)),
        ("GET", "/plan", None, (303, 200, 200, 200)),
        ("GET", f"/plans/{plan_id}", None, (303, 200, 200, 200)),
        ("GET", "/admin", None, (303, 403, 403, 200)),
        ("GET", "/account", None, (303, 200, 200, 200)),
    ]
    answered = {}
    for method, path, body, _ in matrix:
        for role in ROLES:
            where = path.replace("{run}", str(run_ids[role]))
            # Each role adds an account of its own name, so that a 201 is not a 409 for the next.
            json = {**body, "name": f"new-{role.replace(' ', '-')}"} if body and "name" in body else body
            answered[(method, path, role)] = clients[role].request(method, where, json=json).status_code
    assert answered == {
        (method, path, role): status
        for method, path, _, statuses in matrix
        for role, status in zip(ROLES, statuses, strict=True)
    }


def test_an_admin_manages_accounts_over_the_api(
    accounts_server: LiveServer, clients: dict[str, httpx2.Client], database: Database
) -> None:
    admin = clients["admin"]
    added = admin.post("/api/admin/accounts", json={"name": "newcomer", "role": "editor"})
    assert added.status_code == 201
    assert added.headers["cache-control"] == "no-store"
    document = added.json()
    password = document.pop("password")
    assert len(password) == 16
    assert {key: document[key] for key in ("name", "role", "sessions", "active_tokens")} == {
        "name": "newcomer",
        "role": "editor",
        "sessions": 0,
        "active_tokens": 0,
    }
    newcomer = client_for(accounts_server, "newcomer", password)
    assert newcomer.get("/api/account").json()["role"] == "editor"
    newcomer.close()
    assert admin.post("/api/admin/accounts", json={"name": "newcomer"}).json() == {
        "detail": "name: an account named 'newcomer' exists already"
    }
    listed = admin.get("/api/admin/accounts").json()
    assert [(a["name"], a["role"], a["sessions"]) for a in listed] == [
        ("admin", "admin", 1),
        ("editor", "editor", 1),
        ("newcomer", "editor", 1),
        ("viewer", "viewer", 1),
    ]
    changed = admin.patch("/api/admin/accounts/newcomer", json={"role": "viewer"})
    assert (changed.status_code, changed.json()["role"]) == (200, "viewer")
    # A reset ends the account's browsers and revokes its tokens: the viewer's session stops working.
    assert clients["viewer"].get("/api/runs").status_code == 200
    reset = admin.post("/api/admin/accounts/viewer/password")
    assert reset.status_code == 200
    assert {key: value for key, value in reset.json().items() if key != "password"} == {
        "name": "viewer",
        "sessions_ended": 1,
        "tokens_revoked": 0,
    }
    assert clients["viewer"].get("/api/runs").status_code == 401
    with database.read_session() as session:
        assert store.check_password(store.password_hash_of(session, "viewer"), reset.json()["password"])
    assert admin.delete("/api/admin/accounts/newcomer").status_code == 204
    assert admin.delete("/api/admin/accounts/newcomer").json() == {"detail": "no account named 'newcomer'"}
    # The last admin, even demoting or removing itself: 409, and nothing changes.
    last_admin = (
        "'admin' is the last admin: {} would leave nobody to manage accounts. Make another account admin first."
    )
    demoted = admin.patch("/api/admin/accounts/admin", json={"role": "editor"})
    assert (demoted.status_code, demoted.json()) == (409, {"detail": last_admin.format("making it editor")})
    removed = admin.delete("/api/admin/accounts/admin")
    assert (removed.status_code, removed.json()) == (409, {"detail": last_admin.format("removing it")})
    assert admin.get("/api/account").json()["role"] == "admin"


def test_account_names_keep_to_a_safe_alphabet(clients: dict[str, httpx2.Client]) -> None:
    """The audit's names were accepted: ``ad/m`` could not be reached in the API, ``..`` and ``%2e%2e`` reached the
    same URL, ``<script>`` went into pages. Each is refused with 422 naming the field, through a real server."""
    admin = clients["admin"]
    rule = "must be 1 to 64 letters, digits or . _ @ + - (not starting with . or -)"
    for name in ("ad/m", "..", ".hidden", "%2e%2e", "<script>", "-rf", "two words", "a\tb", "x" * 65, ""):
        refused = admin.post("/api/admin/accounts", json={"name": name})
        if len(name) > 64:
            assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "name"]
            continue
        assert (refused.status_code, refused.json()) == (422, {"detail": f"name: {name!r} {rule}"}), name
    for name in ("ada.lovelace", "j_doe@lab.example", "ana-maria+ci", "José", "x" * 64):
        added = admin.post("/api/admin/accounts", json={"name": name})
        assert (added.status_code, added.json()["name"]) == (201, name)
        # Each is reachable by its own URL.
        changed = admin.patch(f"/api/admin/accounts/{quote(name, safe='')}", json={"role": "editor"})
        assert (changed.status_code, changed.json()["name"]) == (200, name)
    assert sorted(a["name"] for a in admin.get("/api/admin/accounts").json()) == sorted(
        ["admin", "editor", "viewer", "ada.lovelace", "j_doe@lab.example", "ana-maria+ci", "José", "x" * 64]
    )


def issued_password(page: str) -> str:
    return re.search(r'<code id="issued-password-value">([^<]+)</code>', page).group(1)


def test_an_admin_manages_accounts_on_the_admin_page(
    accounts_server: LiveServer, clients: dict[str, httpx2.Client], database: Database
) -> None:
    admin = clients["admin"]
    page = admin.get("/admin")
    assert page.headers["cache-control"] == "no-store"
    assert re.findall(r'<strong class="account-name">([^<]+)</strong>', page.text) == ["admin", "editor", "viewer"]
    assert '<a href="/admin" aria-current="page">Accounts</a>' in page.text
    added = admin.post("/admin/accounts", data={"name": "newcomer", "role": "viewer"})
    assert (added.status_code, added.headers["cache-control"]) == (200, "no-store")
    assert "Account &#39;newcomer&#39; added as viewer." in added.text
    password = issued_password(added.text)
    assert password not in admin.get("/admin").text  # shown once
    assert admin.post("/admin/role", data={"name": "newcomer", "role": "editor"}).status_code == 200
    reset = admin.post("/admin/password", data={"name": "newcomer"})
    assert "New password for &#39;newcomer&#39;." in reset.text
    with database.read_session() as session:
        account = store.get_account(session, "newcomer")
        assert (account.role, store.check_password(account.password_hash, issued_password(reset.text))) == (
            "editor",
            True,
        )
        assert not store.check_password(account.password_hash, password)
    removed = admin.post("/admin/remove", data={"name": "newcomer"})
    assert "Account &#39;newcomer&#39; removed, with its sessions and API tokens." in removed.text
    refused = admin.post("/admin/remove", data={"name": "admin"})
    assert refused.status_code == 409
    assert "&#39;admin&#39; is the last admin: removing it would leave nobody to manage accounts." in refused.text
    assert admin.post("/admin/role", data={"name": "nobody", "role": "admin"}).status_code == 404
    # Nobody else sees the page or its link.
    for role in ("viewer", "editor"):
        assert clients[role].post("/admin/accounts", data={"name": "x", "role": "admin"}).status_code == 403
        assert 'href="/admin"' not in clients[role].get("/runs").text
    with database.read_session() as session:
        assert [account.name for account in store.list_accounts(session)] == ["admin", "editor", "viewer"]


def test_pages_offer_a_viewer_previews_but_no_saving_editing_or_measuring(clients: dict[str, httpx2.Client]) -> None:
    viewer, editor = clients["viewer"], clients["editor"]
    plan_id = editor.post("/api/plans", json=PRESET).json()["id"]
    editing = ('id="save-plan"', 'id="model-form"', 'id="plan-name"')
    for_viewer, for_editor = viewer.get("/plan").text, editor.get("/plan").text
    note = "Previews only: saving plans and uploading models needs the editor role; your account has the viewer role."
    assert (note in for_viewer, *(mark in for_viewer for mark in editing)) == (True, False, False, False)
    assert (note in for_editor, *(mark in for_editor for mark in editing)) == (False, True, True, True)
    saved_for_viewer, saved_for_editor = viewer.get(f"/plans/{plan_id}").text, editor.get(f"/plans/{plan_id}").text
    offered = ('id="edit-as-new"', 'id="measure-form"', "measure.js", 'id="preview-other-settings"')
    assert [mark in saved_for_viewer for mark in offered] == [False, False, False, True]
    assert [mark in saved_for_editor for mark in offered] == [True, True, True, False]
    # Every role finds the planner in the navigation: a viewer's previews are answered.
    assert '<a href="/plan" >Plan</a>' in viewer.get("/runs").text


def users(*arguments: str):
    return CliRunner().invoke(cli_app, ["users", *arguments])


def test_the_cli_resets_a_password_and_keeps_the_last_admin(cli_env, database: Database, add_account) -> None:
    add_account("root", Role.admin)
    add_account("vi", Role.viewer)
    with database.writing() as session:
        vi = store.get_account(session, "vi")
        store.start_session(session, vi, store.FAILURE_WINDOW)
        store.create_api_token(session, vi.id, "ci", None)
    reset = users("password", "vi")
    match = re.fullmatch(
        r"new password for 'vi', shown once: (\S{16}); 1 session ended, 1 API token revoked\n", reset.output
    )
    assert match is not None, reset.output
    with database.read_session() as session:
        assert store.check_password(store.password_hash_of(session, "vi"), match.group(1))
    last_admin = (
        "error: 'root' is the last admin: {} would leave nobody to manage accounts. Make another account admin first.\n"
    )
    for arguments, change in ((("role", "root", "editor"), "making it editor"), (("remove", "root"), "removing it")):
        refused = users(*arguments)
        assert (refused.exit_code, refused.output) == (2, last_admin.format(change))
    assert users("role", "vi", "admin").exit_code == 0
    assert users("remove", "root").output == "account 'root' removed, with its sessions and API tokens\n"


def test_the_cli_manages_a_servers_accounts_with_an_admins_token(accounts_server: LiveServer, database: Database):
    """With --server, `emuplan users` goes through /api/admin/accounts (it worked on the local database instead,
    whatever --server said)."""
    with database.writing() as session:
        root, _ = store.create_account(session, "root", Role.admin)
        admin_token = store.create_api_token(session, root.id, "cli", None)[1]
        editor, _ = store.create_account(session, "ed", Role.editor)
        editor_token = store.create_api_token(session, editor.id, "cli", None)[1]

    def remote(token: str, *arguments: str):
        server = ["--server", accounts_server.url, "--token", token]
        return CliRunner().invoke(cli_app, [*server, "users", *arguments], env={"EMUPLAN_DATABASE_URL": "sqlite://"})

    added = remote(admin_token, "add", "vi", "--role", "editor")
    password = re.fullmatch(r"account 'vi' \(editor\) added. Its password, shown once: (\S{16})\n", added.output)[1]
    assert client_for(accounts_server, "vi", password).get("/api/account").json()["role"] == "editor"
    assert remote(admin_token, "role", "vi", "viewer").output == "account 'vi' is now viewer\n"
    reset = remote(admin_token, "password", "vi").output
    assert re.fullmatch(r"new password for 'vi', shown once: \S{16}; 1 session ended, 0 API tokens revoked\n", reset)
    listed = remote(admin_token, "list").output.splitlines()
    assert [line.split()[:3] for line in listed] == [
        ["name", "role", "tokens"],
        ["ed", "editor", "1"],
        ["root", "admin", "1"],
        ["vi", "viewer", "0"],
    ]
    refused = remote(admin_token, "remove", "root")
    assert (refused.exit_code, refused.output) == (
        2,
        "error: 'root' is the last admin: removing it would leave nobody to manage accounts. Make another account "
        f"admin first. (HTTP 409 from {accounts_server.url})\n",
    )
    not_admin = remote(editor_token, "add", "eve")
    assert not_admin.exit_code == 2 and "This needs the admin role" in not_admin.output
    token = remote(admin_token, "token", "vi")
    assert (token.exit_code, token.output) == (
        2,
        "error: a token for another account is made on the server (emuplan users token there); its owner makes one "
        "on /account\n",
    )
    assert remote(admin_token, "remove", "vi").output == "account 'vi' removed, with its sessions and API tokens\n"
    with database.read_session() as session:
        assert [account.name for account in store.listed_accounts(session)] == ["ed", "root"]
