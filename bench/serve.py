"""`emuplan serve` in a subprocess for the benches that go through real HTTP, as a user's browser or
script does."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def server_env(directory: str, **settings: str) -> dict[str, str]:
    """The environment of `emuplan serve` (and of CLI commands) on ``directory``'s database, no demo runs;
    ``settings`` are further EMUPLAN_* variables."""
    database = {"EMUPLAN_DATABASE_URL": f"sqlite:///{directory}/bench.sqlite3", "EMUPLAN_DEMO": "false"}
    return {**os.environ, **database, **settings}


def start_server(directory: str, **settings: str) -> tuple[subprocess.Popen, str]:
    """A server on a fresh SQLite file in ``directory`` with the default settings but ``settings``; returns
    the process and its base URL once it answers."""
    port = free_port()
    env = server_env(directory, **settings)
    emuplan = str(Path(sys.executable).with_name("emuplan"))
    server = subprocess.Popen(
        [emuplan, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(f"{base}/api/health", timeout=1)
            return server, base
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("emuplan serve did not answer within 60 s")


def stop_server(server: subprocess.Popen) -> None:
    server.terminate()
    server.wait(timeout=30)
