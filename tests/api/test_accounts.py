"""Sign-in and roles (EMUPLAN_AUTH=accounts) through a real uvicorn server: who gets in, who may do what,
and that every refusal changes nothing and logs no secret."""

import dataclasses
import logging
import time
from collections.abc import Iterator
from datetime import timedelta

import httpx2
import pytest
from sqlmodel import func, select
from typer.testing import CliRunner

from emuplan.cli import app as cli_app
from emuplan.roles import Role
from emuplan.settings import Settings
from emuplan.store import accounts as store
from emuplan.store.db import Database
from emuplan.store.tables import AccountSession, Run, SignInFailure
from live_server import LiveServer, start_server, stop_server
from sql_capture import sent_queries

pytestmark = pytest.mark.both_databases

SIGN_IN_FIRST = (
    "Sign in first: this server lets only its accounts in. Open /sign-in in a browser; scripts and the CLI "
    "send an API token as 'Authorization: Bearer TOKEN'."
)
BAD_TOKEN = "The API token is unknown, expired or revoked: make a new one on /account or with `emuplan users token`."
# Five iterations of one size: a distribution (a size sweep has no CDF to share).
RUN_CSV = b"iteration,size,collective,time_ms\n" + b"".join(b"%d,1024,all_reduce,%d.5\n" % (i, i + 1) for i in range(5))


CLIENT_LOGGERS = ("httpcore", "httpcore2", "httpx", "httpx2")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        # The test's own HTTP client logs what it receives (Set-Cookie among it): not the server's log.
        if record.name.split(".")[0] not in CLIENT_LOGGERS:
            self.lines.append(record.getMessage())


