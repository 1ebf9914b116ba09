"""The cost of a training step in Chromium: the demo comparison leads with it at 1280×800 and 390×844, a
plan picked for a run changes it, and Save and share keeps the assumptions and plans the page shows."""

import re
from collections.abc import Iterator

import httpx2
import pytest
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Browser, Page, expect

from emuplan.settings import Settings
from live_server import LiveServer, start_server, stop_server

# The generated demo at p50 (tests/unit/test_step_cost.py computes them from the CSVs), in ms.
RANKING = (
    "Communication per training step (p50, lower is better): "
    "#1 data 14.00 ms < #3 pipeline 86.16 ms < #2 tensor 100.03 ms"
)


@pytest.fixture
def demo_server(database_url: str) -> Iterator[LiveServer]:
    live = start_server(Settings(database_url=database_url, demo=True))
    yield live
    stop_server(live)


def wait_for_charts(page: Page) -> None:
    page.wait_for_selector("body[data-charts-drawn='true']", state="attached", timeout=30000)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_demo_comparison_opens_with_what_a_step_costs(
    demo_server: LiveServer, browser: Browser, viewport: dict
) -> None:
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(demo_server.url + "/comparisons/1")
    wait_for_charts(page)
    ranking = page.locator("#step-cost-ranking")
    expect(ranking).to_have_text(RANKING)
    # The answer is on the first screen, on a phone too.
    box = ranking.bounding_box()
    assert box is not None and box["y"] + box["height"] <= viewport["height"], box
    # Above the notices of what the runs are and what the comparison was saved with, not under them.
    for notice in (".generated-note", "#saved-with"):
        assert box["y"] + box["height"] < page.locator(notice).first.bounding_box()["y"], notice
    rows = page.locator("#step-cost-table tbody tr")
    expect(rows).to_have_count(3)
    # Run and plan | p50 / step (ms) | × baseline | p99 / step (ms) | collectives | bytes | training (s)
    expect(rows.nth(1).locator("td")).to_have_text(
        [re.compile(r"^#2 Demo tensor parallel"), "100.03", "7.15×", "122.98", "1", "25,755,648", "0.800"]
    )
    expect(page.locator("#step-cost-table thead th").nth(1)).to_have_text("p50 / step (ms)")
    expect(page.locator("#step-cost-chart .barlayer .trace")).to_have_count(2)  # all_reduce and all_gather
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"step-cost-demo-{'desktop' if viewport is DESKTOP else 'phone'}")
    watch.assert_clean()
    page.close()


def test_a_plan_picked_for_a_run_is_kept_when_the_comparison_is_shared(demo_server: LiveServer, page: Page) -> None:
    watch = PageWatch(page)
    page.goto(demo_server.url + "/compare?runs=1,3&link_gbps=7200&latency_us=2")
    wait_for_charts(page)
    # Read the pipeline run (#3) with the data plan (#1): its one 971,048-byte all-reduce lies past the
    # pipeline run's largest size, so its time is extrapolated and the table says so.
    page.select_option("select[data-plan-for='3']", "1")
    page.click("#apply-plans")
    page.wait_for_url(re.compile(r"plans=3:1"))
    wait_for_charts(page)
    assert "link_gbps=7200" in page.url
    expect(page.locator("#step-cost-table tbody tr").nth(1)).to_contain_text(
        "plan #1 Seed MLP: data parallel (tutorial) (chosen here, 8 steps)"
    )
    expect(page.locator("#step-cost-table tbody tr").nth(1)).to_contain_text("1 read off the curve")
    page.fill("#save-name", "NVLink what-if")
    page.click("#save-and-share")
    link = page.locator("#share-result input, #share-result code, #share-result a").first
    expect(link).to_be_visible()
    share_path = re.search(r"/s/[A-Za-z0-9_\-]+", page.locator("#share-result").inner_text()).group(0)
    page.goto(demo_server.url + share_path)
    wait_for_charts(page)
    expect(page.locator("#saved-with")).to_have_text(
        "Saved with a link of 7,200 Gbit/s per rank, α 2 µs for every run; run #3 read with plan "
        "“Seed MLP: data parallel (tutorial)”. Every share link shows it so."
    )
    expect(page.locator("#step-cost-table tbody tr").nth(1)).to_contain_text(
        "plan #1 Seed MLP: data parallel (tutorial)"
    )
    expect(page.locator("#plan-form")).to_have_count(0)  # read-only
    expect(page.locator("#compare-assumptions tbody tr").first).to_contain_text("7200")
    watch.assert_clean()


def test_a_run_read_with_a_pipelined_plan_names_the_stage_that_is_the_step(demo_server: LiveServer, page: Page) -> None:
    body = {"model": "fashion-mnist-mlp", "mode": "framework", "strategy": "hybrid", "pp": 2, "dp": 2}
    plan_id = httpx2.post(f"{demo_server.url}/api/plans", json=body, timeout=30).json()["id"]
    watch = PageWatch(page)
    page.goto(f"{demo_server.url}/runs/3?plan={plan_id}")
    stages = page.locator("#step-cost-headline dt", has_text="Pipeline stages").locator(
        "xpath=following-sibling::dd[1]"
    )
    expect(stages).to_have_text(re.compile(r"^stage 0 [\d.]+ ms \(the step: the longest\); stage 1 [\d.]+ ms$"))
    watch.assert_clean()
