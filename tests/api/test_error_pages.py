"""Errors answer a browser with a page in the site's look (what happened, where to go) and every other client,
``/api/...`` always, with ``{"detail": message}``: 403, 404, 409, 422 and 500 alike."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from emuplan.errors import EmuplanError
from emuplan.main import create_app
from emuplan.roles import Role
from emuplan.services.plan_deletion import PlanInUse
from emuplan.settings import Settings
from emuplan.store import accounts
from emuplan.store.db import Database

pytestmark = pytest.mark.both_databases

# What Chromium sends when it opens an address.
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"}
API = {"Accept": "application/json"}
RUN_CSV = b"iteration,size,collective,time_ms\n" + b"".join(b"%d,1024,all_reduce,%d.5\n" % (i, i + 1) for i in range(5))


def _places(page: str) -> list[str]:
    listed = page.split('<ul id="error-places">')[1].split("</ul>")[0]
    return [line.strip() for line in listed.splitlines() if line.strip()]


def _detail(page: str) -> str:
    return page.split('<p class="error" id="error-detail">')[1].split("</p>")[0]


def test_a_missing_run_plan_or_page_is_a_page_for_the_browser_and_json_for_the_rest(client: TestClient) -> None:
    run_id = client.post("/api/runs", files={"file": ("r.csv", RUN_CSV)}, data={"name": "r", "strategy": "data"})
    run_id = run_id.json()["id"]
    assert client.delete(f"/api/runs/{run_id}").status_code == 204

    page = client.get(f"/runs/{run_id}", headers=BROWSER)
    assert page.status_code == 404
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    # The site's frame (its navigation and style sheet), the status, what is missing and where to go.
    assert '<nav aria-label="main">' in page.text and "/app.css" in page.text
    assert "<title>404 · Nothing here · emuplan</title>" in page.text
    assert _detail(page.text) == f"Run {run_id} does not exist"
    assert _places(page.text) == ['<li><a href="/runs">All runs</a></li>', '<li><a href="/">Home</a></li>']
    assert page.headers["content-security-policy"].startswith("default-src 'self'")

    plan = client.get("/plans/999", headers=BROWSER)
    assert (plan.status_code, _detail(plan.text)) == (404, "No plan with id 999")
    assert _places(plan.text) == ['<li><a href="/plans">Saved plans</a></li>', '<li><a href="/">Home</a></li>']

    unknown = client.get("/no/such/page", headers=BROWSER)
    assert (unknown.status_code, _detail(unknown.text)) == (404, "No page or file at /no/such/page.")
    assert _places(unknown.text) == ['<li><a href="/">Home</a></li>']

    for path, detail in (
        (f"/runs/{run_id}", f"run {run_id} does not exist"),
        ("/plans/999", "no plan with id 999"),
        ("/no/such/page", "Not Found"),
    ):
        for headers in (API, {}):
            answer = client.get(path, headers=headers)
            assert (answer.status_code, answer.json()) == (404, {"detail": detail}), (path, headers)
    # Under /api/ a browser's Accept header still gets JSON: that is the API.
    for path, detail in ((f"/api/runs/{run_id}", f"run {run_id} does not exist"), ("/api/nothing", "Not Found")):
        answer = client.get(path, headers=BROWSER)
        assert (answer.status_code, answer.json()) == (404, {"detail": detail})


def test_an_address_the_page_cannot_read_is_a_422_page(client: TestClient) -> None:
    page = client.get("/runs/seven", headers=BROWSER)
    assert page.status_code == 422
    assert "<title>422 · Some of what was sent cannot be used · emuplan</title>" in page.text
    assert (
        _detail(page.text)
        == "run_id in the path: Input should be a valid integer, unable to parse string as an integer"
    )
    answer = client.get("/runs/seven", headers=API)
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["path", "run_id"]


@pytest.fixture
def accounts_client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(Settings(database_url=database_url, demo=False, auth="accounts"))) as client:
        yield client


def test_a_page_the_role_may_not_open_is_a_403_page(accounts_client: TestClient, database: Database) -> None:
    with database.writing() as session:
        account, _ = accounts.create_account(session, "vi", Role.viewer)
        _, token = accounts.create_api_token(session, account.id, "tests", None)
    bearer = {"Authorization": f"Bearer {token}"}
    page = accounts_client.get("/admin", headers=BROWSER | bearer)
    assert page.status_code == 403
    assert "<title>403 · Your account may not do this · emuplan</title>" in page.text
    assert _detail(page.text).startswith("This needs the admin role (")
    assert "the account &#39;vi&#39; has the viewer role." in _detail(page.text)
    assert _places(page.text) == ['<li><a href="/admin">Accounts</a></li>', '<li><a href="/">Home</a></li>']
    answer = accounts_client.get("/admin", headers=API | bearer)
    assert answer.status_code == 403
    assert answer.json()["detail"].startswith("This needs the admin role (")


def test_a_conflict_and_a_bug_are_pages_too(settings: Settings) -> None:
    # No page of ours answers 409 today (the forms show their refusals in place) and none fails on purpose:
    # two routes added to the real app raise a real domain error and a bug.
    app = create_app(settings)

    @app.get("/plans/{plan_id}/clash")
    def clash(plan_id: int) -> None:
        raise PlanInUse(f"Plan {plan_id} is used by run 3")

    @app.get("/runs/{run_id}/bug")
    def bug(run_id: int) -> None:
        raise RuntimeError("a secret path /srv/emuplan")

    with TestClient(app, raise_server_exceptions=False) as client:
        conflict = client.get("/plans/4/clash", headers=BROWSER)
        assert conflict.status_code == 409
        assert "<title>409 · This clashes with what is already there · emuplan</title>" in conflict.text
        assert _detail(conflict.text) == "Plan 4 is used by run 3"
        assert client.get("/plans/4/clash", headers=API).json() == {"detail": "Plan 4 is used by run 3"}

        failure = client.get("/runs/1/bug", headers=BROWSER)
        assert failure.status_code == 500
        assert "<title>500 · Something went wrong on the server · emuplan</title>" in failure.text
        detail = "An unexpected error on the server: a bug. The server&#39;s log has the details."
        assert _detail(failure.text) == detail
        assert "/srv/emuplan" not in failure.text
        assert _places(failure.text) == ['<li><a href="/runs">All runs</a></li>', '<li><a href="/">Home</a></li>']
        answer = client.get("/runs/1/bug", headers=API)
        assert (answer.status_code, answer.json()) == (500, {"detail": detail.replace("&#39;", "'")})


def _subclasses(cls: type) -> Iterator[type]:
    for subclass in cls.__subclasses__():
        yield subclass
        yield from _subclasses(subclass)


def test_every_domain_error_names_its_status():
    """The app (imported above) answers each ``EmuplanError`` with its own ``http_status``: one without would be a
    500, the status kept for bugs."""
    missing = [cls.__qualname__ for cls in _subclasses(EmuplanError) if not 400 <= getattr(cls, "http_status", 0) < 600]
    assert not missing
    assert len(list(_subclasses(EmuplanError))) > 20
