"""The runs page's upload over a slow link in Chromium at 1280x800 and 390x844: a bar with its text (sent of the
total, the rate) while the bytes go out, then the run; a link that drops mid-body: the page says so, nothing
is left on the server; a job's files chosen together become one observed run."""

import contextlib
import re
import socket
import tempfile
import threading
import time
from urllib.parse import urlsplit

import httpx2
import pytest
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import CDPSession, Page, expect

from emuplan.results.budget import POOL
from inspector_job import INSPECTOR_JOB
from live_server import LiveServer

# Bytes a second the link sends: the 1.7 MB upload below takes about 3.4 s.
SLOW_LINK = 500_000


SLOW_CONDITIONS = {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": SLOW_LINK}


def slow_link(page: Page) -> CDPSession:
    """Chromium's own network emulation: the upload goes out at SLOW_LINK bytes a second."""
    session = page.context.new_cdp_session(page)
    session.send("Network.enable")
    session.send("Network.emulateNetworkConditions", SLOW_CONDITIONS)
    return session


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_an_upload_shows_its_progress_with_the_rate_then_opens_the_run(
    live_server: LiveServer, page: Page, watch: PageWatch, tmp_path, viewport
) -> None:
    big = tmp_path / "big-allreduce.csv"
    rows = "".join(f"{i},1048576,all_reduce,{1 + (i % 97) / 1000:.3f}\n" for i in range(55_000))
    big.write_text("iteration,size,collective,time_ms\n" + rows)
    page.set_viewport_size(viewport)
    page.goto(f"{live_server.url}/runs")
    slow_link(page)
    page.set_input_files("#upload-file", str(big))
    page.click("#upload-submit")
    expect(page.locator("#upload-status")).to_have_text("Uploading big-allreduce.csv…")
    text = page.locator("#upload-progress-text")
    # The whole body (the file and the form's fields): 1.7 MB; from 20 %, the rate is the link's.
    midway = re.compile(r"^big-allreduce\.csv: [01]\.\d of 1\.7 MB \([2-8]\d %\), (\d+\.\d) kB/s$")
    expect(text).to_have_text(midway)
    line, value, total, accessible = page.eval_on_selector(
        "#upload-progress",
        "bar => [document.getElementById('upload-progress-text').textContent, bar.value, bar.max, "
        "bar.getAttribute('aria-valuetext')]",
    )
    assert 0 < value < total and accessible == line
    assert 0.75 * SLOW_LINK < float(midway.match(line).group(1)) * 1000 < 1.25 * SLOW_LINK
    assert page.get_by_role("progressbar", name="upload progress").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    screenshot(page, f"runs-upload-progress-{viewport['width']}")
    page.wait_for_url(re.compile(r"/runs/1$"), timeout=60_000)
    expect(page.locator("#run-name")).to_have_text("big-allreduce.csv")
    watch.assert_clean()


def test_a_jobs_dumps_chosen_together_become_one_observed_run(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    page.goto(f"{live_server.url}/runs")
    page.fill("#upload-name", "typed before choosing")
    page.set_input_files("#upload-file", [str(path) for path in INSPECTOR_JOB])
    # A name names one run: several files are named by their file names.
    expect(page.locator("#upload-name")).to_be_disabled()
    expect(page.locator("#upload-chosen")).to_have_text(re.compile(r"^2 files \([\d,]+ bytes\): constructed-gpu-a"))
    page.click("#upload-submit")
    page.wait_for_url(re.compile(r"/runs/1$"))
    expect(page.locator("#run-name")).to_have_text("constructed-gpu-a-pid101.log and 1 more")
    watch.assert_clean()


class LinkThatDrops:
    """A TCP relay in front of the server that drops an upload's connection once CUT_AFTER bytes of its
    request went through: the link failing mid-body, seen from both ends."""

    CUT_AFTER = 300_000

    def __init__(self, server: LiveServer):
        address = urlsplit(server.url)
        self.target = (address.hostname, address.port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                browser, _ = self.listener.accept()
            except OSError:  # closed: the test is over
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._relay, args=(browser, upstream, True), daemon=True).start()
            threading.Thread(target=self._relay, args=(upstream, browser, False), daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket, request: bool) -> None:
        uploaded = None  # bytes of an upload's request relayed on this connection
        try:
            while chunk := source.recv(65536):
                if request and uploaded is None and b"POST /api/runs " in chunk:
                    uploaded = 0
                if uploaded is not None:
                    uploaded += len(chunk)
                    if uploaded > self.CUT_AFTER:
                        break
                sink.sendall(chunk)
        except OSError:
            pass
        for each in (source, sink):  # shutdown, not just close: the other relay may be blocked reading it
            with contextlib.suppress(OSError):
                each.shutdown(socket.SHUT_RDWR)
            each.close()

    def close(self) -> None:
        self.listener.close()


def test_an_upload_cut_off_mid_way_says_so_and_leaves_nothing(
    live_server: LiveServer, page: Page, watch: PageWatch, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))  # the server runs in this process
    big = tmp_path / "big-allreduce.csv"
    rows = "".join(f"{i},1048576,all_reduce,{1 + (i % 97) / 1000:.3f}\n" for i in range(55_000))
    big.write_text("iteration,size,collective,time_ms\n" + rows)
    link = LinkThatDrops(live_server)
    try:
        page.goto(f"{link.url}/runs")
        slow_link(page)
        page.set_input_files("#upload-file", str(big))
        page.click("#upload-submit")
        expect(page.locator("#upload-error")).to_have_text(
            "The upload did not reach the server (network error or the connection was closed); nothing was stored."
        )
    finally:
        link.close()
    expect(page.locator("#upload-progress-box")).to_be_hidden()
    expect(page.locator("#upload-submit")).to_be_enabled()
    deadline = time.monotonic() + 20
    while any(spool.iterdir()) or POOL.reserved:
        assert time.monotonic() < deadline, "the spool deleted and the budget released"
        time.sleep(0.01)
    assert httpx2.get(f"{live_server.url}/api/runs", timeout=30).json() == []
    watch.console_errors.remove("Failed to load resource: net::ERR_CONNECTION_RESET")  # the link dropping
    watch.assert_clean()
