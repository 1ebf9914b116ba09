"""Migration 0007 adds the account tables and takes them away again; removing an account cascades."""

import sqlite3
from pathlib import Path

from alembic import command

from emuplan.roles import Role
from emuplan.store import accounts
from emuplan.store.db import Database, alembic_config, migrate

ACCOUNT_TABLES = ["account", "account_session", "api_token", "sign_in_failure"]


def tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
    return [name for (name,) in rows]


def test_0007_adds_and_drops_the_account_tables(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite3"
    url = f"sqlite:///{path}"
    command.upgrade(alembic_config(url), "0006")
    assert not set(ACCOUNT_TABLES) & set(tables(path))
    migrate(url)
    assert set(ACCOUNT_TABLES) <= set(tables(path))
    command.downgrade(alembic_config(url), "0006")
    assert not set(ACCOUNT_TABLES) & set(tables(path))
    migrate(url)
    assert set(ACCOUNT_TABLES) <= set(tables(path))


def test_an_accounts_sessions_and_tokens_go_with_it_and_ids_are_never_reused(database_url: str) -> None:
    database = Database(database_url)
    with database.writing() as session:
        ada, _ = accounts.create_account(session, "ada", Role.editor)
        accounts.create_api_token(session, ada.id, "cli", None)
        accounts.start_session(session, ada, accounts.FAILURE_WINDOW)
    with database.writing() as session:
        session.delete(accounts.get_account(session, "ada"))  # the database's own cascade, not remove_account
    with database.writing() as session:
        bob, _ = accounts.create_account(session, "bob", Role.viewer)
    path = database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT count(*) FROM account_session").fetchone() == (0,)
        assert connection.execute("SELECT count(*) FROM api_token").fetchone() == (0,)
    assert bob.id == 2
    database.dispose()
