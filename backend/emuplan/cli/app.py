"""The Typer app every command module registers on, and helpers the commands share.

Every command module is imported for every command (``--help`` lists them all), so a command module
imports at its top only what its options need (typer, enums, constants for the help text) and
imports the rest inside the command: torch, scipy, SQLAlchemy, FastAPI, uvicorn, Alembic and the
store take seconds to import and most commands need none of them.
``tests/unit/test_cli_imports.py`` keeps it so.
"""

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from emuplan.store.db import Database

app = typer.Typer(
    name="emuplan",
    help="Plan KCCB collective-communication emulations from model definitions and analyse their results.\n\n"
    "Settings come from EMUPLAN_* environment variables (EMUPLAN_DATABASE_URL, ...).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def main() -> None:
    """Plan KCCB collective-communication emulations from model definitions and analyse their results."""


def fail(message: str) -> None:
    """Every command's way out on bad input or a refused request: the message on stderr, exit status 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def open_database() -> "Database":
    """The configured database, migrated to the newest schema."""
    from emuplan.settings import get_settings
    from emuplan.store.db import Database, migrate

    settings = get_settings()
    migrate(settings.database_url, settings.migrations_dir)
    return Database(settings.database_url)
