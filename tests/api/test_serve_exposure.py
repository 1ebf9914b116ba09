"""`emuplan serve` with sign-in off listens on loopback only, unless told explicitly; the compose file
starts a container with sign-in on, an allowed-hosts list and its port published on loopback."""

import pytest
import yaml
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.settings import Settings, open_listener_refusal
from paths import REPO_ROOT

REFUSAL = (
    "error: refusing to listen on 0.0.0.0 with sign-in off (EMUPLAN_AUTH=none): everyone who reaches the port "
    "could do everything. Turn sign-in on (EMUPLAN_AUTH=accounts, then `emuplan users add NAME --role "
    "admin`), listen on 127.0.0.1 (--host), or accept it with EMUPLAN_OPEN_WITHOUT_SIGN_IN=true.\n"
)


def test_serve_refuses_every_interface_with_sign_in_off_and_says_how(cli_env, monkeypatch):
    monkeypatch.setenv("EMUPLAN_ALLOWED_HOSTS", "localhost")
    refused = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "1"])
    assert refused.exit_code == 2
    assert refused.stderr == REFUSAL


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "fileserver.example.org"])
def test_beyond_loopback_is_refused_unless_accounts_or_the_explicit_setting(host: str):
    assert open_listener_refusal(Settings(auth="none", allowed_hosts=["x"]), host) is not None
    assert open_listener_refusal(Settings(auth="accounts", allowed_hosts=["x"]), host) is None
    assert open_listener_refusal(Settings(auth="none", open_without_sign_in=True, allowed_hosts=["x"]), host) is None


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.1.1", "::1", "[::1]", "localhost"])
def test_loopback_is_served_with_sign_in_off(host: str):
    assert open_listener_refusal(Settings(auth="none", allowed_hosts=["x"]), host) is None


def test_the_compose_file_starts_with_accounts_on_a_host_list_and_a_loopback_port():
    service = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]["emuplan"]
    environment = service["environment"]
    assert environment["EMUPLAN_AUTH"] == "accounts"
    assert environment["EMUPLAN_ALLOWED_HOSTS"] == "${EMUPLAN_ALLOWED_HOSTS:-localhost,127.0.0.1}"
    assert service["ports"] == ["${EMUPLAN_PUBLISH:-127.0.0.1:8000}:8000"]
