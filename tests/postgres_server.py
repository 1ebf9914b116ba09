"""A throwaway PostgreSQL cluster from Debian's ``postgresql`` package, for the tests that run on both
databases: ``initdb`` into a temporary directory, ``pg_ctl start`` on a free port with its unix socket
in that directory, stopped and deleted at the end. initdb refuses to run as root, so as root the
cluster belongs to ``nobody``.

Alembic migrates one template database once; each test gets ``CREATE DATABASE ... TEMPLATE`` of it,
a file copy on the server (measured: ~0.1 s to create, ~0.1 s to drop).
"""

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import psycopg

from emuplan.store.db import migrate
from ports import free_port

# Debian keeps the server programs out of PATH, one directory per major version.
DEBIAN_SERVER_DIRS = "/usr/lib/postgresql/*/bin"
CLUSTER_OWNER = "nobody"
SUPERUSER = "postgres"
TEMPLATE = "emuplan_template"
# A test cluster needs no durability: a crash only loses a throwaway database.
SERVER_OPTIONS = ("-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off", "-c max_connections=200")


def server_program(name: str) -> Path:
    """``initdb``/``pg_ctl`` of the newest PostgreSQL installed; a clear failure when there is none."""
    found = sorted(Path("/").glob(DEBIAN_SERVER_DIRS.lstrip("/") + f"/{name}"), key=lambda p: int(p.parts[-3]))
    if found:
        return found[-1]
    on_path = shutil.which(name)
    if on_path is None:
        raise RuntimeError(f"PostgreSQL's {name} is missing: install the Debian package 'postgresql' (make test does)")
    return Path(on_path)


def _as_owner(command: list[str]) -> list[str]:
    return ["runuser", "-u", CLUSTER_OWNER, "--", *command] if os.geteuid() == 0 else command


@dataclass
class PostgresServer:
    directory: Path
    port: int
    _names = count()

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{SUPERUSER}@/{database}?host={self.directory}&port={self.port}"

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(
            host=str(self.directory), port=self.port, user=SUPERUSER, dbname="postgres", autocommit=True
        )

    def create_database(self, template: str | None = None) -> str:
        """A new, empty database (a copy of ``template`` when given); its name."""
        name = f"test_{next(self._names)}"
        with self.admin() as connection:
            connection.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return name

    def drop_database(self, name: str) -> None:
        with self.admin() as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def start_postgres() -> PostgresServer:
    directory = Path(tempfile.mkdtemp(prefix="emuplan-pg-"))
    if os.geteuid() == 0:
        owner = pwd.getpwnam(CLUSTER_OWNER)
        os.chown(directory, owner.pw_uid, owner.pw_gid)
    server = PostgresServer(directory, free_port())
    subprocess.run(
        _as_owner(
            [str(server_program("initdb")), "-D", str(server.data_dir), "-U", SUPERUSER, "--auth=trust"]
            + ["--encoding=UTF8", "--locale=C", "--no-sync"]
        ),
        check=True,
        capture_output=True,
    )
    options = " ".join((f"-p {server.port}", f"-k {directory}", "-c listen_addresses=127.0.0.1", *SERVER_OPTIONS))
    subprocess.run(
        _as_owner(
            [str(server_program("pg_ctl")), "start", "-w", "-D", str(server.data_dir), "-l", str(directory / "log")]
            + ["-o", options]
        ),
        check=True,
        capture_output=True,
    )
    with server.admin() as connection:
        connection.execute(f'CREATE DATABASE "{TEMPLATE}"')
    migrate(server.url(TEMPLATE))
    return server


def stop_postgres(server: PostgresServer) -> None:
    subprocess.run(
        _as_owner([str(server_program("pg_ctl")), "stop", "-D", str(server.data_dir), "-m", "immediate"]),
        check=True,
        capture_output=True,
    )
    shutil.rmtree(server.directory, ignore_errors=True)
