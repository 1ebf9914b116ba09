"""`emuplan serve` on a port another server holds: says so before printing a URL that server would answer."""

import socket

from typer.testing import CliRunner

from emuplan.cli import app

runner = CliRunner()


def test_serve_on_a_busy_port_names_the_options_and_prints_no_url(cli_env):
    with socket.socket() as other_server:
        other_server.bind(("127.0.0.1", 0))
        other_server.listen()
        port = other_server.getsockname()[1]
        result = runner.invoke(app, ["serve", "--host", "127.0.0.1", "--port", str(port)])
    assert result.exit_code == 2
    assert result.output == (
        f"error: port {port} on 127.0.0.1 is in use (another server answers there); "
        "choose another with --port or EMUPLAN_PORT\n"
    )
