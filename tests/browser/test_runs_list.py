"""The runs list in Chromium: filtered by a tag, on a desktop a table with its units in the header, on a
phone a card of labelled lines per run that never scrolls sideways."""

import httpx2
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page

from live_server import LiveServer
from paths import SHARED_NCCL

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


def upload_log(server: LiveServer, file_name: str, **form: str) -> None:
    path = SHARED_NCCL / file_name
    response = httpx2.post(
        f"{server.url}/api/runs", files={"file": (path.name, path.read_bytes())}, data=form, timeout=60
    )
    assert response.status_code == 201, response.text


def whole_lines(cells) -> list[list[str]]:
    """Each cell's text as the lines it is drawn on (Range rects: one per line box the text spans)."""
    return cells.evaluate_all(
        """cells => cells.map(cell => {
            const lines = new Map();
            const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                for (let i = 0; i < node.data.length; i++) {
                    const range = document.createRange();
                    range.setStart(node, i);
                    range.setEnd(node, i + 1);
                    const top = Math.round(range.getBoundingClientRect().top);
                    lines.set(top, (lines.get(top) || '') + node.data[i]);
                }
            }
            return [...lines.keys()].sort((a, b) => a - b).map(top => lines.get(top).trim()).filter(Boolean);
        })"""
    )


def test_the_runs_list_sorts_by_verdict_platform_and_collective_and_keeps_dates_whole(
    live_server: LiveServer, page: Page, watch: PageWatch
):
    # Many tags on a long platform name squeeze the date column (it broke as "2026-11-" / "26 05:30").
    upload_log(live_server, "a100-16rank-allreduce-2.17.txt", name="A100 all-reduce", tags="nightly, fabric-a")
    upload_log(live_server, "v100-12gpu-broadcast-pre2.13.txt", name="V100 broadcast", platform="a100-hdr")
    upload_log(live_server, "b200-allreduce-2.17.6.txt", name="B200 all-reduce", platform="b200-400g", tags="gb")
    upload_log(live_server, "v100-12gpu-allreduce-pre2.13.txt", name="V100 all-reduce", platform="gb200-nvl72",
               tags="nightly, fabric-b, rail-3, after-firmware-update, second-attempt")  # fmt: skip
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/runs")
    names = page.locator("#runs-table td[data-label=Name] a")
    verdicts = page.locator("#runs-table td[data-label=Verdict]")
    assert names.all_inner_texts() == ["V100 all-reduce", "B200 all-reduce", "V100 broadcast", "A100 all-reduce"]
    dates = whole_lines(page.locator("#runs-table td[data-label='Imported (UTC)']"))
    assert [[len(line) for line in lines] for lines in dates] == [[10, 5]] * 4, dates  # "2026-11-26", "05:31"
    # A platform's name stays on one line (it broke as "gb200-" / "nvl72").
    platforms = whole_lines(page.locator("#runs-table td[data-label=Platform]"))
    assert platforms == [["gb200-nvl72"], ["b200-400g"], ["a100-hdr"], ["—"]], platforms
    assert widths(page)["page"] == DESKTOP["width"]
    screenshot(page, "runs-sorts-desktop")

    page.locator("#runs-table th a", has_text="Verdict").click()
    assert page.url.endswith("/runs?sort=verdict")
    assert verdicts.all_inner_texts() == ["fail", "degraded", "pass", "not judged"]
    assert names.all_inner_texts() == ["V100 all-reduce", "V100 broadcast", "B200 all-reduce", "A100 all-reduce"]
    assert page.locator("select[name=sort] option:checked").inner_text() == "by verdict, fail first"
    page.locator("#runs-table th a", has_text="Platform").click()
    assert page.url.endswith("/runs?sort=platform")
    assert names.all_inner_texts() == ["V100 broadcast", "B200 all-reduce", "V100 all-reduce", "A100 all-reduce"]
    # The filters stay with a sort chosen from the header.
    page.goto(f"{live_server.url}/runs?tag=nightly&sort=platform")
    page.locator("#runs-table th a", has_text="Collective").click()
    assert page.url.endswith("/runs?tag=nightly&sort=collective")
    assert names.all_inner_texts() == ["A100 all-reduce", "V100 all-reduce"]
    page.goto(f"{live_server.url}/runs?sort=collective")
    assert names.all_inner_texts() == ["A100 all-reduce", "B200 all-reduce", "V100 all-reduce", "V100 broadcast"]

    page.set_viewport_size(PHONE)
    fits = widths(page)
    # The headline "peak busbw 702.91 GB/s" beside its label made the card 11 px wider than the phone.
    assert (fits["page"], fits["table"]) == (PHONE["width"], page.locator(".table-wrap").evaluate("e => e.clientWidth"))
    assert fits["rightmost_cell"] <= PHONE["width"]
    dates = whole_lines(page.locator("#runs-table td[data-label='Imported (UTC)'] time"))
    assert [[len(line) for line in lines] for lines in dates] == [[16]] * 4, dates  # "2026-11-26 05:31"
    screenshot(page, "runs-sorts-phone")
    watch.assert_clean()
