"""Engine, sessions and migrations.

SQLite is the default store. Every connection turns on WAL, a busy timeout and foreign keys; write
sessions open their transaction with ``BEGIN IMMEDIATE`` so that two writers queue on the lock at the
start instead of failing half-way with "database is locked". A lock waited on past the busy timeout (on
PostgreSQL, its lock_timeout) is ``DatabaseBusy``: 503 with Retry-After. PostgreSQL (psycopg 3) gets plain
SQLAlchemy. On both, text holding a NUL character is refused before it reaches the database
(``TextWithNul``): PostgreSQL cannot store it, and SQLite behaves the same so a database can move.
JSON columns are read with pydantic-core's parser: a run's curves (~340 KB of numbers) decode in ~2.6 ms
against ~20 ms with the standard library's, which was most of a chart request.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from pydantic_core import from_json
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool
from sqlmodel import Session

from emuplan.errors import EmuplanError
from emuplan.settings import MIGRATIONS_DIR

_BEGIN_IMMEDIATE = "emuplan_begin_immediate"
WAL_AUTOCHECKPOINT_PAGES = 16384  # 64 MB of 4 KB pages
# How long a write waits for another's lock (SQLite's busy timeout, PostgreSQL's lock_timeout) before its request
# is answered 503 (``DatabaseBusy``); writes are short transactions, so this is only reached under a stuck writer.
BUSY_TIMEOUT_S = 10
BUSY_RETRY_AFTER_S = 5
# SQLITE_BUSY and SQLITE_LOCKED (the low byte of the extended codes); PostgreSQL's lock_not_available,
# deadlock_detected and serialization_failure.
_SQLITE_BUSY_CODES = frozenset({5, 6})
_POSTGRES_BUSY_STATES = frozenset({"55P03", "40P01", "40001"})


class DatabaseBusy(EmuplanError):
    """Another writer held the database's lock past ``BUSY_TIMEOUT_S``: 503 with Retry-After, not a 500."""

    http_status = 503
    retry_after_s = BUSY_RETRY_AFTER_S


def _is_busy(error: BaseException) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return (isinstance(code, int) and code & 0xFF in _SQLITE_BUSY_CODES) or (
        getattr(error, "sqlstate", None) in _POSTGRES_BUSY_STATES
    )


def _answer_busy_as_busy(engine: Engine) -> None:
    """A lock wait that timed out (at BEGIN, a statement or COMMIT) raised as ``DatabaseBusy``."""

    @event.listens_for(engine, "handle_error")
    def _on_error(context) -> None:
        if _is_busy(context.original_exception):
            raise DatabaseBusy(
                f"the database is busy with another write (waited {BUSY_TIMEOUT_S} s for its lock); "
                f"try again in {BUSY_RETRY_AFTER_S} s"
            ) from context.original_exception


