"""The trend page in Chromium over the nightly series (tests/nightly.py): the what-changed table in the first
viewport at 1280×800 and 390×844 without sideways scrolling, and the charts mark the sixth night alone."""

from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect

from emuplan.store.db import Database
from live_server import LiveServer
from nightly import GIB, PLATFORM, import_nights

TREND = f"/trend?sizes={GIB}"  # the newest run's platform and collective


def in_first_viewport(page: Page, selector: str) -> bool:
    return page.evaluate(
        "(selector) => document.querySelector(selector).getBoundingClientRect().bottom <= window.innerHeight", selector
    )


def no_page_overflow(page: Page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def marked_runs(page: Page) -> dict[str, list]:
    """Per chart, the times of the runs marked as regressions."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#trend-charts .chart')].map((chart) => [
             chart.id, chart.data.filter((trace) => trace.name === 'regression').flatMap((trace) => trace.x)]))"""
    )


def test_the_sixth_night_is_marked_on_its_chart_and_no_other(
    live_server: LiveServer, database: Database, page: Page, watch: PageWatch
) -> None:
    ids = import_nights(database)
    page.goto(live_server.url + TREND)
    expect(page.locator("nav[aria-label=main] a[aria-current=page]")).to_have_text("Trend")
    expect(page.locator("#trend-summary")).to_have_text(
        f"quiet: run #{ids[7]} stays within the noise band of the runs before it on every figure"
    )
    expect(page.locator("#trend-charts")).to_have_attribute("data-drawn", "true")
    assert marked_runs(page) == {
        "trend-peak_busbw_gbps": [],
        "trend-average_busbw_gbps": [],
        f"trend-busbw_gbps@{GIB}": ["2026-11-06T02:00:00+00:00"],
    }
    assert in_first_viewport(page, "#what-changed")
    screenshot(page, "trend-desktop")
    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator("#trend-charts")).to_have_attribute("data-drawn", "true")
    assert in_first_viewport(page, "#what-changed")
    assert no_page_overflow(page)
    screenshot(page, "trend-phone")
    watch.assert_clean()


def test_the_morning_after_the_sixth_night_leads_with_its_regression(
    live_server: LiveServer, database: Database, page: Page, watch: PageWatch
) -> None:
    import_nights(database, 6)
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(live_server.url + TREND)
        expect(page.locator("#trend-summary")).to_have_text("busbw at 1 GiB regression: -12.0 % from the median")
        first = page.locator("#what-changed-table tbody tr").first
        expect(first.locator("td")).to_have_text(["busbw at 1 GiB regression", "262.12", "-11.7", "-12.0"])
        assert in_first_viewport(page, "#what-changed-table")
        assert no_page_overflow(page)
        # The whole table shows: it does not scroll sideways inside its frame either.
        assert page.evaluate(
            "(t) => t.scrollWidth <= t.parentElement.clientWidth", page.locator("#what-changed-table").element_handle()
        )
        expect(page.locator("#trend-charts")).to_have_attribute("data-drawn", "true")
    # The filters stay in the URL: narrowing by tag keeps the platform, collective and sizes.
    page.fill("#trend-filters input[name=tag]", "nightly")
    page.click("#trend-filters button[type=submit]")
    expect(page).to_have_url(
        f"{live_server.url}/trend?platform={PLATFORM}&collective=all_reduce&tag=nightly&ranks=&sizes={GIB}"
    )
    expect(page.locator("#trend-summary")).to_have_text("busbw at 1 GiB regression: -12.0 % from the median")
    screenshot(page, "trend-regression-phone")
    watch.assert_clean()
