"""A real uvicorn server on a free loopback port, for the tests about what goes over HTTP."""

import threading
import time
from dataclasses import dataclass, field

import uvicorn

from emuplan.main import create_app
from emuplan.settings import Settings
from ports import free_port


@dataclass
class LiveServer:
    url: str
    settings: Settings
    server: uvicorn.Server
    thread: threading.Thread = field(repr=False)


def start_server(settings: Settings) -> LiveServer:
    port = free_port()
    # As `emuplan serve` runs it: forwarded headers count only from EMUPLAN_TRUSTED_PROXIES, which the app handles.
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="info", lifespan="on", proxy_headers=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return LiveServer(f"http://127.0.0.1:{port}", settings, server, thread)


def stop_server(live: LiveServer) -> None:
    live.server.should_exit = True
    live.thread.join(timeout=10)
