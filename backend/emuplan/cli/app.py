"""The Typer app every command module registers on, and helpers the commands share.

Every command module is imported for every command (``--help`` lists them all), so a command module
imports at its top only what its options need (typer, enums, constants for the help text, from
plain-data modules such as ``workload.plan_options`` and ``measure.options``) and imports the rest
inside the command: torch, scipy, SQLAlchemy, FastAPI, uvicorn, Alembic and the store take seconds to
import and most commands need none of them; pydantic's models and the planner a tenth of a second.
``tests/unit/test_cli_imports.py`` keeps it so.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import click
import typer
from typer.core import TyperGroup

from emuplan.cli.failure import fail  # the commands import it from here, with the app

if TYPE_CHECKING:
    from sqlmodel import Session

    from emuplan.cli.remote import RemoteServer
    from emuplan.store.db import Database

T = TypeVar("T")

# The order `emuplan --help` lists the commands in: a user's journey (plan, import, read, compare, judge, follow over
# time), then what manages the stored items, then measuring and simulating, then the server and its administration.
JOURNEY = (
    "plan",
    "import",
    "stats",
    "compare",
    "check",
    "trend",
    "runs",
    "plans",
    "comparisons",
    "relabel",
    "observed",
    "export-kccb",
    "export-workload",
    "measure",
    "simulate",
    "platforms",
    "serve",
    "users",
    "backup",
    "restore",
)


class JourneyOrder(TyperGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        # A command missing from JOURNEY is listed after it rather than hidden.
        names = super().list_commands(ctx)
        return sorted(names, key=lambda name: JOURNEY.index(name) if name in JOURNEY else len(JOURNEY))


app = typer.Typer(
    name="emuplan",
    cls=JourneyOrder,
    help="Plan KCCB collective-communication emulations from model definitions and analyse their results.\n\n"
    "Settings come from EMUPLAN_* environment variables (EMUPLAN_DATABASE_URL, ...).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


# Set by the callback below for the command that follows: import, runs, plans, comparisons, stats, compare,
# export-workload and plan --save then talk to that server instead of the local database.
_remote: "RemoteServer | None" = None


@app.callback()
def main(
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            envvar="EMUPLAN_SERVER",
            help="A remote emuplan, e.g. https://host:8000: import, runs, plans, comparisons, stats, compare, "
            "export-workload and plan --save use its API instead of the local database.",
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="EMUPLAN_TOKEN",
            help="API token for --server when it has sign-in on (/account or emuplan users token). The "
            "variable keeps it out of the shell history.",
        ),
    ] = None,
) -> None:
    """Plan KCCB collective-communication emulations from model definitions and analyse their results."""
    global _remote
    if server is None:
        _remote = None
        return
    if not server.startswith(("http://", "https://")):
        raise typer.BadParameter(f"{server!r}: give the server's URL, e.g. https://host:8000", param_hint="--server")
    from emuplan.cli.remote import RemoteServer

    _remote = RemoteServer(server, token)


def remote_server() -> "RemoteServer | None":
    """The server given by --server / EMUPLAN_SERVER, or None: work on the local database."""
    return _remote


def open_database() -> "Database":
    """The configured database, migrated to the newest schema."""
    from emuplan.settings import get_settings
    from emuplan.store.db import Database, migrate

    settings = get_settings()
    migrate(settings.database_url, settings.migrations_dir)
    return Database(settings.database_url)


def in_store(action: Callable[["Session"], T], *, write: bool = False) -> T:
    """``action(session)`` on the configured database (one committed transaction when ``write``); a domain
    error (a ``LookupError``: not found; a ``ValueError``: bad input) exits 2 with its message."""
    database = open_database()
    try:
        with database.writing() if write else database.read_session() as session:
            return action(session)
    except (LookupError, ValueError) as error:
        fail(str(error))
    finally:
        database.dispose()
