"""Nothing is lost across versions: a database holding data at every earlier schema revision upgrades to
the newest with every row and value it held, and with what later revisions derive from them (summaries
moved to their own tables, run kinds, p50/p99, verdicts, the list's collectives and sizes) exactly as the
newest version writes them.

The data at an earlier revision is the demo content (plans, runs, a comparison and its share link), an
account with a session and a token, a failed sign-in and a platform profile, written by this version and
taken down to that revision by the migrations' own downgrades; then upgraded again. Each round starts from
what the round before left, newest revision first.
"""

import json
import warnings
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient

from emuplan.demo import load_demo
from emuplan.main import create_app
from emuplan.roles import Role
from emuplan.services import platforms
from emuplan.settings import Settings
from emuplan.store import accounts, comparisons
from emuplan.store.db import Database, alembic_config
from emuplan.workload.platforms import BUILTIN_PLATFORMS

pytestmark = pytest.mark.both_databases

# Columns and tables a later revision computes from what the earlier one holds.
DERIVED_RUN_COLUMNS = (
    "kind", "peak_busbw_gbps", "p50_us", "p99_us", "verdict", "collectives", "size_min_bytes", "size_max_bytes",
)  # fmt: skip
DERIVED_TABLES = ("run_summary", "run_curves", "run_tag", "run_collective")
# Tables a later revision folds into another, and the kind their rows have there (0021: one job table).
FOLDED_TABLES = {f"{kind}_job": ("job", kind) for kind in ("measurement", "simulation", "relabel")}


def snapshot(database_url: str) -> dict[str, dict[tuple, dict]]:
    """Every row of every table, by primary key, JSON parsed (SQLite hands it over as text)."""
    engine = sa.create_engine(database_url)
    metadata = sa.MetaData()
    try:
        with engine.connect() as connection:
            with warnings.catch_warnings():  # an expression index (lower(strategy)) is not reflected: no rows
                warnings.simplefilter("ignore", sa.exc.SAWarning)
                metadata.reflect(connection)
            tables = {}
            for table in metadata.sorted_tables:
                if table.name == "alembic_version":
                    continue
                key = [column.name for column in table.primary_key.columns]
                rows = connection.execute(sa.select(table)).mappings().all()
                tables[table.name] = {
                    tuple(row[k] for k in key): {c: _plain(v) for c, v in row.items()} for row in rows
                }
        return tables
    finally:
        engine.dispose()


def _plain(value):
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def rows_of(tables: dict[str, dict[tuple, dict]], table: str) -> dict[tuple, dict]:
    """``table``'s rows in a snapshot, wherever that revision keeps them."""
    if table not in FOLDED_TABLES:
        return tables[table]
    into, kind = FOLDED_TABLES[table]
    return {key: row for key, row in tables[into].items() if row["kind"] == kind}


def fill(database: Database) -> None:
    assert load_demo(database)
    with database.writing() as session:
        ada, _ = accounts.create_account(session, "ada", Role.admin)
        accounts.start_session(session, ada, lifetime=timedelta(days=14))
        accounts.create_api_token(session, ada.id, label="nightly", expires_in_days=None)
        accounts.record_failure(session, "ada", "192.0.2.7")
        platforms.create_platform(
            session,
            {
                **BUILTIN_PLATFORMS["h100-ndr"].model_dump(exclude={"scale_out_gb_s"}),
                "name": "lab-h100",
                "title": "Lab H100",
            },
        )
        (comparison,) = comparisons.list_comparisons(session)
        comparisons.create_share_link(session, comparison.id)


def test_data_at_every_earlier_revision_upgrades_with_nothing_lost(database_url: str, database: Database):
    fill(database)
    database.dispose()
    config = alembic_config(database_url)
    scripts = ScriptDirectory.from_config(config)
    head = scripts.get_current_head()
    earlier = [script.revision for script in scripts.walk_revisions() if script.revision != head]
    with TestClient(create_app(Settings(database_url=database_url, demo=False))) as client:
        listing = client.get("/api/runs").json()
    for revision in earlier:  # newest first
        before = snapshot(database_url)
        command.downgrade(config, revision)
        held = snapshot(database_url)
        command.upgrade(config, head)
        after = snapshot(database_url)
        for table, rows in held.items():
            upgraded = rows_of(after, table)
            assert upgraded.keys() == rows.keys(), (revision, table)
            for key, row in rows.items():
                surviving = {column: value for column, value in row.items() if column in upgraded[key]}
                assert {column: upgraded[key][column] for column in surviving} == surviving, (revision, table)
        for table in DERIVED_TABLES:
            assert after[table] == before[table], (revision, table)
        derived = {key: {c: row[c] for c in DERIVED_RUN_COLUMNS} for key, row in after["run"].items()}
        assert derived == {key: {c: row[c] for c in DERIVED_RUN_COLUMNS} for key, row in before["run"].items()}
        assert len(held["run"]) == 3, revision
    with TestClient(create_app(Settings(database_url=database_url, demo=False))) as client:
        assert client.get("/api/runs").json() == listing
