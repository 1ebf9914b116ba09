"""Pages that lead with the answer, in Chromium at 1280×800 and 390×844: a run page's verdict and headline
numbers (and a linked plan's step cost) inside the first viewport, the assumptions folded under them, the
charts after; the plan page's KCCB sizes and trial count beside its form on a desktop, above it on a phone."""

import json

import httpx2
import pytest
from browser_support import ARTIFACTS, DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Browser, Page, expect
from test_step_cost_pages import demo_server, wait_for_charts  # noqa: F401 (demo_server: a fixture)

from live_server import LiveServer
from paths import NCCL_TESTS
from slower_sweep import B200_LOG, b200_slower_log

H100_LOG = NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"
VIEWPORTS = pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])


def label(viewport: dict) -> str:
    return "desktop" if viewport is DESKTOP else "phone"


def box_of(page: Page, selector: str) -> dict:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not shown"
    return box


def bottom(box: dict) -> float:
    return box["y"] + box["height"]


def record(name: str, positions: dict) -> None:
    """The measured boxes beside the screenshots (tests/browser/artifacts), for the review."""
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / f"{name}.json").write_text(json.dumps(positions, indent=1))


def assert_in_first_viewport(page: Page, viewport: dict, selectors: list[str], name: str) -> None:
    positions = {selector: box_of(page, selector) for selector in selectors}
    record(name, positions)
    page.screenshot(path=str(ARTIFACTS / f"{name}-first-screen.png"))  # what a reader sees before scrolling
    for selector, box in positions.items():
        assert box["y"] >= 0 and bottom(box) <= viewport["height"], (selector, box)
        assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], (selector, box)


@VIEWPORTS
def test_a_distribution_with_its_plan_leads_with_p50_p99_busbw_and_the_step_cost(
    demo_server: LiveServer,  # noqa: F811
    browser: Browser,
    viewport: dict,
) -> None:
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(demo_server.url + "/runs/1")
    wait_for_charts(page)
    row = page.locator("#headline-table tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td")).to_have_text(["all_reduce · 971048 B", "14.00", "19.19", "0.10", "—"])
    expect(page.locator("#step-cost-headline strong")).to_have_text("14.00 ms at p50")
    headline = ["#verdict-status", "#headline-table td[data-key=p50]", "#headline-table td[data-key=p99]",
                "#headline-table td[data-key=busbw]", "#headline-table td[data-key=pct-of-expected]",
                "#step-cost-headline strong"]  # fmt: skip
    assert_in_first_viewport(page, viewport, headline, f"answer-distribution-{label(viewport)}")
    # The assumptions fold under the numbers; the charts follow the answer.
    expect(page.locator("#assumptions")).not_to_have_attribute("open", "")
    expect(page.locator("#link-gbps")).to_be_hidden()
    assert box_of(page, "#assumptions")["y"] > bottom(box_of(page, "#step-cost-headline"))
    assert box_of(page, "#cdf-chart")["y"] > bottom(box_of(page, "#verdict"))
    # A chart's title says what it is; the page's heading names the run.
    expect(page.locator("#cdf-chart .gtitle")).to_have_text("Completion-time CDF")
    expect(page.locator("#delay-chart .gtitle")).to_have_text("Completion time per iteration")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"answer-distribution-{label(viewport)}")
    page.click("#assumptions summary")
    expect(page.locator("#link-gbps")).to_be_visible()
    watch.assert_clean()
    page.close()


@VIEWPORTS
def test_a_size_sweep_leads_with_its_peak_and_average_busbw(
    live_server: LiveServer, browser: Browser, viewport: dict
) -> None:
    answer = httpx2.post(f"{live_server.url}/api/runs", files={"file": (H100_LOG.name, H100_LOG.read_bytes())})
    run_id = answer.json()["id"]
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(f"{live_server.url}/runs/{run_id}")
    wait_for_charts(page)
    expect(page.locator("#sweep-headline .peak")).to_have_text("338.82 GB/s at 8,589,934,592 B (out-of-place)")
    expect(page.locator("#sweep-headline .average")).to_have_text("70.74 GB/s over 62 cells")
    headline = ["#verdict-status", "#sweep-headline .peak strong", "#sweep-headline .average strong"]
    assert_in_first_viewport(page, viewport, headline, f"answer-sweep-{label(viewport)}")
    assert box_of(page, "#sweep-chart")["y"] > bottom(box_of(page, "#verdict"))
    expect(page.locator("#sweep-chart .gtitle")).to_have_text("Bus bandwidth vs data size")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"answer-sweep-{label(viewport)}")
    watch.assert_clean()
    page.close()


