"""An upgrade is all or nothing: a server killed (SIGKILL) in the middle of one leaves the database at the
revision it started from, holding what it held, and the next start upgrades it to the newest schema with
nothing lost. Before, SQLite committed each DDL statement on its own: killed after 0017 added
``run.collectives``, the restart failed with "duplicate column name: collectives"; killed inside 0010's table
rebuilds, with "no such index: ix_run_strategy_folded" (dropped and committed before them).

The kill is real: a separate process upgrades the database and SIGKILLs itself right after the statement
named by the test has run (a listener on every engine), so nothing of the upgrade gets to clean up.
"""

import signal
import subprocess
import sys

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.script import ScriptDirectory
from test_upgrade_keeps_data import DERIVED_RUN_COLUMNS, DERIVED_TABLES, fill, rows_of, snapshot

from emuplan.store.db import Database, alembic_config, migrate

pytestmark = pytest.mark.both_databases

START = "0009"  # before 0010's table rebuilds (SQLite) and the data migrations of 0013, 0015 and 0017
KILL_AFTER = (
    "ALTER TABLE run ADD COLUMN kind",  # 0013's first statement
    "SET version_num='0015'",  # between two migrations
    "ALTER TABLE run ADD COLUMN collectives",  # the audit's finding
    "ix_run_size_max_id",  # 0017's last index, after its data migration
)
KILL_AFTER_ON_SQLITE = ("DROP TABLE run",)  # 0010 rebuilds run: the old table dropped, the copy not yet renamed

UPGRADE_KILLED_AFTER = """
import os, signal, sys
from sqlalchemy import Engine, event
from emuplan.store.db import migrate

database_url, marker = sys.argv[1:]

@event.listens_for(Engine, "after_cursor_execute")
def kill_after_marker(_connection, _cursor, statement, *_rest):
    if marker in statement:
        os.kill(os.getpid(), signal.SIGKILL)

migrate(database_url)
"""


def upgrade_killed_after(database_url: str, marker: str) -> None:
    finished = subprocess.run(
        [sys.executable, "-c", UPGRADE_KILLED_AFTER, database_url, marker], capture_output=True, text=True
    )
    assert finished.returncode == -signal.SIGKILL, (marker, finished.stderr)


def revision(database_url: str) -> str:
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as connection:
            return connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
    finally:
        engine.dispose()


def test_an_upgrade_killed_at_any_point_leaves_the_old_revision_and_the_restart_reaches_head_with_nothing_lost(
    database_url: str, database: Database, database_backend: str
) -> None:
    fill(database)
    database.dispose()
    config = alembic_config(database_url)
    head = ScriptDirectory.from_config(config).get_current_head()
    at_head = snapshot(database_url)
    command.downgrade(config, START)
    held = snapshot(database_url)
    kill_points = KILL_AFTER + (KILL_AFTER_ON_SQLITE if database_backend == "sqlite" else ())
    for marker in kill_points:
        upgrade_killed_after(database_url, marker)
        assert revision(database_url) == START, marker
        assert snapshot(database_url) == held, marker
    migrate(database_url)
    assert revision(database_url) == head
    after = snapshot(database_url)
    for table, rows in held.items():
        upgraded = rows_of(after, table)
        assert upgraded.keys() == rows.keys(), table
        for key, row in rows.items():
            assert {column: upgraded[key][column] for column in row if column in upgraded[key]} == {
                column: value for column, value in row.items() if column in upgraded[key]
            }, (table, key)
    for table in DERIVED_TABLES:
        assert after[table] == at_head[table], table
    derived = {key: {column: row[column] for column in DERIVED_RUN_COLUMNS} for key, row in after["run"].items()}
    assert derived == {
        key: {column: row[column] for column in DERIVED_RUN_COLUMNS} for key, row in at_head["run"].items()
    }
    assert len(after["run"]) == 3