def _begin_sqlite_transactions_explicitly(engine: Engine) -> None:
    """Every transaction SQLAlchemy begins is a real SQLite transaction, DDL included.

    pysqlite's own (legacy) transaction handling opens a transaction only before INSERT, UPDATE or DELETE:
    CREATE, ALTER and DROP would each commit on their own, so a migration killed half-way would stay half
    done. With the driver's handling off, SQLAlchemy's begin emits BEGIN (or BEGIN IMMEDIATE, which
    queues writers on the lock at the start instead of failing half-way with "database is locked").
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:
        immediate = connection.get_execution_options().get(_BEGIN_IMMEDIATE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _configure_sqlite(engine: Engine) -> None:
    _begin_sqlite_transactions_explicitly(engine)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # SQLite copies the WAL into the database file (and syncs it) in the commit that takes the WAL past
        # this many pages: with the default 1,000 (4 MB) that was every upload's commit, ~0.2 s of its
        # answer for a 2M-row run. Small writes now add up to 64 MB first; an import checkpoints after
        # answering (``Database.checkpoint``).
        cursor.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}")
        cursor.close()


class TextWithNul(ValueError):
    """A name, tag or filter with a NUL (0x00) character: no database column may hold one."""


def _named_parameters(parameters, context) -> Iterator[tuple[str | None, object]]:
    """(name, value) of every bound parameter, positional ones (SQLite's) named by the compiled statement."""
    compiled = getattr(context, "compiled", None)
    positions = getattr(compiled, "positiontup", None) or []
    for group in parameters if isinstance(parameters, list) else [parameters]:
        if isinstance(group, dict):
            yield from group.items()
        else:
            values = list(group or ())
            yield from zip([*positions, *[None] * len(values)][: len(values)], values, strict=True)


def _refuse_nul(_connection, _cursor, _statement, parameters, context, _executemany) -> None:
    for name, value in _named_parameters(parameters, context):
        if isinstance(value, str) and "\x00" in value:
            # A value written to a column is bound under the column's name; one in a filter is numbered.
            where = f"{name}: " if name and not name[-1].isdigit() else ""
            raise TextWithNul(f"{where}text cannot contain a NUL (0x00) character")


def _make_sqlite_directory(url: URL) -> None:
    """The SQLite file's directory, made its owner's alone when new: the file holds password hashes and every run
    (a directory that exists keeps its mode)."""
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(mode=0o700, parents=True, exist_ok=True)


def make_engine(database_url: str) -> Engine:
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        _make_sqlite_directory(url)
        engine = create_engine(url, connect_args={"check_same_thread": False}, json_deserializer=from_json)
        _configure_sqlite(engine)
    else:
        engine = create_engine(
            url,
            pool_pre_ping=True,
            json_deserializer=from_json,
            # A lock waited on as long as SQLite's busy timeout, then the same 503 (PostgreSQL waits forever).
            connect_args={"options": f"-c lock_timeout={BUSY_TIMEOUT_S * 1000}"},
        )
    event.listen(engine, "before_cursor_execute", _refuse_nul)
    _answer_busy_as_busy(engine)
    return engine


class Database:
    """One engine and the two kinds of session the app hands out."""

    def __init__(self, database_url: str):
        self.url = database_url
        self.engine = make_engine(database_url)
        self._write_engine = self.engine.execution_options(**{_BEGIN_IMMEDIATE: True})

    def read_session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    def write_session(self) -> Session:
        return Session(self._write_engine, expire_on_commit=False)

    @contextmanager
    def writing(self) -> Iterator[Session]:
        """A session whose work is committed on success and rolled back on any error."""
        with self.write_session() as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise

    def checkpoint(self) -> None:
        """Copy SQLite's WAL into the database file without waiting for readers or writers (PASSIVE); other
        databases have nothing to do."""
        if self.engine.dialect.name == "sqlite":
            with self.engine.connect() as connection:
                connection.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def dispose(self) -> None:
        self.engine.dispose()


def migration_engine(database_url: str) -> Engine:
    """The engine migrations run on, without a pool. On SQLite an upgrade's DDL is transactional, its
    transaction opens with BEGIN IMMEDIATE (a second server starting at the same time waits, up to the
    driver's 5 s busy timeout, for the first's upgrade, then finds the database at head) and foreign keys
    stay off: a table rebuilt by a batch migration is dropped and recreated under the rows that reference it.
    """
    engine = create_engine(database_url, poolclass=NullPool)
    if engine.dialect.name == "sqlite":
        _begin_sqlite_transactions_explicitly(engine)
    return engine.execution_options(**{_BEGIN_IMMEDIATE: True})


def alembic_config(database_url: str, migrations_dir: Path = MIGRATIONS_DIR) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir))
    # ConfigParser interpolation would read a '%' in a password as a placeholder.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def migrate(database_url: str, migrations_dir: Path = MIGRATIONS_DIR) -> None:
    """Bring the database to the newest schema (``alembic upgrade head``)."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        _make_sqlite_directory(url)
    command.upgrade(alembic_config(database_url, migrations_dir), "head")
