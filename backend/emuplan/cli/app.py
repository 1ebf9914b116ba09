"""The Typer app every command module registers on, and helpers the commands share."""

import typer

from emuplan.settings import get_settings
from emuplan.store.db import Database, migrate

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


def open_database() -> Database:
    """The configured database, migrated to the newest schema."""
    settings = get_settings()
    migrate(settings.database_url, settings.migrations_dir)
    return Database(settings.database_url)
