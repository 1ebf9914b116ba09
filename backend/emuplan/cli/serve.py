"""``emuplan serve``: run the dashboard with uvicorn."""

import typer

from emuplan.cli.app import app, open_database
from emuplan.wording import plural


def sign_in_notice(auth: str) -> str:
    """What `serve` says about sign-in: who can do what, and the first step when no account exists yet."""
    if auth != "accounts":
        return "sign-in: off (EMUPLAN_AUTH=none): whoever reaches this port can do everything"
    from emuplan.store import accounts

    database = open_database()
    try:
        with database.read_session() as session:
            count = len(accounts.list_accounts(session))
    finally:
        database.dispose()
    if count == 0:
        return "sign-in: on, but no account exists yet: emuplan users add NAME --role admin"
    return f"sign-in: on, {plural(count, 'account')} (emuplan users list)"


@app.command()
def serve(
    host: str = typer.Option(None, help="Address to bind. Default: EMUPLAN_HOST or 127.0.0.1."),
    port: int = typer.Option(None, help="Port to listen on. Default: EMUPLAN_PORT or 8000."),
    workers: int = typer.Option(
        1,
        min=1,
        help="Server processes sharing the port and the database; measurements and their progress "
        "are in the database, so every one answers for all.",
    ),
) -> None:
    """Start the dashboard (migrates the database first) and print its URL."""
    import uvicorn

    from emuplan.demo import load_demo
    from emuplan.main import create_app
    from emuplan.settings import get_settings

    settings = get_settings()
    host = host or settings.host
    port = port or settings.port
    shown_host = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host
    # Migrated once here, before any worker starts, so that several workers never race to migrate.
    database = open_database()
    if settings.demo:  # first start: the demo's runs are measured here, with progress in this terminal
        load_demo(database, measure_locally=True)
    database.dispose()
    typer.echo(f"emuplan dashboard: http://{shown_host}:{port}/  (database: {settings.database_url})")
    typer.echo(sign_in_notice(settings.auth))
    # Forwarded headers are believed from EMUPLAN_TRUSTED_PROXIES only (by the app), not from uvicorn's default
    # of any loopback client: a local process could otherwise sign in as any address.
    options = {"host": host, "port": port, "log_level": "info", "proxy_headers": False}
    if workers == 1:
        uvicorn.run(create_app(settings), **options)
    else:  # each worker process builds its own app from the same EMUPLAN_* settings
        uvicorn.run("emuplan.main:create_app", factory=True, workers=workers, **options)
