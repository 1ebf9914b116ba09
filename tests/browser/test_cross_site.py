"""The cross-site write of the audit, replayed in Chromium: a page on another origin posts a run."""

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
import pytest
from playwright.sync_api import Page

from live_server import LiveServer

# What the audit's page did: a "simple" no-cors POST, which a browser sends without asking the server.
ATTACK_SCRIPT = """async (url) => {
  const body = new FormData();
  body.append("file", new Blob(["iteration,size,collective,time_ms\\n0,1024,all_reduce,1.5\\n"]), "x.csv");
  body.append("name", "planted by another site");
  await fetch(url, {mode: "no-cors", method: "POST", body});
}"""


class CatsPage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        body = b"<!doctype html><title>cute cats</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def other_site() -> Iterator[str]:
    """Another site on this machine: localhost is not the site 127.0.0.1, and its own port is its own origin."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), CatsPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_a_page_on_another_origin_cannot_create_a_run(
    live_server: LiveServer, other_site: str, page: Page, access_log: list[str]
) -> None:
    page.goto(other_site)
    page.evaluate(ATTACK_SCRIPT, live_server.url + "/api/runs")
    assert httpx2.get(live_server.url + "/api/runs").json() == []
    posts = [line for line in access_log if "POST /api/runs" in line]
    assert len(posts) == 1 and '"POST /api/runs HTTP/1.1" 403' in posts[0]
