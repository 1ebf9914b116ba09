"""`emuplan backup FILE` copies the SQLite database while it is in use, readable by its owner only (as is
the directory a new database is made in);
`emuplan restore FILE` puts a copy back, upgraded to this version's schema; what cannot be done is refused
naming the file and the remedy."""

import os
import sqlite3
from contextlib import closing

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.store.db import Database, alembic_config, migrate
from old_schema import RUN, old_run
from paths import SHARED_NCCL

runner = CliRunner()
HEAD = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
V100_LOG = SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"


def invoke(*args: str, **options):
    return runner.invoke(app, list(args), **options)


def listed_runs() -> list[tuple[int, str]]:
    return [tuple(line.split()[:2]) for line in invoke("runs", "--wide").output.splitlines()[1:]]


def test_a_backup_taken_while_a_writer_waits_restores_what_it_held(cli_env, database: Database, tmp_path):
    assert invoke("import", str(V100_LOG), "--name", "kept").exit_code == 0
    # Another connection holds a write transaction open: the backup still reads a consistent database.
    path = database.engine.url.database
    with closing(sqlite3.connect(path, isolation_level=None)) as writer:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE run SET name = 'uncommitted'")
        made = invoke("backup", str(tmp_path / "copy.sqlite3"))
        writer.execute("ROLLBACK")
    assert made.exit_code == 0, made.output
    size = (tmp_path / "copy.sqlite3").stat().st_size
    assert made.output == f"backed up to {tmp_path / 'copy.sqlite3'} ({size:,} bytes, schema {HEAD})\n"

    assert invoke("import", str(SHARED_NCCL / "b200-allreduce-2.17.6.txt"), "--name", "later").exit_code == 0
    assert [name for _, name in listed_runs()] == ["later", "kept"]
    restored = invoke("restore", str(tmp_path / "copy.sqlite3"), "--yes")
    assert restored.exit_code == 0, restored.output
    assert restored.output == f"restored {path} from {tmp_path / 'copy.sqlite3'} (schema {HEAD})\n"
    assert listed_runs() == [("1", "kept")]
    stats = invoke("stats", "1")
    assert "broadcast: peak busbw 122.15 GB/s at 8,589,934,592 B out-of-place" in stats.output


def test_a_backup_is_readable_by_its_owner_only(cli_env, tmp_path):
    assert invoke("import", str(V100_LOG), "--name", "kept").exit_code == 0
    usual = os.umask(0o022)  # the common default: new files readable by every local user
    try:
        assert invoke("backup", str(tmp_path / "copy.sqlite3")).exit_code == 0
    finally:
        os.umask(usual)
    assert (tmp_path / "copy.sqlite3").stat().st_mode & 0o777 == 0o600


def test_a_new_database_directory_is_its_owners_alone(tmp_path):
    usual = os.umask(0o022)
    try:
        Database(f"sqlite:///{tmp_path / 'data' / 'emuplan.sqlite3'}").dispose()
        migrate(f"sqlite:///{tmp_path / 'elsewhere' / 'emuplan.sqlite3'}")
    finally:
        os.umask(usual)
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "elsewhere").stat().st_mode & 0o777 == 0o700


def test_restore_asks_first_and_keeps_the_database_when_told_no(cli_env, tmp_path):
    assert invoke("import", str(V100_LOG), "--name", "kept").exit_code == 0
    assert invoke("backup", str(tmp_path / "copy.sqlite3")).exit_code == 0
    assert invoke("import", str(SHARED_NCCL / "b200-allreduce-2.17.6.txt"), "--name", "later").exit_code == 0
    declined = invoke("restore", str(tmp_path / "copy.sqlite3"), input="n\n")
    assert declined.exit_code == 1
    assert "Replace every run, plan and account in" in declined.output
    assert [name for _, name in listed_runs()] == ["later", "kept"]


def test_a_backup_of_an_old_version_is_upgraded_on_restore(cli_env, empty_database_url, tmp_path):
    old = tmp_path / "old.sqlite3"
    old_url = f"sqlite:///{old}"
    command.upgrade(alembic_config(old_url), "0003")
    engine = create_engine(old_url)
    with engine.begin() as connection:
        connection.execute(RUN.insert().values(**old_run("from 0003", id=4, summary={"groups": []})))
    engine.dispose()
    restored = invoke("restore", str(old), "--yes")
    assert restored.exit_code == 0, restored.output
    assert restored.output.endswith(f"from {old}, upgraded from schema 0003 to {HEAD}\n")
    assert listed_runs() == [("4", "from")]
    assert sa.inspect(create_engine(old_url)).has_table("run_curves") is False  # the backup itself untouched


