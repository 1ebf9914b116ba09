"""``emuplan backup`` and ``emuplan restore``: the SQLite database copied while the server runs, and put
back (upgraded to this version's schema). PostgreSQL is refused with the pg_dump/pg_restore commands."""

from pathlib import Path
from typing import Annotated

import typer

from emuplan.cli.app import app, fail


@app.command()
def backup(file: Annotated[Path, typer.Argument(help="New file to write the copy to.")]) -> None:
    """Copy the SQLite database to FILE, consistent even while the server writes."""
    from emuplan.settings import get_settings
    from emuplan.store import backup as store_backup

    try:
        revision = store_backup.backup(get_settings().database_url, file)
    except store_backup.BackupError as error:
        fail(str(error))
    typer.echo(f"backed up to {file} ({file.stat().st_size:,} bytes, schema {revision})")


@app.command()
def restore(
    file: Annotated[Path, typer.Argument(help="A file `emuplan backup` wrote.")],
    yes: Annotated[bool, typer.Option("--yes", help="Replace the database without asking.")] = False,
) -> None:
    """Replace everything in the SQLite database with FILE, upgraded to this version's schema. FILE must be
    emuplan's own: a schema other than the migrations make (tables, columns, indexes, a trigger or view added)
    is refused, naming the difference, and the database is left as it was."""
    from emuplan.settings import get_settings
    from emuplan.store import backup as store_backup

    database_url = get_settings().database_url
    try:
        live = store_backup.sqlite_file(database_url)
        if not yes:
            typer.confirm(f"Replace every run, plan and account in {live} with {file}?", abort=True)
        revision, head = store_backup.restore(database_url, file)
    except store_backup.BackupError as error:
        fail(str(error))
    upgraded = f", upgraded from schema {revision} to {head}" if revision != head else f" (schema {head})"
    typer.echo(f"restored {live} from {file}{upgraded}")
