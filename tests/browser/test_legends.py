"""Chart legends on the run and compare pages at 1280 and 390 px: below the x axis title, inside the chart,
every entry shown and no blank band under the last row, long names cut, and no chart drawn twice by
Plotly's automargin."""

from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect
from test_dashboard import no_page_overflow, upload, wait_for_charts

from live_server import LiveServer
from paths import RESULTS

LONG_NAME = "pipeline stage sweep on the spine-leaf fabric, <b>second</b> try after the firmware update"
# The compare page's legend entry of run #1: 43 characters of "#1 " and the name, then the ellipsis.
LONG_LEGEND = "#1 pipeline stage sweep on the spine-leaf f…"
LEGEND_ROW_PX = 19


def four_sizes_csv(scale: float) -> bytes:
    """1000 iterations of four all-reduce sizes (the demo pipeline run's), one spike at iteration 300: past
    every size's p99.9, so each is drawn on the edge of the clipped delay chart."""
    rows = []
    for iteration in range(1000):
        for index, size in enumerate((2600, 33024, 131584, 803840)):
            time_ms = scale * (1.0 + 0.3 * index + 0.01 * (iteration % 7)) * (40 if iteration == 300 else 1)
            rows.append(f"{iteration},{size},all_reduce,{time_ms:.3f}")
    return ("iteration,data size,collective,completion time (ms)\n" + "\n".join(rows) + "\n").encode()


# Per chart with a legend: whether Plotly kept the figure's margins (automargin widening one draws the
# figure a second time), the legend's top, right and bottom edge and the lowest x axis title's bottom, in px
# from the chart's top left corner; the height its entries take and the height it was given (past which
# it scrolls).
LEGENDS = """() => [...document.querySelectorAll('.js-plotly-plot')].filter(g => g.querySelector('.legend'))
  .map(g => {
    const box = g.getBoundingClientRect(), size = g._fullLayout._size, margin = g._fullLayout.margin;
    const legend = g.querySelector('.legend').getBoundingClientRect();
    const titles = [...g.querySelectorAll('.xtitle')].map(t => t.getBoundingClientRect().bottom - box.top);
    return {id: g.id, keptMargins: ['l', 'r', 't', 'b'].every(k => Math.round(size[k]) === margin[k]),
            legendTop: legend.top - box.top, legendRight: legend.right - box.left, width: box.width,
            legendBottom: legend.bottom - box.top, height: box.height, xTitleBottom: Math.max(...titles),
            entriesHeight: g._fullLayout.legend._height, bandHeight: g._fullLayout.legend._maxHeight};
  })"""


def assert_legends_fit(page: Page, charts: list[str]) -> None:
    legends = page.evaluate(LEGENDS)
    assert [chart["id"] for chart in legends] == charts
    for chart in legends:
        assert chart["keptMargins"], f"{chart['id']} was drawn twice: automargin widened a margin"
        assert chart["legendTop"] >= chart["xTitleBottom"], f"{chart['id']}: legend over the x axis title"
        assert chart["legendRight"] <= chart["width"], f"{chart['id']}: legend past the chart's right edge"
        assert chart["legendBottom"] <= chart["height"], f"{chart['id']}: legend past the chart's bottom"
        assert chart["entriesHeight"] <= chart["bandHeight"], f"{chart['id']}: legend scrolls, entries hidden"
        # The band is cut to the rows this width needs: under a row (19 px) of blank below the legend.
        assert chart["height"] - chart["legendBottom"] < LEGEND_ROW_PX, f"{chart['id']}: blank band under legend"


def at_both_sizes(page: Page, url: str, charts: list[str], name: str) -> None:
    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.goto(url)  # drawn at this width from the start: a resize redraws on purpose
        wait_for_charts(page)
        assert no_page_overflow(page)
        assert_legends_fit(page, charts)
        screenshot(page, f"{name}-{label}")


def test_run_and_compare_legends_sit_below_the_axis_title_fit_the_chart_and_draw_once(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    first = upload(live_server, LONG_NAME, four_sizes_csv(1.0))
    assert first == 1
    second = upload(live_server, "second run", four_sizes_csv(1.5))
    run_url = f"{live_server.url}/runs/{first}"
    # The bandwidth chart has one trace (algbw: the file gives no ranks for busbw), so no legend.
    at_both_sizes(page, run_url, ["cdf-chart", "delay-chart"], "legends-run")
    # A phone's row holds one entry: four sizes, four rows.
    expect(page.locator("#cdf-chart .legend .traces")).to_have_text(
        ["all_reduce · 2600 B", "all_reduce · 33024 B", "all_reduce · 131584 B", "all_reduce · 803840 B"]
    )
    assert len({round(box["y"]) for box in legend_entry_boxes(page, "#cdf-chart")}) == 4
    # Clipped at p99.9: each size's off-the-axis marks join the legend under the same 44-character rule.
    page.check("#delay-clip")
    expect(page.locator("#delay-chart .legend .traces")).to_have_count(8)
    expect(page.locator("#delay-chart .legend .traces").nth(4)).to_have_text(
        "all_reduce · 2600 B: off the axis (value sh…"
    )
    assert_legends_fit(page, ["cdf-chart", "delay-chart"])

    compare_url = f"{live_server.url}/compare?runs={first},{second}"
    at_both_sizes(page, compare_url, ["cdf-chart", "cdf-multiples", "delay-panels"], "legends-compare")
    # The long run name is cut in the legend (escaped: the tag is text) and whole in the tables.
    expect(page.locator("#cdf-chart .legend .traces")).to_have_text([LONG_LEGEND, "#2 second run"])
    expect(page.locator("#compare-stats tbody tr").first).to_contain_text(LONG_NAME)
    watch.assert_clean()


def legend_entry_boxes(page: Page, selector: str) -> list[dict]:
    return [entry.bounding_box() for entry in page.locator(f"{selector} .legend .traces").all()]


def test_size_sweep_chart_labels_its_sizes_level_and_draws_once_on_a_phone(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    """nccl-tests' 8 B–128 MiB all_gather sweep: nine size labels side by side at 1280; on a phone every third,
    so Plotly neither tilts them nor widens the margins for them (which drew the chart a second time)."""
    run = upload(
        live_server, "gtx1080 all_gather", (RESULTS / "nccl-tests" / "gtx1080-2gpu-allgather-pre2.13.txt").read_bytes()
    )
    labels = page.locator("#sweep-chart .xtick text")
    for label, viewport, shown in (
        ("desktop", DESKTOP, ["8 B", "64 B", "512 B", "4 KiB", "32 KiB", "256 KiB", "2 MiB", "16 MiB", "128 MiB"]),
        ("phone", PHONE, ["8 B", "4 KiB", "2 MiB"]),
    ):
        page.set_viewport_size(viewport)
        page.goto(f"{live_server.url}/runs/{run}")
        wait_for_charts(page)
        assert no_page_overflow(page)
        assert_legends_fit(page, ["sweep-chart"])
        expect(labels).to_have_text(shown)
        tilted = [text.text_content() for text in labels.all() if "rotate" in (text.get_attribute("transform") or "")]
        assert tilted == [], f"size labels tilted at {label}"
        screenshot(page, f"legends-sweep-{label}")
    watch.assert_clean()
