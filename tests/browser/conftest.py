"""Debian's Chromium driven by Playwright against the real uvicorn server of ``live_server``. Missing
Chromium fails the tests: CI must never pass by skipping them."""

import logging
from collections.abc import Iterator

import pytest
from browser_support import CHROMIUM, CHROMIUM_ARGS, DESKTOP, PageWatch
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

# Playwright's 5 s default is tight for a page that imports torch on a loaded 2-core machine.
expect.set_options(timeout=15_000)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install the Debian package 'chromium' (make test does)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport=DESKTOP)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


@pytest.fixture
def watch(page: Page) -> PageWatch:
    return PageWatch(page)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def access_log() -> Iterator[list[str]]:
    """The lines uvicorn's access log writes while the test runs (after the app's filters)."""
    handler = _Collect()
    logger = logging.getLogger("uvicorn.access")
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)
