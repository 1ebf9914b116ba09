"""`emuplan serve` on a port another server holds: says so before printing a URL that server would answer.
The URL it prints opens in a browser, for IPv6 addresses too."""

import socket

import pytest
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.cli.serve import dashboard_url

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


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://localhost:8000/"),
        ("0.0.0.0", "http://localhost:8000/"),
        ("::", "http://localhost:8000/"),
        ("::1", "http://[::1]:8000/"),
        ("fd00::5", "http://[fd00::5]:8000/"),
        ("dash.lab.example", "http://dash.lab.example:8000/"),
    ],
)
def test_the_printed_url_opens_in_a_browser(host: str, url: str):
    assert dashboard_url(host, 8000) == url