@pytest.fixture
def server_log() -> Iterator[list[str]]:
    """Every line the server logs while the test runs: the app's own loggers and uvicorn's (access too)."""
    handler = _Collect()
    loggers = [logging.getLogger(name) for name in ("", "uvicorn", "uvicorn.access", "uvicorn.error", "emuplan")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    yield handler.lines
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


# Each sign-in verifies an Argon2 hash (~50 ms alone, seconds on a loaded shared machine).
SIGN_IN_TIMEOUT_S = 60


def post_sign_in(server: LiveServer, form: dict[str, str], **options) -> httpx2.Response:
    return httpx2.post(f"{server.url}/sign-in", data=form, timeout=SIGN_IN_TIMEOUT_S, **options)


def signed_in_client(server: LiveServer, name: str, password: str) -> httpx2.Client:
    client = httpx2.Client(base_url=server.url, follow_redirects=False, timeout=SIGN_IN_TIMEOUT_S)
    response = client.post("/sign-in", data={"name": name, "password": password, "next": "/runs"})
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/runs"
    return client


def from_address(address: str) -> httpx2.HTTPTransport:
    """A client whose connections come from ``address`` (any of 127.0.0.0/8 reaches the loopback server)."""
    return httpx2.HTTPTransport(local_address=address)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def count(database: Database, table) -> int:
    with database.read_session() as session:
        return session.exec(select(func.count()).select_from(table)).one()


def upload(client: httpx2.Client, name: str, **kwargs) -> httpx2.Response:
    csv = RUN_CSV.replace(b"2.5", f"{len(name)}.25".encode())
    return client.post("/api/runs", files={"file": (f"{name}.csv", csv)}, data={"name": name}, **kwargs)


def test_signed_out_api_requests_get_401_and_pages_send_the_browser_to_sign_in(
    accounts_server: LiveServer, database: Database
) -> None:
    with httpx2.Client(base_url=accounts_server.url, follow_redirects=False) as anonymous:
        for method, path in (
            ("GET", "/api/runs"),
            ("GET", "/api/plans"),
            ("DELETE", "/api/runs/1"),
            ("GET", "/openapi.json"),  # the API's description is read like the API
        ):
            response = anonymous.request(method, path)
            assert response.status_code == 401, path
            assert response.json() == {"detail": SIGN_IN_FIRST}
            assert response.headers["www-authenticate"] == "Bearer"
        refused = upload(anonymous, "anonymous")
        assert (refused.status_code, refused.json()) == (401, {"detail": SIGN_IN_FIRST})
        page = anonymous.get("/runs?tag=a b")
        assert page.status_code == 303
        assert page.headers["location"] == "/sign-in?next=%2Fruns%3Ftag%3Da%2520b"
        assert anonymous.get("/sign-in").status_code == 200
        assert anonymous.get("/api/health").json() == {"status": "ok"}
    assert count(database, Run) == 0


def test_sign_in_sets_an_httponly_lax_session_cookie_and_sign_out_ends_it_on_the_server(
    accounts_server: LiveServer, add_account, database: Database
) -> None:
    password = add_account("ada", Role.editor)
    client = signed_in_client(accounts_server, "ada", password)
    assert client.get("/api/account").json() == {"name": "ada", "role": "editor", "signed_in_with": "session"}
    assert client.get("/openapi.json").json()["info"]["title"] == "emuplan"
    assert upload(client, "by-ada").status_code == 201
    assert count(database, AccountSession) == 1
    cookie = client.cookies["emuplan_session"]
    signed_out = client.post("/sign-out")
    assert (signed_out.status_code, signed_out.headers["location"]) == (303, "/sign-in")
    assert count(database, AccountSession) == 0
    # The old cookie, replayed, opens nothing: the session row is gone.
    replay = httpx2.get(f"{accounts_server.url}/api/runs", cookies={"emuplan_session": cookie})
    assert (replay.status_code, replay.json()) == (401, {"detail": SIGN_IN_FIRST})


@pytest.fixture
def behind_proxy(database_url: str) -> Iterator[LiveServer]:
    """Sign-in on, behind a reverse proxy on this machine (EMUPLAN_TRUSTED_PROXIES=127.0.0.1)."""
    live = start_server(Settings(database_url=database_url, demo=False, auth="accounts", trusted_proxies="127.0.0.1"))
    yield live
    stop_server(live)


def test_the_session_cookie_is_httponly_samesite_lax_and_secure_only_over_https(
    accounts_server: LiveServer, behind_proxy: LiveServer, add_account
) -> None:
    password = add_account("ada", Role.viewer)
    response = post_sign_in(accounts_server, {"name": "ada", "password": password})
    attributes = [part.strip() for part in response.headers["set-cookie"].split(";")]
    assert attributes[0].startswith("emuplan_session=") and len(attributes[0]) == len("emuplan_session=") + 43
    assert sorted(attributes[1:]) == ["HttpOnly", "Max-Age=1209600", "Path=/", "SameSite=lax"]
    https = {"X-Forwarded-Proto": "https"}
    # Behind a configured TLS proxy the scheme is https: the cookie is then Secure too.
    secure = post_sign_in(behind_proxy, {"name": "ada", "password": password}, headers=https)
    assert "Secure" in [part.strip() for part in secure.headers["set-cookie"].split(";")]
    # From a client that is no configured proxy the header is a claim like any other: not believed.
    claimed = post_sign_in(accounts_server, {"name": "ada", "password": password}, headers=https)
    assert "Secure" not in [part.strip() for part in claimed.headers["set-cookie"].split(";")]


def failure_addresses(database: Database) -> list[str]:
    with database.read_session() as session:
        return list(session.exec(select(SignInFailure.address).order_by(SignInFailure.id)).all())


def test_x_forwarded_for_counts_only_from_a_configured_proxy(
    accounts_server: LiveServer, behind_proxy: LiveServer, database: Database
) -> None:
    forwarded = {"X-Forwarded-For": "203.0.113.9, 198.51.100.7"}
    guess = {"name": "ada", "password": "guess"}
    assert post_sign_in(accounts_server, guess, headers=forwarded).status_code == 401
    # Through the proxy: the address the proxy saw connect (the last one it appended), not what the client wrote.
    assert post_sign_in(behind_proxy, guess, headers=forwarded).status_code == 401
    assert failure_addresses(database) == ["127.0.0.1", "198.51.100.7"]
    # A proxy that is not configured is a client like any other, whatever it forwards.
    with httpx2.Client(transport=from_address("127.0.0.2"), timeout=SIGN_IN_TIMEOUT_S) as other:
        assert other.post(f"{behind_proxy.url}/sign-in", data=guess, headers=forwarded).status_code == 401
    assert failure_addresses(database) == ["127.0.0.1", "198.51.100.7", "127.0.0.2"]


def test_an_ipv6_host_is_counted_by_its_64_so_new_addresses_in_it_buy_no_guesses(
    behind_proxy: LiveServer, database: Database
) -> None:
    # A host owns its whole /64: a new address for every guess was a fresh start each time (16 of 16 got 401).
    statuses = [
        post_sign_in(
            behind_proxy, {"name": f"name-{i}", "password": "guess"}, headers={"X-Forwarded-For": f"2001:db8:7:7::{i}"}
        ).status_code
        for i in range(1, store.FREE_FAILURES_PER_ADDRESS + 3)
    ]
    assert statuses == [401] * (store.FREE_FAILURES_PER_ADDRESS + 1) + [429]
    assert set(failure_addresses(database)) == {"2001:db8:7:7::/64"}
    # Another /64 starts afresh; an IPv4 address reaching a dual-stack listener as ::ffff:a.b.c.d is itself.
    elsewhere = {"X-Forwarded-For": "2001:db8:7:8::1"}
    assert post_sign_in(behind_proxy, {"name": "x", "password": "guess"}, headers=elsewhere).status_code == 401
    assert [store.counted_address(peer) for peer in ("::ffff:198.51.100.7", "198.51.100.7", "::1", "testclient")] == [
        "198.51.100.7",
        "198.51.100.7",
        "::/64",
        "testclient",
    ]


def test_a_wrong_password_or_name_is_refused_alike_and_counted(
    accounts_server: LiveServer, add_account, database: Database
) -> None:
    add_account("ada", Role.admin)
    for name, password in (("ada", "not-her-password"), ("nobody", "whatever")):
        response = post_sign_in(accounts_server, {"name": name, "password": password})
        assert response.status_code == 401
        assert "Wrong name or password." in response.text
        assert "set-cookie" not in response.headers
    assert count(database, AccountSession) == 0
    assert count(database, SignInFailure) == 2


def record_failures(database: Database, name: str, address: str, times: int) -> None:
    """Failed sign-ins as the server records them, without waiting out the delays they cause."""
    for _ in range(times):
        with database.writing() as session:
            store.record_failure(session, name, address)


def test_an_address_that_failed_at_an_account_waits_while_the_owner_elsewhere_signs_in_at_once(
    accounts_server: LiveServer, add_account, database: Database
) -> None:
    password = add_account("ada", Role.editor)
    # Ten failures at the account put it under attack: an address that failed there has no free tries, so
    # after its tenth failure it waits 1, 2, 4 … 512 s.
    record_failures(database, "ada", "127.0.0.1", store.ACCOUNT_UNDER_ATTACK)
    held_off = post_sign_in(accounts_server, {"name": "ada", "password": password})
    assert held_off.status_code == 429
    assert "set-cookie" not in held_off.headers
    wait = int(held_off.headers["retry-after"])
    assert 500 <= wait <= 512
    assert (
        "Too many failed sign-ins at this account from your address: 10 in 15 minutes. "
        f"Try again in {wait} s." in held_off.text
    )
    # The owner, from an address that has not failed, is not locked out by them: no lock anyone can trigger.
    with httpx2.Client(transport=from_address("127.0.0.2"), timeout=SIGN_IN_TIMEOUT_S) as owner:
        response = owner.post(f"{accounts_server.url}/sign-in", data={"name": "ada", "password": password})
    assert response.status_code == 303
    assert count(database, AccountSession) == 1
    # The guesses at the account still count after the owner signed in.
    assert post_sign_in(accounts_server, {"name": "ada", "password": password}).status_code == 429


def test_a_held_off_address_costs_no_password_check_and_writes_nothing(
    accounts_server: LiveServer, add_account, database: Database
) -> None:
    add_account("ada", Role.editor)
    record_failures(database, "someone", "127.0.0.1", store.FREE_FAILURES_PER_ADDRESS + 5)
    held_off = post_sign_in(accounts_server, {"name": "ada", "password": "guess"})
    assert held_off.status_code == 429
    assert "Too many failed sign-ins from your address: 15 in 15 minutes." in held_off.text
    assert count(database, SignInFailure) == store.FREE_FAILURES_PER_ADDRESS + 5


def test_a_viewer_reads_but_uploading_planning_or_deleting_is_403_naming_the_role(
    accounts_server: LiveServer, add_account, database: Database
) -> None:
    editor = signed_in_client(accounts_server, "ed", add_account("ed", Role.editor))
    viewer = signed_in_client(accounts_server, "vi", add_account("vi", Role.viewer))
    run_id = upload(editor, "kept").json()["id"]
    assert [run["name"] for run in viewer.get("/api/runs").json()] == ["kept"]
    assert viewer.get(f"/api/runs/{run_id}/stats").status_code == 200
    needs_editor = (
        "This needs the editor role (read, plan, upload, measure and share); the account 'vi' has the viewer role. "
        "An admin can change it with `emuplan users role NAME ROLE`."
    )
    for response in (
        upload(viewer, "refused"),
        viewer.post("/api/plans", json={"model": "fashion-mnist-mlp"}),
        viewer.post("/api/comparisons", json={"name": "c", "run_ids": [run_id]}),
    ):
        assert (response.status_code, response.json()) == (403, {"detail": needs_editor})
    deleted = viewer.delete(f"/api/runs/{run_id}")
    assert deleted.status_code == 403
    assert deleted.json()["detail"].startswith("This needs the admin role (")
    assert count(database, Run) == 1


def test_deleting_a_run_needs_the_admin_role(accounts_server: LiveServer, add_account, database: Database) -> None:
    editor = signed_in_client(accounts_server, "ed", add_account("ed", Role.editor))
    admin = signed_in_client(accounts_server, "ad", add_account("ad", Role.admin))
    run_id = upload(editor, "to-delete").json()["id"]
    refused = editor.delete(f"/api/runs/{run_id}")
    assert refused.status_code == 403
    assert refused.json()["detail"].endswith(
        "the account 'ed' has the editor role. An admin can change it with `emuplan users role NAME ROLE`."
    )
    assert admin.delete(f"/api/runs/{run_id}").status_code == 204
    assert count(database, Run) == 0


def test_api_tokens_work_as_bearer_until_revoked_or_expired(
    accounts_server: LiveServer, add_account, database: Database
) -> None:
    editor = signed_in_client(accounts_server, "ed", add_account("ed", Role.editor))
    made = editor.post("/api/account/tokens", json={"label": "laptop CLI"})
    assert made.status_code == 201
    assert made.headers["cache-control"] == "no-store"
    token = made.json()["token"]
    assert token.startswith("emu_") and len(token) == 4 + 43
    as_script = httpx2.Client(base_url=accounts_server.url, headers=bearer(token))
    assert as_script.get("/api/account").json() == {"name": "ed", "role": "editor", "signed_in_with": "token"}
    assert upload(as_script, "scripted").status_code == 201
    listed = editor.get("/api/account/tokens").json()
    assert [(t["label"], t["state"]) for t in listed] == [("laptop CLI", "active")]
    revoked = editor.delete(f"/api/account/tokens/{made.json()['id']}")
    assert (revoked.status_code, revoked.json()["state"]) == (200, "revoked")
    for response in (as_script.get("/api/runs"), upload(as_script, "after-revoke")):
        assert (response.status_code, response.json()) == (401, {"detail": BAD_TOKEN})
    # A token that expires one second after it is made.
    short = editor.post("/api/account/tokens", json={"label": "short", "expires_in_days": 1 / 86400}).json()["token"]
    assert httpx2.get(f"{accounts_server.url}/api/runs", headers=bearer(short)).status_code == 200
    time.sleep(1.1)
    expired = httpx2.get(f"{accounts_server.url}/api/runs", headers=bearer(short))
    assert (expired.status_code, expired.json()) == (401, {"detail": BAD_TOKEN})
    assert [run["name"] for run in editor.get("/api/runs").json()] == ["scripted"]
    # Someone else's token id is not found for you.
    other = signed_in_client(accounts_server, "vi", add_account("vi", Role.viewer))
    assert other.delete(f"/api/account/tokens/{made.json()['id']}").status_code == 404


def test_a_tampered_cookie_or_token_opens_nothing(accounts_server: LiveServer, add_account, database: Database) -> None:
    editor = signed_in_client(accounts_server, "ed", add_account("ed", Role.editor))
    cookie = editor.cookies["emuplan_session"]
    tampered = cookie[:-1] + ("A" if cookie[-1] != "A" else "B")
    forged = httpx2.Client(base_url=accounts_server.url, cookies={"emuplan_session": tampered}, follow_redirects=False)
    response = upload(forged, "forged")
    assert (response.status_code, response.json()) == (401, {"detail": SIGN_IN_FIRST})
    assert forged.get("/runs").status_code == 303
    assert (
        upload(httpx2.Client(base_url=accounts_server.url), "x", headers=bearer("emu_" + "A" * 43)).status_code == 401
    )
    assert count(database, Run) == 0


def test_a_removed_accounts_sessions_and_tokens_stop_at_once(
    accounts_server: LiveServer, add_account, database: Database, cli_env
) -> None:
    editor = signed_in_client(accounts_server, "ed", add_account("ed", Role.editor))
    token = editor.post("/api/account/tokens", json={"label": "cli"}).json()["token"]
    result = CliRunner().invoke(cli_app, ["users", "remove", "ed"])
    assert (result.exit_code, result.output) == (0, "account 'ed' removed, with its sessions and API tokens\n")
    assert (upload(editor, "after-removal").status_code, editor.get("/api/runs").status_code) == (401, 401)
    assert httpx2.get(f"{accounts_server.url}/api/runs", headers=bearer(token)).status_code == 401
    assert count(database, Run) == 0
    assert count(database, AccountSession) == 0


def test_a_share_link_opens_its_one_comparison_without_signing_in(accounts_server: LiveServer, add_account) -> None:
    editor = signed_in_client(accounts_server, "ed", add_account("ed", Role.editor))
    shared_id = upload(editor, "shared").json()["id"]
    other_id = upload(editor, "not-shared").json()["id"]
    comparison = editor.post("/api/comparisons", json={"name": "c", "run_ids": [shared_id]}).json()
    token = editor.post(f"/api/comparisons/{comparison['id']}/shares", json={}).json()["token"]
    with httpx2.Client(base_url=accounts_server.url, follow_redirects=False) as anonymous:
        assert anonymous.get(f"/s/{token}").status_code == 200
        document = anonymous.get(f"/api/shared/{token}").json()
        assert [run["run_id"] for run in document["runs"]] == [shared_id]
        assert anonymous.get(f"/api/shared/{token}/runs/{shared_id}/figures/cdf").status_code == 200
        assert anonymous.get(f"/api/shared/{token}/runs/{other_id}/figures/cdf").status_code == 404
        assert anonymous.get(f"/api/runs/{other_id}").status_code == 401


def test_the_account_page_makes_a_token_shown_once_and_revokes_it(accounts_server: LiveServer, add_account) -> None:
    viewer = signed_in_client(accounts_server, "vi", add_account("vi", Role.viewer))
    page = viewer.get("/account")
    assert page.status_code == 200
    assert "Role: <strong>viewer</strong> — may read runs, plans and comparisons" in page.text
    made = viewer.post("/account/tokens", data={"label": "notebook", "expires_in_days": "30"})
    assert made.status_code == 200
    assert made.headers["cache-control"] == "no-store"
    token = made.text.split('<code id="new-token-value">')[1].split("</code>")[0]
    assert httpx2.get(f"{accounts_server.url}/api/account", headers=bearer(token)).json()["role"] == "viewer"
    again = viewer.get("/account")
    assert token not in again.text
    assert "<td>notebook</td>" in again.text
    revoked = viewer.post(f"/account/tokens/{viewer.get('/api/account/tokens').json()[0]['id']}/revoke")
    assert (revoked.status_code, revoked.headers["location"]) == (303, "/account")
    assert viewer.get("/api/account/tokens").json()[0]["state"] == "revoked"
    assert httpx2.get(f"{accounts_server.url}/api/account", headers=bearer(token)).status_code == 401


def test_changing_the_password_needs_the_current_one_and_signs_the_account_out_elsewhere(
    accounts_server: LiveServer, add_account
) -> None:
    password = add_account("vi", Role.viewer)
    viewer = signed_in_client(accounts_server, "vi", password)
    elsewhere = signed_in_client(accounts_server, "vi", password)
    token = viewer.post("/api/account/tokens", json={"label": "cli"}).json()["token"]
    wrong = viewer.post("/account/password", data={"current_password": "nope", "new_password": "a-new-long-password"})
    assert wrong.status_code == 422
    assert "current password: that is not your password" in wrong.text
    changed = viewer.post(
        "/account/password", data={"current_password": password, "new_password": "a-new-long-password"}
    )
    assert (
        "Password changed: use the new one from now on. 1 session elsewhere ended and 1 API token revoked."
        in changed.text
    )
    # This browser stays signed in; the other one and the token are out.
    assert viewer.get("/api/account").status_code == 200
    assert elsewhere.get("/api/account").status_code == 401
    assert httpx2.get(f"{accounts_server.url}/api/account", headers=bearer(token)).status_code == 401
    signed_in_client(accounts_server, "vi", "a-new-long-password").close()
    old = post_sign_in(accounts_server, {"name": "vi", "password": password})
    assert old.status_code == 401


def test_guessing_the_current_password_is_held_off_like_a_sign_in(
    accounts_server: LiveServer, add_account, database: Database
) -> None:
    password = add_account("vi", Role.viewer)
    viewer = signed_in_client(accounts_server, "vi", password)
    # A stolen session guessing the password: each wrong one is a failed sign-in at the account.
    for _ in range(store.FREE_FAILURES_PER_ACCOUNT_FROM_AN_ADDRESS):
        guess = viewer.post("/account/password", data={"current_password": "guess", "new_password": "x" * 12})
        assert guess.status_code == 422
    record_failures(database, "vi", "127.0.0.1", 5)
    held_off = viewer.post("/account/password", data={"current_password": password, "new_password": "x" * 12})
    assert held_off.status_code == 429
    assert 1 <= int(held_off.headers["retry-after"]) <= 16
    assert "Too many failed sign-ins at this account from your address: 8 in 15 minutes." in held_off.text
    with database.read_session() as session:
        assert store.check_password(store.password_hash_of(session, "vi"), password)


def test_refusals_log_no_password_token_or_cookie(
    accounts_server: LiveServer, add_account, server_log: list[str]
) -> None:
    password = add_account("ed", Role.editor)
    viewer_password = add_account("vi", Role.viewer)
    editor = signed_in_client(accounts_server, "ed", password)
    token = editor.post("/api/account/tokens", json={"label": "cli"}).json()["token"]
    cookie = editor.cookies["emuplan_session"]
    editor.delete(f"/api/account/tokens/{editor.get('/api/account/tokens').json()[0]['id']}")
    wrong_password = "Tr0ub4dor&3-wrong"
    post_sign_in(accounts_server, {"name": "ed", "password": wrong_password})
    httpx2.get(f"{accounts_server.url}/api/runs", headers=bearer(token))
    httpx2.get(f"{accounts_server.url}/api/runs", cookies={"emuplan_session": cookie[:-1] + "x"})
    viewer = signed_in_client(accounts_server, "vi", viewer_password)
    upload(viewer, "refused")
    secrets = (password, viewer_password, wrong_password, token, cookie, viewer.cookies["emuplan_session"])
    assert any("sign-in refused for account 'ed' from 127.0.0.1: SignInRefused" in line for line in server_log)
    assert any('"POST /api/runs HTTP/1.1" 403' in line for line in server_log)
    leaked = [line for line in server_log for secret in secrets if secret in line]
    assert leaked == []


def test_with_sign_in_off_the_account_pages_say_so(client) -> None:
    for path in ("/sign-in", "/account", "/api/account"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.json() == {
            "detail": "Sign-in is off on this server (EMUPLAN_AUTH=none): everyone who reaches it may do everything."
        }


def test_after_sign_in_the_browser_goes_back_to_a_path_of_this_server_only(
    accounts_server: LiveServer, add_account
) -> None:
    password = add_account("ada", Role.viewer)
    targets = {
        "/runs?tag=a": "/runs?tag=a",
        "https://evil.example/": "/",
        "//evil.example/": "/",
        "/\\evil.example/": "/",
        "/\t/evil.example/": "/",
        "/\n/evil.example/": "/",
        "runs": "/",
    }
    for target, landing in targets.items():
        response = post_sign_in(accounts_server, {"name": "ada", "password": password, "next": target})
        assert (response.status_code, response.headers["location"]) == (303, landing), target


def test_an_expired_session_opens_nothing(database: Database, add_account) -> None:
    add_account("ada", Role.viewer)
    with database.writing() as session:
        secret = store.start_session(session, store.get_account(session, "ada"), timedelta(seconds=1))
    with database.read_session() as session:
        assert store.resolve_session(session, secret).name == "ada"
    time.sleep(1.1)
    with database.read_session() as session:
        assert store.resolve_session(session, secret) is None


def test_telling_who_sent_a_request_reads_only_the_accounts_name_role_and_the_credentials_life(
    database: Database, add_account
) -> None:
    add_account("ada", Role.editor)
    with database.writing() as session:
        account = store.get_account(session, "ada")
        cookie = store.start_session(session, account, timedelta(hours=1))
        _, token = store.create_api_token(session, account.id, "ci", None)
    expected = {"via": "", "account_id": account.id, "name": "ada", "role": Role.editor}
    (by_cookie,) = sent_queries(database, lambda session: store.resolve_session(session, cookie))
    (by_token,) = sent_queries(database, lambda session: store.resolve_api_token(session, token))
    with database.read_session() as session:
        assert dataclasses.asdict(store.resolve_session(session, cookie)) == {**expected, "via": "session"}
        assert dataclasses.asdict(store.resolve_api_token(session, token)) == {**expected, "via": "token"}
    # Every signed-in request sends one of these: columns, not the rows as objects (~0.4 ms a request).
    selected = [statement.split("FROM")[0].replace('"', "") for statement, _ in (by_cookie, by_token)]
    assert selected == [
        "SELECT account.id, account.name, account.role, account_session.expires_at \n",
        "SELECT account.id, account.name, account.role, api_token.revoked_at, api_token.expires_at \n",
    ]


def test_two_servers_on_one_database_count_the_same_failures(
    accounts_server: LiveServer, add_account, database_url: str, database: Database
) -> None:
    password = add_account("ada", Role.editor)
    second = start_server(Settings(database_url=database_url, demo=False, auth="accounts"))
    try:
        for attempt in range(store.FREE_FAILURES_PER_ACCOUNT_FROM_AN_ADDRESS):
            server = (accounts_server, second)[attempt % 2]
            assert post_sign_in(server, {"name": "ada", "password": "guess"}).status_code == 401
        assert count(database, SignInFailure) == store.FREE_FAILURES_PER_ACCOUNT_FROM_AN_ADDRESS
        # Past the free ones, each failure holds the address off: seen by both servers.
        record_failures(database, "ada", "127.0.0.1", 5)
        for server in (accounts_server, second):
            held_off = post_sign_in(server, {"name": "ada", "password": password})
            assert held_off.status_code == 429
    finally:
        stop_server(second)


def test_the_runs_page_offers_uploading_only_to_roles_that_may_upload(accounts_server: LiveServer, add_account) -> None:
    viewer = signed_in_client(accounts_server, "vi", add_account("vi", Role.viewer))
    editor = signed_in_client(accounts_server, "ed", add_account("ed", Role.editor))
    for_viewer, for_editor = viewer.get("/runs").text, editor.get("/runs").text
    note = "Uploading result files needs the editor role; your account has the viewer role."
    assert (note in for_viewer, 'id="upload-form"' in for_viewer, "upload.js" in for_viewer) == (True, False, False)
    assert (note in for_editor, 'id="upload-form"' in for_editor, "upload.js" in for_editor) == (False, True, True)


def test_compare_pages_offer_saving_and_sharing_only_to_roles_that_may_save(
    accounts_server: LiveServer, add_account
) -> None:
    viewer = signed_in_client(accounts_server, "vi", add_account("vi", Role.viewer))
    editor = signed_in_client(accounts_server, "ed", add_account("ed", Role.editor))
    run_id = upload(editor, "one").json()["id"]
    saved_id = editor.post("/api/comparisons", json={"name": "c", "run_ids": [run_id]}).json()["id"]
    note = "Saving and sharing comparisons needs the editor role; your account has the viewer role."
    for path in (f"/compare?runs={run_id}", f"/comparisons/{saved_id}"):
        for_viewer, for_editor = viewer.get(path).text, editor.get(path).text
        offered = ('id="save-and-share"', 'id="share-create"', "share.js")
        assert (note in for_viewer, *(mark in for_viewer for mark in offered)) == (True, False, False, False), path
        assert (note in for_editor, "share.js" in for_editor) == (False, True), path
    assert 'id="save-and-share"' in editor.get(f"/compare?runs={run_id}").text
    assert 'id="share-create"' in editor.get(f"/comparisons/{saved_id}").text
