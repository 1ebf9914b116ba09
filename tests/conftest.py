"""Fixtures every test layer shares: each test gets its own database migrated by Alembic.

Alembic runs once per session into a template (a SQLite file; a PostgreSQL template database); each
test copies it, so every test starts from a really migrated, empty database of its own without paying
for the migration again. Tests marked ``both_databases`` run once on SQLite and once on a real
PostgreSQL server (``postgres_server.py``); every other test runs on SQLite.
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
from postgres_server import TEMPLATE, PostgresServer, start_postgres, stop_postgres

# Starlette's TestClient sends "Host: testserver"; the live-server tests use 127.0.0.1 like a user would.
os.environ["EMUPLAN_ALLOWED_HOSTS"] = "testserver,localhost,127.0.0.1,::1"


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.sqlite3"
    migrate(f"sqlite:///{path}")
    return path


DATABASE_BACKENDS = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database_backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_databases"):
        metafunc.parametrize("database_backend", DATABASE_BACKENDS, indirect=True)


@pytest.fixture
def database_backend(request: pytest.FixtureRequest) -> str:
    """The database this test runs on: both for tests marked ``both_databases``, else SQLite."""
    return getattr(request, "param", "sqlite")


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL cluster for the session, started on first use."""
    server = start_postgres()
    yield server
    stop_postgres(server)


@pytest.fixture
def empty_database_url(database_backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of this test's backend with no schema at all (for migration tests)."""
    if database_backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.sqlite3'}"
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    name = server.create_database()
    yield server.url(name)
    server.drop_database(name)


@pytest.fixture
def database_url(
    database_backend: str, tmp_path: Path, migrated_template: Path, request: pytest.FixtureRequest
) -> Iterator[str]:
    if database_backend == "sqlite":
        path = tmp_path / "emuplan.sqlite3"
        shutil.copyfile(migrated_template, path)
        yield f"sqlite:///{path}"
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    name = server.create_database(template=TEMPLATE)
    yield server.url(name)
    server.drop_database(name)


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


@pytest.fixture(scope="session")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """PyTorch profiler traces (one per rank) of real DDP steps on 2 gloo ranks (``profiled_ddp``), made once a
    session: the observed-run tests read them, none changes them."""
    from profiled_ddp import ThreeLayers, profiled_ddp_steps, three_layers_input  # torch: only when asked for

    return profiled_ddp_steps(ThreeLayers, three_layers_input, tmp_path_factory.mktemp("traces"))
