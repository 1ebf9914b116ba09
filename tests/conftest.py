"""Fixtures every test layer shares: each test gets its own SQLite file migrated by Alembic.

Alembic runs once per session into a template file; each test copies that file, so every test
starts from a really migrated, empty database of its own without paying for the migration again.
"""

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from emuplan.main import create_app
from emuplan.roles import Role
from emuplan.settings import Settings, get_settings
from emuplan.store import accounts
from emuplan.store.db import Database, migrate
from live_server import LiveServer, start_server, stop_server

# Starlette's TestClient sends "Host: testserver"; the live-server tests use 127.0.0.1 like a user would.
os.environ["EMUPLAN_ALLOWED_HOSTS"] = "testserver,localhost,127.0.0.1,::1"


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.sqlite3"
    migrate(f"sqlite:///{path}")
    return path


@pytest.fixture
def database_url(tmp_path: Path, migrated_template: Path) -> str:
    path = tmp_path / "emuplan.sqlite3"
    shutil.copyfile(migrated_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, demo=False)


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    db = Database(database_url)
    yield db
    db.dispose()


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Iterator[str]:
    """Points the CLI (which reads EMUPLAN_* variables) at this test's database."""
    monkeypatch.setenv("EMUPLAN_DATABASE_URL", database_url)
    monkeypatch.setenv("EMUPLAN_DEMO", "false")
    get_settings.cache_clear()
    yield database_url
    get_settings.cache_clear()


@pytest.fixture
def live_server(settings: Settings) -> Iterator[LiveServer]:
    """uvicorn on a free loopback port, serving this test's database."""
    live = start_server(settings)
    yield live
    stop_server(live)


@pytest.fixture
def accounts_server(database_url: str) -> Iterator[LiveServer]:
    """uvicorn serving this test's database with sign-in on (EMUPLAN_AUTH=accounts)."""
    live = start_server(Settings(database_url=database_url, demo=False, auth="accounts"))
    yield live
    stop_server(live)


@pytest.fixture
def add_account(database: Database) -> Callable[[str, Role], str]:
    """Adds an account to this test's database as `emuplan users add` does; returns its password."""

    def add(name: str, role: Role) -> str:
        with database.writing() as session:
            return accounts.create_account(session, name, role)[1]

    return add
