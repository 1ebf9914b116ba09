"""A huge run's Collective form in Chromium (its stored tables past EMUPLAN_STREAMED_IMPORT_ABOVE_BYTES, 1 byte
here): the relabel job's stage and progress shown under the form with a Cancel button; cancelled, the form says
the run is unchanged; left to run, the page comes back relabelled."""

import re
from collections.abc import Iterator

import httpx2
import pytest
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect

from emuplan.settings import Settings
from fixtures.generate_results import per_iteration_table, write_csv
from live_server import LiveServer, start_server, stop_server


@pytest.fixture
def huge_run_server(database_url: str, tmp_path) -> Iterator[tuple[LiveServer, int]]:
    """A server where every run is huge, with a run of 1,000,000 rows: its job takes over a second, the page's
    clicks tens of milliseconds."""
    live = start_server(Settings(database_url=database_url, demo=False, streamed_import_above_bytes=1))
    path = tmp_path / "iterations.csv"
    write_csv(per_iteration_table(1_000_000, seed=3), path)
    answer = httpx2.post(
        live.url + "/api/runs", files={"file": (path.name, path.read_bytes(), "text/csv")}, timeout=120
    )
    yield live, answer.json()["id"]
    stop_server(live)


def test_the_collective_form_follows_the_relabel_job(huge_run_server, page: Page, watch: PageWatch) -> None:
    live, run_id = huge_run_server
    for viewport, name in ((PHONE, "phone"), (DESKTOP, "desktop")):
        page.set_viewport_size(viewport)
        page.goto(f"{live.url}/runs/{run_id}")
        page.select_option("#relabel-to", "all_gather")
        page.click("#relabel-submit")
        status = page.locator("#relabel .relabel-job [role=status]")
        expect(status).to_have_text(
            re.compile(r"^(Starting|Reading the stored tables: \d+ % of [\d.]+ MiB|Computing the statistics)…$")
        )
        page.click("#relabel .relabel-job button")
        expect(page.locator("#relabel-error")).to_have_text("Cancelled: the run is unchanged.")
        expect(page.locator("#relabel .relabel-job")).to_have_count(0)
        assert page.evaluate("document.documentElement.scrollWidth") == viewport["width"]
        screenshot(page, f"run-relabel-cancelled-{name}")
        assert page.locator("#relabel-submit").is_enabled()

    page.select_option("#relabel-to", "all_gather")
    page.click("#relabel-submit")
    expect(page.locator("#relabel .relabel-job [role=status]")).to_be_visible()
    screenshot(page, "run-relabel-job-desktop")
    expect(page.locator(".note", has_text="collective set after import: all_reduce → all_gather")).to_have_count(
        1, timeout=120_000
    )
    watch.assert_clean()
