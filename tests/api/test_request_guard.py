"""Only configured host names are served, and no other site makes the server write: through real HTTP."""

import socket

import httpx2
import pytest

from emuplan.settings import Settings
from live_server import LiveServer


def run_csv(name: str) -> bytes:
    """A small per-iteration file, different per name (an identical file is a duplicate: 409)."""
    last = sum(map(ord, name))
    return f"iteration,size,collective,time_ms\n0,1024,all_reduce,1.5\n1,1024,all_reduce,{last}.7\n".encode()


SEED_MODEL = b"import torch.nn as nn\n\nclass Tiny(nn.Module):\n    def __init__(self):\n        super().__init__()\n"


def post_run(server: LiveServer, headers: dict[str, str], name: str = "guarded") -> httpx2.Response:
    return httpx2.post(
        f"{server.url}/api/runs", files={"file": (f"{name}.csv", run_csv(name))}, data={"name": name}, headers=headers
    )


def run_names(server: LiveServer) -> list[str]:
    return [run["name"] for run in httpx2.get(f"{server.url}/api/runs").json()]


def test_a_host_name_the_operator_did_not_list_gets_400_and_no_redirect(live_server: LiveServer) -> None:
    for path in ("/api/runs", "/s/some-token", "/"):
        response = httpx2.get(live_server.url + path, headers={"Host": "attacker.example"}, follow_redirects=False)
        assert response.status_code == 400, path
        assert response.json() == {
            "detail": "Host 'attacker.example' is not served here. The operator lists the names this server "
            "answers to in EMUPLAN_ALLOWED_HOSTS."
        }
        assert "location" not in response.headers
    port = live_server.url.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST"):
        assert httpx2.get(live_server.url + "/api/health", headers={"Host": host}).status_code == 200, host


def test_a_write_from_another_origin_is_refused_with_403_and_stores_nothing(live_server: LiveServer) -> None:
    response = httpx2.post(
        f"{live_server.url}/api/models",
        files={"file": ("tiny.py", SEED_MODEL)},
        data={"model_class": "Tiny", "input_shape": "4"},
        headers={"Origin": "https://evil.example"},
    )
    assert response.status_code == 403
    assert response.json() == {
        "detail": "Refused a POST from another site (it comes from the page origin 'https://evil.example'): "
        "open the dashboard itself to do this."
    }
    assert httpx2.get(f"{live_server.url}/api/models").json() == []
    refused = {
        "cross-site": {"Sec-Fetch-Site": "cross-site"},
        # another port of the same host: the same site, another origin
        "same-site": {"Sec-Fetch-Site": "same-site", "Origin": live_server.url},
        "null-origin": {"Origin": "null"},
        "other-port": {"Origin": "http://127.0.0.1:1"},
    }
    for name, headers in refused.items():
        assert post_run(live_server, headers, name).status_code == 403, name
    assert run_names(live_server) == []


def test_the_pages_own_requests_and_the_cli_and_curl_keep_writing(live_server: LiveServer) -> None:
    allowed = {
        "same-origin": {"Sec-Fetch-Site": "same-origin", "Origin": live_server.url},
        "typed-in": {"Sec-Fetch-Site": "none"},
        "origin-only-header": {"Origin": live_server.url},
        "curl-or-cli": {},
    }
    for name, headers in allowed.items():
        assert post_run(live_server, headers, name).status_code == 201, name
    assert sorted(run_names(live_server)) == sorted(allowed)
    # Reading from another site is harmless (the browser keeps the answer from the page) and stays open.
    read = httpx2.get(f"{live_server.url}/api/runs", headers={"Sec-Fetch-Site": "cross-site"})
    assert read.status_code == 200


def test_default_allowed_hosts_are_the_bind_address_and_the_loopback_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMUPLAN_ALLOWED_HOSTS")
    assert Settings(host="dash.lab.example").allowed_hosts == ["dash.lab.example", "localhost", "127.0.0.1", "::1"]
    assert Settings().allowed_hosts == ["127.0.0.1", "localhost", "::1"]
    everywhere = Settings(host="0.0.0.0").allowed_hosts
    assert everywhere == list(dict.fromkeys([socket.gethostname(), socket.getfqdn(), "localhost", "127.0.0.1", "::1"]))
    monkeypatch.setenv("EMUPLAN_ALLOWED_HOSTS", "dash.lab.example, 10.0.0.5")
    assert Settings().allowed_hosts == ["dash.lab.example", "10.0.0.5"]
