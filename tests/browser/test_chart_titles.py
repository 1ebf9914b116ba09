"""Chart titles on a phone: a long run name in capitals (no spaces to wrap at) stays inside every chart."""

from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page
from test_dashboard import no_page_overflow, upload, wait_for_charts
from test_legends import four_sizes_csv

from live_server import LiveServer

CAPITALS_NAME = "WEST_SPINE_LEAF_FABRIC_ALLREDUCE_MEASUREMENTS_2026_NOVEMBER.CSV"
# Plotly's default title size, 1.4 × its 12 px font: what a title that fits keeps.
TITLE_FONT_PX = 16.8

# Per chart: its title's left and right edge in px from the chart's left edge, the chart's width and the
# title's font size.
TITLES = """() => [...document.querySelectorAll('.js-plotly-plot')].map(g => {
    const box = g.getBoundingClientRect(), title = g.querySelector('.gtitle');
    const edges = title.getBoundingClientRect();
    return {id: g.id, left: edges.left - box.left, right: edges.right - box.left, width: box.width,
            size: parseFloat(title.style.fontSize)};
  })"""


def test_a_long_run_name_in_capitals_keeps_inside_every_chart_title(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    run = upload(live_server, CAPITALS_NAME, four_sizes_csv(1.0))
    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.goto(f"{live_server.url}/runs/{run}")
        wait_for_charts(page)
        assert no_page_overflow(page)
        titles = page.evaluate(TITLES)
        assert [title["id"] for title in titles] == ["cdf-chart", "delay-chart", "bandwidth-chart"]
        for title in titles:
            assert title["left"] >= 0 and title["right"] <= title["width"], f"{title['id']} title cut at {label}"
        shrunk = {title["id"] for title in titles if title["size"] < TITLE_FONT_PX}
        # Half a desktop page holds the name's 44-character lines at Plotly's size; a phone's chart does not.
        assert shrunk == (set() if label == "desktop" else {"cdf-chart", "delay-chart", "bandwidth-chart"})
        screenshot(page, f"chart-titles-{label}")
    watch.assert_clean()
