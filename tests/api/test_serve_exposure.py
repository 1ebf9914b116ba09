"""`emuplan serve` with sign-in off listens on loopback only, unless told explicitly; the compose file
starts a container with sign-in on, an allowed-hosts list and its port published on loopback. A server
listening beyond loopback serves the default loopback names (localhost) to this machine's connections only,
and answers to the name of the address it was told to listen on."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from emuplan.cli import app
from emuplan.main import create_app
from emuplan.settings import Settings, open_listener_refusal
from paths import REPO_ROOT
from ports import free_port

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


def test_any_host_name_with_sign_in_off_is_refused_even_on_loopback_unless_accepted():
    """A page open in the user's browser could otherwise reach it under a name of its own (DNS rebinding)."""
    assert open_listener_refusal(Settings(auth="none", allowed_hosts=["*"]), "127.0.0.1") == (
        "refusing to answer to every host name (EMUPLAN_ALLOWED_HOSTS=*) with sign-in off (EMUPLAN_AUTH=none): "
        "any web page open on this machine could rename itself to this server and do everything. List the names "
        "you type in EMUPLAN_ALLOWED_HOSTS, turn sign-in on (EMUPLAN_AUTH=accounts), or accept it with "
        "EMUPLAN_OPEN_WITHOUT_SIGN_IN=true."
    )
    assert open_listener_refusal(Settings(auth="accounts", allowed_hosts=["*"]), "127.0.0.1") is None
    accepted = Settings(auth="none", allowed_hosts=["*"], open_without_sign_in=True)
    assert open_listener_refusal(accepted, "127.0.0.1") is None


def test_the_compose_file_starts_with_accounts_on_a_host_list_and_a_loopback_port():
    service = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]["emuplan"]
    environment = service["environment"]
    assert environment["EMUPLAN_AUTH"] == "accounts"
    assert environment["EMUPLAN_ALLOWED_HOSTS"] == "${EMUPLAN_ALLOWED_HOSTS:-localhost,127.0.0.1}"
    assert service["ports"] == ["${EMUPLAN_PUBLISH:-127.0.0.1:8000}:8000"]


def test_the_image_alone_listens_for_its_published_port_with_sign_in_on():
    final_stage = (REPO_ROOT / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]
    (env_line,) = [line for line in final_stage.replace("\\\n", " ").splitlines() if line.startswith("ENV ")]
    environment = dict(setting.split("=", 1) for setting in env_line.split()[1:])
    assert environment == {
        "EMUPLAN_HOST": "0.0.0.0",
        "EMUPLAN_AUTH": "accounts",
        "EMUPLAN_ALLOWED_HOSTS": "localhost,127.0.0.1",
        "EMUPLAN_DATABASE_URL": "sqlite:////data/emuplan.sqlite3",
    }


def test_localhost_is_served_to_this_machine_only_when_listening_on_every_interface(database_url, monkeypatch):
    monkeypatch.delenv("EMUPLAN_ALLOWED_HOSTS")
    public = create_app(Settings(database_url=database_url, demo=False, host="0.0.0.0", auth="accounts"))
    remote = TestClient(public, client=("192.0.2.7", 50000))
    for name in ("localhost", "127.0.0.1", "[::1]"):
        refused = remote.get("/api/health", headers={"Host": f"{name}:8000"})
        assert refused.status_code == 400, name
        assert refused.json() == {
            "detail": f"Host '{name}:8000' is served only to connections from this machine, and this one comes "
            "from 192.0.2.7. Open the dashboard under the server's name; the operator lists the names in "
            "EMUPLAN_ALLOWED_HOSTS."
        }
    assert remote.get("/api/health", headers={"Host": f"{socket.gethostname()}:8000"}).status_code == 200
    for peer in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):  # the last: IPv4 on a dual-stack socket
        local = TestClient(public, client=(peer, 50000))
        assert local.get("/api/health", headers={"Host": "localhost:8000"}).status_code == 200, peer
    # Names the operator lists are served to whoever reaches the port (a container's published port
    # arrives from the bridge's address, not loopback).
    listed = create_app(Settings(database_url=database_url, demo=False, host="0.0.0.0", allowed_hosts=["localhost"]))
    bridge = TestClient(listed, client=("172.17.0.1", 50000))
    assert bridge.get("/api/health", headers={"Host": "localhost:8000"}).status_code == 200


def test_serve_answers_to_the_address_given_by_host(database_url, tmp_path: Path):
    """--host, not only EMUPLAN_HOST, decides the names served by default: here 127.0.0.2."""
    env = {key: value for key, value in os.environ.items() if key != "EMUPLAN_ALLOWED_HOSTS"}
    env.update(EMUPLAN_DATABASE_URL=database_url, EMUPLAN_DEMO="false")
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            [Path(sys.executable).with_name("emuplan"), "serve", "--host", "127.0.0.2", "--port", str(port)],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx2.get(f"http://127.0.0.2:{port}/api/health")
                break
            except httpx2.TransportError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"emuplan serve did not start:\n{log.read_text()}")
                time.sleep(0.2)
        assert health.status_code == 200, health.text
    finally:
        server.terminate()
        server.wait(timeout=20)