@VIEWPORTS
def test_the_plan_page_shows_its_sizes_and_trials_beside_the_form_and_under_the_fields_on_a_phone(
    live_server: LiveServer, browser: Browser, viewport: dict
) -> None:
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(live_server.url + "/plan")
    page.select_option("#model", "fashion-mnist-mlp")
    tutorial = page.locator("#mode-tutorial")
    expect(tutorial.locator(".data-sizes")).to_have_text(["[971048]"], timeout=30000)
    expect(tutorial.locator(".trial-count")).to_have_text("8")
    # The framework card answers from its own request, which may come after the tutorial's.
    expect(page.locator("#mode-framework .trial-count")).to_have_text("8", timeout=30000)
    result = ["#mode-tutorial .trial-count", "#mode-tutorial .data-sizes", "#mode-framework .trial-count"]
    if viewport is PHONE:
        result = result[:2]  # the framework card follows the tutorial one in the strip under the fields
    assert_in_first_viewport(page, viewport, result, f"plan-result-{label(viewport)}")
    results, inputs = box_of(page, "#plan-results"), box_of(page, "#plan-inputs")
    if viewport is DESKTOP:
        assert results["x"] >= inputs["x"] + inputs["width"] and results["y"] < viewport["height"] / 4
    else:
        # A strip at the bottom of the screen, over the fields that scroll under it; after the form in the page.
        assert results["y"] > inputs["y"] and bottom(results) <= viewport["height"]
    # The result follows the fields, and stays in view beside them while the form scrolls.
    page.fill("#epochs", "2")
    expect(tutorial.locator(".trial-count")).to_have_text("16")
    if viewport is DESKTOP:
        page.locator("#group-network, fieldset.option-group").last.scroll_into_view_if_needed()
        assert_in_first_viewport(page, viewport, ["#mode-tutorial .trial-count"], "plan-result-scrolled-desktop")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"plan-result-{label(viewport)}")
    watch.assert_clean()
    page.close()


@VIEWPORTS
def test_a_run_of_four_sizes_with_reasons_leads_with_its_numbers_and_gives_the_reasons_after(
    demo_server: LiveServer,  # noqa: F811
    browser: Browser,
    viewport: dict,
) -> None:
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(demo_server.url + "/runs/3")
    wait_for_charts(page)
    rows = page.locator("#headline-table tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.first.locator("td")).to_have_text(["all_reduce · 2600 B", "20.56", "27.43", "0.00", "—"])
    expect(page.locator("#step-cost-headline strong")).to_have_text("86.16 ms at p50")
    # The step cost leads (the bottom line of a run a plan reads), then every group on a desktop; a phone's first
    # screen holds the first group whole, its other groups right under it.
    numbers = ["p50", "p99", "busbw", "pct-of-expected"]
    shown = 4 if viewport is DESKTOP else 1
    headline = ["#verdict-status", "#step-cost-headline strong"] + [
        f"#headline-table tbody tr:nth-child({row}) td[data-key={key}]"
        for row in range(1, shown + 1)
        for key in numbers
    ]
    assert_in_first_viewport(page, viewport, headline, f"answer-four-sizes-{label(viewport)}")
    # The verdict's reasons explain it under the numbers, before the folds.
    assert box_of(page, "#verdict-reasons")["y"] > bottom(box_of(page, "#headline-table"))
    assert box_of(page, "#assumptions")["y"] > bottom(box_of(page, "#verdict-reasons"))
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"answer-four-sizes-{label(viewport)}")
    watch.assert_clean()
    page.close()


@VIEWPORTS
def test_a_saved_plan_leads_with_its_trials_and_sizes_then_its_settings(
    demo_server: LiveServer,  # noqa: F811
    browser: Browser,
    viewport: dict,
) -> None:
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(demo_server.url + "/plans/1")
    expect(page.locator("#plan-results .trial-count")).to_have_text("8")
    expect(page.locator("#plan-results .data-sizes")).to_have_text("[971048]")
    result = ["#plan-results .trial-count", "#plan-results .data-sizes"]
    assert_in_first_viewport(page, viewport, result, f"saved-plan-result-{label(viewport)}")
    assert box_of(page, "#plan-settings")["y"] > bottom(box_of(page, "#plan-results"))
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"saved-plan-result-{label(viewport)}")
    watch.assert_clean()
    page.close()


