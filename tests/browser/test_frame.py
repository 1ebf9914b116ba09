"""The page frame in a real browser: navigation, no CSP violations, both viewport widths."""

from browser_support import PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect

from live_server import LiveServer


def test_home_explains_the_tool_with_no_console_errors(live_server: LiveServer, page: Page, watch: PageWatch) -> None:
    page.goto(live_server.url + "/")
    expect(page.locator("h1")).to_contain_text("Plan KCCB collective emulations")
    expect(page.locator("nav[aria-label=main] a")).to_have_text(["Home", "Plan", "Runs", "Compare", "API"])
    screenshot(page, "home-empty-desktop")
    page.set_viewport_size(PHONE)
    page.reload()
    # Nothing wider than the phone: no horizontal scrolling of the whole page.
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "home-empty-phone")
    watch.assert_clean()
