"""`emuplan backup` and `emuplan restore` for the SQLite database: a consistent copy taken while the server
runs (SQLite's online backup API copies pages under a read transaction, so a writer never leaves it half
old, half new), and such a copy put back, upgraded to this version's schema first so that a failing
upgrade never touches the live database. PostgreSQL has its own tools: pg_dump and pg_restore.
"""

import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from emuplan.settings import MIGRATIONS_DIR
from emuplan.store.db import alembic_config, migrate

SQLITE_HEADER = b"SQLite format 3\x00"


class BackupError(ValueError):
    """A backup or restore that cannot be done as asked; the message says why and what to do."""


def sqlite_file(database_url: str) -> Path:
    """The database file behind ``database_url``; PostgreSQL is refused with the commands that do this."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return Path(url.database)
    if url.get_backend_name() == "postgresql":
        shown = url.set(drivername="postgresql").render_as_string(hide_password=True)
        raise BackupError(
            f"the database is PostgreSQL ({shown}): back it up with `pg_dump --format=custom --file FILE "
            f"'{shown}'` and restore with `pg_restore --clean --if-exists --dbname '{shown}' FILE`"
        )
    raise BackupError(f"{url.render_as_string(hide_password=True)} is not a database file that can be backed up")


def schema_revision(path: Path) -> str:
    """The Alembic revision an emuplan SQLite file is at; anything else is refused naming the file."""
    try:
        with path.open("rb") as file:
            header = file.read(len(SQLITE_HEADER))
    except OSError as error:
        raise BackupError(f"{path} cannot be read: {error.strerror}") from None
    if header != SQLITE_HEADER:
        raise BackupError(f"{path} is not an SQLite database")
    with closing(_read_only(path)) as connection:
        try:
            ((revision,),) = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        except (sqlite3.DatabaseError, ValueError):
            raise BackupError(f"{path} is not an emuplan database (it has no schema revision)") from None
        try:
            (integrity,) = connection.execute("PRAGMA integrity_check").fetchone()
        except sqlite3.DatabaseError as error:
            integrity = str(error)
    if integrity != "ok":
        raise BackupError(f"{path} is damaged: SQLite's integrity check says {integrity!r}")
    if not isinstance(revision, str):
        raise BackupError(f"{path} is not an emuplan database (its schema revision is {revision!r})")
    return revision


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _schema(connection: sqlite3.Connection) -> dict[tuple[str, str], tuple]:
    """A database's schema as SQLite describes it, (kind, name) → what it is: each table's columns (name, type,
    NOT NULL, default, primary key) and foreign keys, each index's table, uniqueness, columns and SQL, and every
    trigger and view. SQLite's own bookkeeping (``sqlite_sequence``, ``sqlite_stat1``) is left out."""
    schema: dict[tuple[str, str], tuple] = {}
    objects = connection.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
    ).fetchall()
    for kind, name, sql in objects:
        if kind == "table":
            columns = tuple(row[1:6] for row in connection.execute("SELECT * FROM pragma_table_xinfo(?)", (name,)))
            keys = tuple(row[2:5] for row in connection.execute("SELECT * FROM pragma_foreign_key_list(?)", (name,)))
            schema[("table", name)] = (columns, keys)
            for index, unique, origin in connection.execute(
                'SELECT name, "unique", origin FROM pragma_index_list(?)', (name,)
            ):
                indexed = tuple(row[2] for row in connection.execute("SELECT * FROM pragma_index_info(?)", (index,)))
                index_sql = next((text for kind_, named, text in objects if named == index), None)
                schema[("index", index)] = (name, unique, origin, indexed, index_sql)
        elif kind != "index":  # indexes are read with their table (SQLite's own among them)
            schema[(kind, name)] = (sql,)
    return schema


# The order differences are told in: what a file adds that could act (a trigger, a view) first.
KIND_ORDER = {"trigger": 0, "view": 1, "table": 2, "index": 3}


def _differences(found: dict[tuple[str, str], tuple], made: dict[tuple[str, str], tuple]) -> list[str]:
    """What ``found`` has that ``made`` has not, then what it lacks, then what it has otherwise, in words."""

    def ordered(keys) -> list[tuple[str, str]]:
        return sorted(keys, key=lambda key: (KIND_ORDER.get(key[0], len(KIND_ORDER)), key[1]))

    differences = [f"an extra {kind} {name!r}" for kind, name in ordered(found.keys() - made.keys())]
    differences += [f"no {kind} {name!r}" for kind, name in ordered(made.keys() - found.keys())]
    for kind, name in ordered(key for key in found.keys() & made.keys() if found[key] != made[key]):
        if kind == "table" and found[kind, name][0] != made[kind, name][0]:
            columns, expected = ({column[0]: column for column in schema[kind, name][0]} for schema in (found, made))
            said = [f"an extra column {column!r}" for column in sorted(columns.keys() - expected.keys())]
            said += [f"no column {column!r}" for column in sorted(expected.keys() - columns.keys())]
            said += [
                f"column {column!r} declared otherwise"
                for column in sorted(columns.keys() & expected.keys())
                if columns[column] != expected[column]
            ]
            differences.append(f"table {name!r} with {', '.join(said) or 'its columns in another order'}")
        else:
            differences.append(f"{kind} {name!r} defined otherwise")
    return differences


