"""A run's verdict in Chromium: first on its run page at 1280×800 and 390×844, its platform set from the page by
an editor, and in the runs list beside the platform."""

import httpx2
import pytest
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Browser, expect

from live_server import LiveServer
from paths import NCCL_TESTS

H100_LOG = NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"


def upload(server: LiveServer) -> int:
    answer = httpx2.post(f"{server.url}/api/runs", files={"file": (H100_LOG.name, H100_LOG.read_bytes())}, timeout=30)
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_verdict_leads_the_run_page_and_follows_its_platform(
    live_server: LiveServer, browser: Browser, viewport: dict
) -> None:
    run_id = upload(live_server)
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(f"{live_server.url}/runs/{run_id}")
    expect(page.locator("#verdict-status")).to_have_text("not judged")
    expect(page.locator("#verdict h2")).to_contain_text("no platform")
    expect(page.locator("#verdict-reasons li")).to_have_text(
        [
            "note · no platform: nothing is expected of the run; name the platform it ran on (the run page's "
            "Platform, emuplan import --platform or emuplan platforms assign, PATCH /api/runs/{id} platform)"
        ]
    )
    # An editor names a platform (under the verdict's fold): the page judges it again, here on DGX H100's NDR,
    # which this A3 Mega log never had (its 8 × 200 Gbit/s TCPXO carry half).
    expect(page.locator("#verdict-rules summary")).to_have_text("Platform: none set · how the verdict is judged")
    page.click("#verdict-rules summary")
    page.select_option("#platform-choice", "h100-ndr")
    page.click("#platform-submit")
    expect(page.locator("#verdict-status")).to_have_text("degraded")
    expect(page.locator("#verdict h2")).to_contain_text("on H100 SXM + NDR 400G")
    expect(page.locator("#verdict-reasons li").first).to_have_text(
        "degraded · all_reduce · 8,589,934,592 B · in-place: busbw 337.35 GB/s is 73.2 % of the expected 460.72 GB/s "
        "(NCCL nvls-tree/Simple bound by InfiniBand NDR 400G), below 80 % (the best size where bandwidth dominates)"
    )
    # The answer on the first screen, phone included.
    box = page.locator("#verdict-status").bounding_box()
    assert box is not None and box["y"] + box["height"] <= viewport["height"]
    # % of expected by the page's rule for percentages (0.1), as the reason says it.
    largest_in_place = page.locator(".sweep-table[data-variant='in-place'] tbody tr").last
    expect(largest_in_place.locator("[data-key=pct-of-expected]")).to_have_text("73.2")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"verdict-run-{'desktop' if viewport is DESKTOP else 'phone'}")
    page.goto(f"{live_server.url}/runs")
    row = page.locator("#runs-table tbody tr").first
    expect(row.locator("td[data-label=Verdict]")).to_have_text("degraded")
    expect(row.locator("td[data-label=Platform]")).to_have_text("h100-ndr")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    watch.assert_clean()
    page.close()
