"""The runs list in Chromium: filtered by a tag, on a desktop a table with its units in the header, on a
phone a card of labelled lines per run that never scrolls sideways."""

import httpx2
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page

from live_server import LiveServer

LONG_NAME = "allreduce sweep on fabric 0 with a long run name"
LONG_TAG = "a-rather-long-tag-name-for-wrapping"
# The labels of a run's cells as a phone shows them (its empty Plan cell left out).
PHONE_LABELS = [
    "Name",
    "Collective",
    "Sizes",
    "Ranks × hosts",
    "Headline",
    "Verdict",
    "Platform",
    "Tags",
    "Imported (UTC)",
]


def upload(server: LiveServer, name: str, tags: str) -> None:
    csv = f"iteration,size,time_ms,label\n0,8,1,{name}\n1,8,2,{name}\n".encode()
    data = {"name": name, "strategy": "data", "tags": tags}
    response = httpx2.post(f"{server.url}/api/runs", files={"file": ("r.csv", csv)}, data=data, timeout=30)
    assert response.status_code == 201, response.text


def widths(page: Page) -> dict[str, float]:
    return page.evaluate(
        """() => ({
            page: document.documentElement.scrollWidth,
            table: document.querySelector('#runs-table').parentElement.scrollWidth,
            rightmost_cell: Math.max(...[...document.querySelectorAll('#runs-table td')].map(
                cell => cell.getBoundingClientRect().right)),
        })"""
    )


def test_a_tag_filtered_runs_list_fits_a_desktop_and_a_phone(live_server: LiveServer, page: Page, watch: PageWatch):
    upload(live_server, LONG_NAME, f"Nightly, {LONG_TAG}")
    upload(live_server, "run b", "nightly")
    upload(live_server, "untagged run", "")
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/runs?tag=NIGHTLY")
    headers = page.locator("#runs-table thead th").all_inner_texts()
    assert headers == [
        "", "Name", "Collective", "Sizes", "Ranks × hosts", "Headline\nby p50 · busbw", "Verdict", "Platform",
        "Tags", "Plan", "Imported (UTC)",
    ]  # fmt: skip
    # Two samples of one size: a size sweep, headlined by its peak busbw (none: no collective, no ranks).
    assert page.locator("#runs-table td.headline").all_inner_texts() == ["peak busbw —", "peak busbw —"]
    assert page.locator("#runs-table tbody a").all_inner_texts() == ["run b", LONG_NAME]
    desktop = widths(page)
    assert (desktop["page"], desktop["table"]) == (
        DESKTOP["width"],
        page.locator(".table-wrap").evaluate("e => e.clientWidth"),
    )
    # A short tag stays whole on one line (it broke letter by letter), the long one wraps inside its cell, and the
    # name keeps a line of words.
    badges = page.locator("#runs-table td[data-label=Tags] .badge")
    heights = {badge.inner_text(): badge.bounding_box()["height"] for badge in badges.all()}
    assert heights["nightly"] == heights["Nightly"] < heights[LONG_TAG]
    assert page.locator("#runs-table td[data-label=Name]").first.bounding_box()["width"] >= 11 * 16
    screenshot(page, "runs-tag-desktop")

    page.set_viewport_size(PHONE)
    long_row = page.locator("#runs-table tbody tr").last  # the long name and tag, its Plan cell empty
    labels = long_row.evaluate(
        """row => [...row.querySelectorAll('td[data-label]')]
            .filter(cell => getComputedStyle(cell).display !== 'none')
            .map(cell => getComputedStyle(cell, '::before').content)"""
    )
    assert labels == [f'"{label}"' for label in PHONE_LABELS]
    assert page.locator("#runs-table thead").bounding_box()["width"] <= 1  # read by screen readers only
    fits = widths(page)
    assert (fits["page"], fits["table"]) == (PHONE["width"], page.locator(".table-wrap").evaluate("e => e.clientWidth"))
    assert fits["rightmost_cell"] <= PHONE["width"]
    screenshot(page, "runs-tag-phone")
    watch.assert_clean()
