"""When a run was measured, from the pages in Chromium at 1280x800 and 390x844, in a browser in Berlin (UTC+1 in
November): the upload form's and the edit form's time is the browser's own, sent to the API in UTC, and the run
page says it in UTC."""

from collections.abc import Iterator

import httpx2
import pytest
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Browser, Page, expect

from live_server import LiveServer
from paths import SHARED_NCCL

A100 = SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"


@pytest.fixture
def berlin_page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=DESKTOP, timezone_id="Europe/Berlin")
    yield context.new_page()
    context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_time_a_run_was_measured_is_the_browsers_own_and_stored_in_utc(
    live_server: LiveServer, berlin_page: Page, viewport
) -> None:
    page, watch = berlin_page, PageWatch(berlin_page)
    page.set_viewport_size(viewport)
    page.goto(f"{live_server.url}/runs")
    page.set_input_files("#upload-file", [str(A100)])
    page.fill("#upload-measured-at", "2026-11-03T02:00")
    page.click("#upload-submit")
    page.wait_for_url(f"{live_server.url}/runs/1")
    expect(page.locator("#run-measured-at")).to_have_text("2026-11-03 01:00 UTC")
    assert httpx2.get(f"{live_server.url}/api/runs/1", timeout=30).json()["measured_at"] == "2026-11-03T01:00:00+00:00"

    page.click("#manage-edit summary")
    page.fill("#manage-form input[name=measured_at]", "2026-11-04T09:30")
    page.click("#manage-save")
    expect(page.locator("#run-measured-at")).to_have_text("2026-11-04 08:30 UTC")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    screenshot(page, f"run-measured-at-{viewport['width']}")
    watch.assert_clean()
