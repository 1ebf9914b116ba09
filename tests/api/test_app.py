"""The app frame: migration on start, security headers, upload cap."""

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect

from emuplan.api.urls import app_routes, url_path
from emuplan.main import create_app
from emuplan.settings import Settings

pytestmark = pytest.mark.both_databases


def test_health_answers_and_schema_is_migrated(client: TestClient, database) -> None:
    response = client.get("/api/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    tables = set(inspect(database.engine).get_table_names())
    assert {"model_definition", "plan", "run", "run_table", "comparison", "share_link", "alembic_version"} <= tables


def test_fresh_file_is_migrated_on_start(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'new' / 'emuplan.sqlite3'}"
    with TestClient(create_app(Settings(database_url=url, demo=False))) as client:
        assert client.get("/api/health").status_code == 200
    assert (tmp_path / "new" / "emuplan.sqlite3").exists()


def test_pages_send_a_strict_content_security_policy(client: TestClient) -> None:
    for path in ("/", "/plan", "/runs", "/compare", "/api/health"):
        response = client.get(path)
        assert response.status_code == 200, path
        policy = response.headers["content-security-policy"]
        assert "script-src 'self';" in policy and "unsafe-eval" not in policy, path
        assert "object-src 'none'" in policy and "frame-ancestors 'none'" in policy, path
        assert response.headers["x-content-type-options"] == "nosniff", path
        assert response.headers["x-frame-options"] == "DENY", path


def test_body_over_the_limit_is_refused_with_413(database_url: str) -> None:
    settings = Settings(database_url=database_url, demo=False, max_upload_bytes=1000)
    with TestClient(create_app(settings)) as client:
        response = client.post("/api/health", content=b"x" * 5000)
    assert response.status_code == 413
    assert "1000 bytes" in response.json()["detail"]


def test_every_route_has_a_name_of_its_own(client: TestClient) -> None:
    """Paths are built from route names (api/urls.py): a name used twice would build the other route's path."""
    names = [route.name for route in app_routes(client.app.routes)]
    assert len(names) == len(set(names)) > 90
    assert url_path(client.app, "run_page", run_id=3) == "/runs/3"
    assert url_path(client.app, "runs_page", query={"plan": 2, "q": "", "tag": "a b"}) == "/runs?plan=2&tag=a+b"
    assert url_path(client.app, "update_platform_form", name="a/b") == "/platforms/a%2Fb"
