"""Chart titles say what a chart shows, never the run's name (a long one in capitals ran past a phone's chart),
and fit every chart at Plotly's own title size on a desktop and a phone."""

from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page
from test_dashboard import no_page_overflow, upload, wait_for_charts
from test_legends import four_sizes_csv

from live_server import LiveServer

CAPITALS_NAME = "WEST_SPINE_LEAF_FABRIC_ALLREDUCE_MEASUREMENTS_2026_NOVEMBER.CSV"
# Plotly's default title size: no title is shrunk to fit.
TITLE_FONT_PX = 17  # as Plotly 4 sets it on the title element

# Per chart: its title's left and right edge in px from the chart's left edge, the chart's width, the title's
# font size and text.
TITLES = """() => [...document.querySelectorAll('.js-plotly-plot')].map(g => {
    const box = g.getBoundingClientRect(), title = g.querySelector('.gtitle');
    const edges = title.getBoundingClientRect();
    return {id: g.id, left: edges.left - box.left, right: edges.right - box.left, width: box.width,
            size: parseFloat(title.style.fontSize), text: title.textContent};
  })"""


def test_chart_titles_name_what_they_show_and_fit_every_chart_at_plotlys_size(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    run = upload(live_server, CAPITALS_NAME, four_sizes_csv(1.0))
    for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        page.set_viewport_size(viewport)
        page.goto(f"{live_server.url}/runs/{run}")
        wait_for_charts(page)
        assert no_page_overflow(page)
        titles = page.evaluate(TITLES)
        assert [(title["id"], title["text"]) for title in titles] == [
            ("cdf-chart", "Completion-time CDF"),
            ("delay-chart", "Completion time per iteration"),
            ("bandwidth-chart", "Bandwidth vs data size"),
        ]
        for title in titles:
            assert title["left"] >= 0 and title["right"] <= title["width"], f"{title['id']} title cut at {label}"
            assert title["size"] == TITLE_FONT_PX, f"{title['id']} title shrunk at {label}"
        screenshot(page, f"chart-titles-{label}")
    watch.assert_clean()