def check_schema(path: Path, revision: str, database_url: str) -> None:
    """Refuse ``path`` unless its schema is exactly what the migrations make at ``revision``: a foreign file with
    emuplan's revision in it (it would be restored, and the server no longer start) or a backup with a trigger or
    a view added (a trigger that made every new account an admin would be kept)."""
    with tempfile.TemporaryDirectory(prefix="emuplan-restore-") as scratch:
        reference = Path(scratch) / "reference.sqlite3"
        command.upgrade(alembic_config(f"sqlite:///{reference}", MIGRATIONS_DIR), revision)
        with closing(_read_only(reference)) as connection:
            made = _schema(connection)
    with closing(_read_only(path)) as connection:
        try:
            found = _schema(connection)
        except sqlite3.DatabaseError as error:  # a table SQLite cannot describe (a virtual table's unknown module)
            raise BackupError(f"{path} is not emuplan's database at schema {revision}: {error}") from None
    differences = _differences(found, made)
    if differences:
        more = f" (and {len(differences) - 3} more)" if len(differences) > 3 else ""
        raise BackupError(
            f"{path} is not emuplan's database at schema {revision}: {'; '.join(differences[:3])}{more}; "
            "restore a file `emuplan backup` wrote"
        )


def backup(database_url: str, target: Path) -> str:
    """Copy the live database to ``target`` (a new file); returns the schema revision of the copy."""
    source = sqlite_file(database_url)
    if target.exists():
        raise BackupError(f"{target} exists: a backup never overwrites a file, name a new one")
    if not source.is_file():
        raise BackupError(f"there is no database at {source} to back up")
    partial = target.with_name(target.name + ".partial")
    # The copy holds password hashes and everything stored: its owner's alone, whatever the umask (SQLite
    # fills the empty file, and gives its -wal and -shm files the same mode).
    partial.unlink(missing_ok=True)
    partial.touch(mode=0o600)
    try:
        with (
            closing(sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)) as live,
            closing(sqlite3.connect(partial)) as copy,
        ):
            live.backup(copy)
        partial.rename(target)
    finally:
        partial.unlink(missing_ok=True)
    return schema_revision(target)


def _ids_handed_out(path: Path) -> dict[str, int]:
    """The highest id each table has ever handed out (SQLite's ``sqlite_sequence``); none for no database."""
    if not path.is_file():
        return {}
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as connection:
        try:
            return dict(connection.execute("SELECT name, seq FROM sqlite_sequence"))
        except sqlite3.DatabaseError:  # no table has handed out an id, or the file is damaged: restore anyway
            return {}


def _keep_ids_handed_out(path: Path, handed_out: dict[str, int]) -> None:
    """Restored runs, plans and comparisons keep their ids, and new ones continue after every id the replaced
    database handed out: a link to a run imported after the backup finds nothing rather than a newcomer."""
    with closing(sqlite3.connect(path)) as connection, connection:
        for table, seq in handed_out.items():
            connection.execute("UPDATE sqlite_sequence SET seq = MAX(seq, ?) WHERE name = ?", (seq, table))
            connection.execute(
                "INSERT INTO sqlite_sequence (name, seq) SELECT ?1, ?2 WHERE NOT EXISTS "
                "(SELECT 1 FROM sqlite_sequence WHERE name = ?1) "
                "AND EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
                (table, seq),
            )


def restore(database_url: str, source: Path) -> tuple[str, str]:
    """Replace the live database's content with the backup ``source``, upgraded to the newest schema on a
    scratch copy first; returns (the backup's revision, the revision now live)."""
    target = sqlite_file(database_url)
    if not source.is_file():
        raise BackupError(f"{source} does not exist")
    revision = schema_revision(source)
    scripts = ScriptDirectory.from_config(alembic_config(database_url, MIGRATIONS_DIR))
    if revision not in {script.revision for script in scripts.walk_revisions()}:
        raise BackupError(
            f"{source} is at schema revision {revision}, which this emuplan does not know (its newest is "
            f"{scripts.get_current_head()}): restore it with the version that made it, or a newer one"
        )
    check_schema(source, revision, database_url)
    handed_out = _ids_handed_out(target)
    scratch = target.with_name(target.name + ".restoring")
    scratch.unlink(missing_ok=True)
    try:
        with closing(sqlite3.connect(source)) as backup_file, closing(sqlite3.connect(scratch)) as copy:
            backup_file.backup(copy)
        try:
            migrate(f"sqlite:///{scratch}")
        except (SQLAlchemyError, sqlite3.Error) as error:
            # Its schema was emuplan's: its data stopped an upgrade step. The live database is not yet touched.
            raise BackupError(f"{source} could not be upgraded from schema {revision}: {error}") from None
        _keep_ids_handed_out(scratch, handed_out)
        target.parent.mkdir(parents=True, exist_ok=True)
        # The backup API writes the live file under its own locks: a running server sees either the old
        # content or the restored one, never a mixture.
        with closing(sqlite3.connect(scratch)) as upgraded, closing(sqlite3.connect(target)) as live:
            upgraded.backup(live)
    finally:
        scratch.unlink(missing_ok=True)
    return revision, scripts.get_current_head()