def test_what_cannot_be_backed_up_or_restored_is_refused_naming_it(cli_env, tmp_path, monkeypatch):
    taken = tmp_path / "taken.sqlite3"
    taken.write_bytes(b"")
    refused = invoke("backup", str(taken))
    assert refused.stderr == f"error: {taken} exists: a backup never overwrites a file, name a new one\n"
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all")
    assert invoke("restore", str(text), "--yes").stderr == f"error: {text} is not an SQLite database\n"
    foreign = tmp_path / "foreign.sqlite3"
    with closing(sqlite3.connect(foreign)) as connection:
        connection.execute("CREATE TABLE t (x)")
    assert invoke("restore", str(foreign), "--yes").stderr == (
        f"error: {foreign} is not an emuplan database (it has no schema revision)\n"
    )
    newer = tmp_path / "newer.sqlite3"
    with closing(sqlite3.connect(newer)) as connection:
        connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        connection.execute("INSERT INTO alembic_version VALUES ('0099')")
        connection.commit()
    refused = invoke("restore", str(newer), "--yes")
    assert refused.exit_code == 2
    assert refused.stderr == (
        f"error: {newer} is at schema revision 0099, which this emuplan does not know (its newest is {HEAD}): "
        "restore it with the version that made it, or a newer one\n"
    )
    monkeypatch.setenv("EMUPLAN_DATABASE_URL", "postgresql+psycopg://team:secret@db.example.org/emuplan")
    from emuplan.settings import get_settings

    get_settings.cache_clear()
    on_postgres = invoke("backup", str(tmp_path / "pg.dump"))
    assert on_postgres.exit_code == 2
    assert on_postgres.stderr == (
        "error: the database is PostgreSQL (postgresql://team:***@db.example.org/emuplan): back it up with "
        "`pg_dump --format=custom --file FILE 'postgresql://team:***@db.example.org/emuplan'` and restore with "
        "`pg_restore --clean --if-exists --dbname 'postgresql://team:***@db.example.org/emuplan' FILE`\n"
    )
    assert "secret" not in on_postgres.stderr


def live_state(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def altered_backup(tmp_path, *statements: str):
    """A true backup of a database holding one run, with ``statements`` run on it afterwards."""
    assert invoke("import", str(V100_LOG), "--name", "kept").exit_code == 0
    copy = tmp_path / "altered.sqlite3"
    assert invoke("backup", str(copy)).exit_code == 0
    with closing(sqlite3.connect(copy)) as connection:
        for statement in statements:
            connection.execute(statement)
        connection.commit()
    return copy


def test_a_foreign_database_with_emuplans_revision_is_refused_and_the_live_one_untouched(cli_env, tmp_path):
    """The audit's file: only ``alembic_version`` at the newest revision and one table of its own. It was
    "restored", and the server no longer started."""
    path = make_url_path(cli_env)
    assert invoke("import", str(V100_LOG), "--name", "kept").exit_code == 0
    before = live_state(path)
    foreign = tmp_path / "foreign.sqlite3"
    with closing(sqlite3.connect(foreign)) as connection:
        connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        connection.execute("INSERT INTO alembic_version VALUES (?)", (HEAD,))
        connection.execute("CREATE TABLE notes (text TEXT)")
        connection.commit()
    refused = invoke("restore", str(foreign), "--yes")
    assert refused.exit_code == 2
    assert refused.stderr == (
        f"error: {foreign} is not emuplan's database at schema {HEAD}: an extra table 'notes'; no table 'account'; "
        "no table 'account_session' (and 52 more); restore a file `emuplan backup` wrote\n"
    )
    assert live_state(path) == before
    assert listed_runs() == [("1", "kept")]


def make_url_path(database_url: str) -> str:
    return database_url.removeprefix("sqlite:///")


@pytest.mark.parametrize(
    ("statements", "difference"),
    [
        (
            [
                "CREATE TRIGGER every_account_an_admin AFTER INSERT ON account "
                "BEGIN UPDATE account SET role = 'admin' WHERE id = new.id; END"
            ],
            "an extra trigger 'every_account_an_admin'",
        ),
        (["CREATE VIEW everything AS SELECT * FROM run"], "an extra view 'everything'"),
        (["CREATE INDEX ix_run_note ON run (note)"], "an extra index 'ix_run_note'"),
        (["ALTER TABLE run ADD COLUMN owner TEXT"], "table 'run' with an extra column 'owner'"),
        (["DROP INDEX ix_share_link_comparison_id"], "no index 'ix_share_link_comparison_id'"),
    ],
    ids=["trigger", "view", "index", "column", "index dropped"],
)
def test_a_backup_with_its_schema_altered_is_refused_naming_the_difference(cli_env, tmp_path, statements, difference):
    path = make_url_path(cli_env)
    copy = altered_backup(tmp_path, *statements)
    before = live_state(path)
    refused = invoke("restore", str(copy), "--yes")
    assert (refused.exit_code, refused.stderr) == (
        2,
        f"error: {copy} is not emuplan's database at schema {HEAD}: {difference}; "
        "restore a file `emuplan backup` wrote\n",
    )
    assert live_state(path) == before


def test_a_damaged_database_or_two_revisions_is_refused_without_a_traceback(cli_env, tmp_path):
    damaged = tmp_path / "damaged.sqlite3"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    two = altered_backup(tmp_path, "INSERT INTO alembic_version VALUES ('0003')")
    for path in (damaged, two):
        refused = invoke("restore", str(path), "--yes")
        assert (refused.exit_code, refused.stderr) == (
            2,
            f"error: {path} is not an emuplan database (it has no schema revision)\n",
        )


def test_a_table_sqlite_cannot_describe_is_refused_without_a_traceback(cli_env, tmp_path):
    """A virtual table of a module this SQLite lacks, written straight into the schema."""
    odd = tmp_path / "odd.sqlite3"
    with closing(sqlite3.connect(odd)) as connection:
        connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        connection.execute("INSERT INTO alembic_version VALUES (?)", (HEAD,))
        connection.execute("PRAGMA writable_schema = ON")
        connection.execute(
            "INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) "
            "VALUES ('table', 'vt', 'vt', 0, 'CREATE VIRTUAL TABLE vt USING nosuch(a)')"
        )
        connection.commit()
    refused = invoke("restore", str(odd), "--yes")
    assert (refused.exit_code, refused.stderr) == (
        2,
        f"error: {odd} is not emuplan's database at schema {HEAD}: no such module: nosuch\n",
    )
