"""The page frame in a real browser: navigation, no CSP violations, both viewport widths."""

from browser_support import PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect

from live_server import LiveServer


def test_home_explains_the_tool_with_no_console_errors(live_server: LiveServer, page: Page, watch: PageWatch) -> None:
    page.goto(live_server.url + "/")
    expect(page.locator("h1")).to_contain_text("Plan KCCB collective emulations")
    expect(page.locator("nav[aria-label=main] a")).to_have_text(
        ["Home", "Plan", "Runs", "Compare", "Trend", "Platforms", "API"]
    )
    screenshot(page, "home-empty-desktop")
    page.set_viewport_size(PHONE)
    page.reload()
    # Nothing wider than the phone: no horizontal scrolling of the whole page.
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "home-empty-phone")
    watch.assert_clean()


def test_api_docs_load_swagger_ui_from_this_server_under_the_strict_csp(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(live_server.url + "/docs")
    # Every operation of /openapi.json is listed, e.g. the run upload.
    expect(page.locator(".opblock-summary-path[data-path='/api/runs']").first).to_be_visible()
    assert page.locator(".opblock").count() == len(
        [op for path in page.request.get(live_server.url + "/openapi.json").json()["paths"].values() for op in path]
    )
    assert [url for url in requested if not url.startswith(live_server.url)] == []
    screenshot(page, "api-docs-desktop")
    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator(".opblock").first).to_be_visible()
    screenshot(page, "api-docs-phone")
    watch.assert_clean()
