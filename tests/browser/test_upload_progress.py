"""The runs page's upload over a slow link in Chromium at 1280x800 and 390x844: a bar with its text (sent of the
total, the rate) while the bytes go out, then the run; a job's files chosen together become one observed run."""

import re

import pytest
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect

from live_server import LiveServer
from paths import RESULTS

INSPECTOR = [
    RESULTS / "nccl-inspector" / name for name in ("constructed-gpu-a-pid101.log", "constructed-gpu-b-pid202.log")
]
# Bytes a second the link sends: the 1.7 MB upload below takes about 3.4 s.
SLOW_LINK = 500_000


def slow_link(page: Page) -> None:
    """Chromium's own network emulation: the upload goes out at SLOW_LINK bytes a second."""
    session = page.context.new_cdp_session(page)
    session.send("Network.enable")
    conditions = {"offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": SLOW_LINK}
    session.send("Network.emulateNetworkConditions", conditions)


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
    page.set_input_files("#upload-file", [str(path) for path in INSPECTOR])
    # A name names one run: several files are named by their file names.
    expect(page.locator("#upload-name")).to_be_disabled()
    expect(page.locator("#upload-chosen")).to_have_text(re.compile(r"^2 files \([\d,]+ bytes\): constructed-gpu-a"))
    page.click("#upload-submit")
    page.wait_for_url(re.compile(r"/runs/1$"))
    expect(page.locator("#run-name")).to_have_text("constructed-gpu-a-pid101.log and 1 more")
    watch.assert_clean()