@VIEWPORTS
def test_a_comparison_folds_the_run_list_so_its_ranking_leads(
    demo_server: LiveServer,  # noqa: F811
    browser: Browser,
    viewport: dict,
) -> None:
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(demo_server.url + "/compare?runs=1,2,3")
    wait_for_charts(page)
    expect(page.locator("#run-picker-fold summary")).to_have_text("Comparing #1, #2, #3: tick others")
    expect(page.locator("#run-picker-fold")).not_to_have_attribute("open", "")
    expect(page.locator("#step-cost-ranking")).to_contain_text("#1 data")
    assert_in_first_viewport(page, viewport, ["#baseline", "#step-cost-ranking"], f"compare-ranking-{label(viewport)}")
    # Ticking another run: the list unfolds.
    page.click("#run-picker-fold summary")
    expect(page.locator("#pick-form input[name=run][value='1']")).to_be_checked()
    screenshot(page, f"compare-ranking-{label(viewport)}")
    watch.assert_clean()
    page.close()
    # Nothing compared yet: the list is open.
    page = browser.new_page(viewport=viewport)
    page.goto(demo_server.url + "/compare")
    expect(page.locator("#run-picker-fold")).to_have_attribute("open", "")
    page.close()


@VIEWPORTS
def test_the_runs_list_leads_with_its_runs_and_the_upload_follows_them(
    demo_server: LiveServer,  # noqa: F811
    browser: Browser,
    viewport: dict,
) -> None:
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(demo_server.url + "/runs")
    first = "#runs-table tbody tr:first-child"
    expect(page.locator(f"{first} td.headline")).to_have_text(
        "p50 21,544.5 µs"
    )  # run 3, the demo pipeline run, over all sizes
    # No platform: nothing is expected of the demo's gloo runs.
    expect(page.locator(f"{first} td[data-label=Verdict]")).to_have_text("not judged")
    # A phone folds the twelve filters under their summary; a desktop shows them.
    expect(page.locator("#filters-fold summary")).to_have_text("Filter and sort · newest first")
    assert page.locator("#filters-fold").evaluate("fold => fold.open") is (viewport is DESKTOP)
    answer = [f"{first} a", f"{first} td.headline", f"{first} td[data-label=Verdict]", "#upload-jump"]
    assert_in_first_viewport(page, viewport, answer, f"runs-list-{label(viewport)}")
    assert box_of(page, "#upload")["y"] > bottom(box_of(page, "#runs-table"))
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"runs-list-{label(viewport)}")
    watch.assert_clean()
    page.close()


def test_an_empty_runs_list_leads_with_the_upload(live_server: LiveServer, page: Page) -> None:
    page.goto(live_server.url + "/runs")
    expect(page.locator("#upload-jump")).to_have_count(0)
    assert box_of(page, "#upload")["y"] < box_of(page, "#filters-fold")["y"]


@VIEWPORTS
def test_two_sweeps_without_a_plan_lead_with_the_verdict_line_then_the_overlay(
    live_server: LiveServer, browser: Browser, viewport: dict, tmp_path
) -> None:
    """No empty "Cost of one training step" table first: the sweep's verdict line in the first screen (the sizes
    where both logs print busbw 0.00 left out, saying so), the busbw overlay under it, the step cost after."""
    slower = tmp_path / "b200-slower.txt"
    slower.write_bytes(b200_slower_log())
    ids = []
    for path in (B200_LOG, slower):
        answer = httpx2.post(f"{live_server.url}/api/runs", files={"file": (path.name, path.read_bytes())}, timeout=60)
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(f"{live_server.url}/compare?runs={ids[0]},{ids[1]}")
    wait_for_charts(page)
    expect(page.locator("#sweep-verdicts li")).to_have_text([
        f"#{ids[1]} vs #{ids[0]}: −20.0 % busbw at 3 sizes (512 MiB–2 GiB), same (within ±5 %) at 22 sizes "
        "(128 B–256 MiB); 4 sizes (8 B–64 B) left out: busbw 0.00 GB/s in both, under the log's resolution"
    ])  # fmt: skip
    assert_in_first_viewport(page, viewport, ["#sweep-verdicts li"], f"compare-sweeps-{label(viewport)}")
    assert box_of(page, "#sweep-overlay")["y"] > bottom(box_of(page, "#sweep-verdicts"))
    # Without a plan the step cost is one line and the plan picker, after the sweeps; never an empty table.
    expect(page.locator("#step-cost-table")).to_be_hidden()
    expect(page.locator("#step-cost-ranking")).to_have_text(
        "No run has a plan yet: pick the plan each run ran (or a plan to try on its fabric) below."
    )
    assert box_of(page, "#step-cost")["y"] > bottom(box_of(page, "#sweep-section"))
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"compare-sweeps-{label(viewport)}")
    watch.assert_clean()
    page.close()
