"""``emuplan serve``: run the dashboard with uvicorn."""

import errno
import os
import socket

import typer

from emuplan.cli.app import app, fail, open_database
from emuplan.wording import plural


def port_taken(host: str, port: int) -> str | None:
    """Why ``serve`` cannot listen on ``host``:``port`` (another server has it), or None. Bound as uvicorn
    binds (SO_REUSEADDR: a port a stopped server left in TIME_WAIT is free), then let go at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            return (
                f"port {port} on {host} is in use (another server answers there); "
                "choose another with --port or EMUPLAN_PORT"
            )
    return None


def dashboard_url(host: str, port: int) -> str:
    """The address to open: localhost for 127.0.0.1 and every-interface binds, an IPv6 address in brackets."""
    if host in ("127.0.0.1", "0.0.0.0", "::", ""):
        host = "localhost"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


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
    from emuplan.settings import get_settings, open_listener_refusal

    settings = get_settings()
    host = host or settings.host
    port = port or settings.port
    refusal = open_listener_refusal(settings, host)
    if refusal is not None:
        fail(refusal)
    # Checked before anything is printed: the URL would otherwise name another server, then uvicorn die.
    if taken := port_taken(host, port):
        fail(taken)
    # Migrated once here, before any worker starts, so that several workers never race to migrate.
    database = open_database()
    if settings.demo:  # first start: the demo's runs are measured here, with progress in this terminal
        load_demo(database, measure_locally=True)
    database.dispose()
    typer.echo(f"emuplan dashboard: {dashboard_url(host, port)}  (database: {settings.database_url})")
    typer.echo(sign_in_notice(settings.auth))
    # The options act as EMUPLAN_HOST and EMUPLAN_PORT for the app and its workers: the names it answers to by
    # default (EMUPLAN_ALLOWED_HOSTS unset) are those of the address it listens on, the machine's on 0.0.0.0.
    os.environ.update(EMUPLAN_HOST=host, EMUPLAN_PORT=str(port))
    get_settings.cache_clear()
    # Forwarded headers are believed from EMUPLAN_TRUSTED_PROXIES only (by the app), not from uvicorn's default
    # of any loopback client: a local process could otherwise sign in as any address.
    options = {"host": host, "port": port, "log_level": "info", "proxy_headers": False}
    if workers == 1:
        uvicorn.run(create_app(get_settings()), **options)
    else:  # each worker process builds its own app from the same EMUPLAN_* settings
        uvicorn.run("emuplan.main:create_app", factory=True, workers=workers, **options)
