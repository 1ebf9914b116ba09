"""The analysis pages in Chromium: an nccl-tests size sweep, a spiky per-iteration run with log y."""

import re
from urllib.parse import urlsplit

import httpx2
import numpy as np
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect
from test_dashboard import axis_title, no_page_overflow, trace_count, wait_for_charts

from live_server import LiveServer
from paths import NCCL_TESTS, RESULTS, SHARED_NCCL
from slower_sweep import B200_LOG, b200_slower_log


def upload(server: LiveServer, file_name: str, content: bytes) -> int:
    response = httpx2.post(f"{server.url}/api/runs", files={"file": (file_name, content)}, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def desktop_then_phone(page: Page, name: str) -> None:
    """Screenshots at 1280 and 390 px wide; at 390 the page itself must not scroll sideways."""
    screenshot(page, f"{name}-desktop")
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    screenshot(page, f"{name}-phone")


def spike_csv() -> bytes:
    """500 all-reduce iterations around 14 ms with one 5-second spike at iteration 250."""
    times = 14.0 + (np.arange(500) % 7) * 0.1
    times[250] = 5000.0
    rows = [f"{i},971048,all_reduce,{t:.3f}" for i, t in enumerate(times)]
    return ("iteration,data size,collective,completion time (ms)\n" + "\n".join(rows) + "\n").encode()


def test_size_sweep_page_leads_with_busbw_and_draws_no_one_point_distributions(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    log = NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"
    run_id = upload(live_server, log.name, log.read_bytes())
    page.goto(f"{live_server.url}/runs/{run_id}")
    wait_for_charts(page)
    headline = page.locator("#sweep-headline .headline")
    expect(headline.locator(".peak")).to_have_text("338.82 GB/s at 8,589,934,592 B (out-of-place)")
    expect(headline.locator(".average")).to_have_text("70.74 GB/s over 62 cells")
    expect(headline.locator(".file-average")).to_contain_text("70.742 GB/s · agrees")
    # No platform and no link typed: no % figure, no expected curve, no line rate, and the page says why.
    expect(page.locator("#no-link")).to_contain_text("No link speed given (no plan, none typed)")
    expect(page.locator("#above-ideal")).to_have_count(0)
    expect(page.locator("#cdf-chart")).to_have_count(0)
    expect(page.locator("#delay-chart")).to_have_count(0)
    expect(page.locator("#stats-table")).to_have_count(0)
    # busbw per variant drawn; algbw in the legend, one click away.
    assert trace_count(page, "#sweep-chart") == 2
    expect(page.locator("#sweep-chart .legendtext")).to_have_count(4)
    assert axis_title(page, "#sweep-chart") == "data size (bytes, log 2 scale)"
    assert page.evaluate("document.querySelector('#sweep-chart').layout.xaxis.type") == "log"
    expect(page.locator(".sweep-table[data-variant='in-place'] tbody tr")).to_have_count(31)
    expect(
        page.locator(".sweep-table[data-variant='out-of-place'] tbody tr").last.locator("[data-key=busbw]")
    ).to_have_text("338.82")
    # A link typed draws the α-β expected curve and the line rate: 400 Gbit/s is 50 GB/s, and NVLink's busbw
    # read against it makes the page say the assumption, not the run, is off.
    page.click("#assumptions summary")  # folded under the headline numbers
    page.fill("#link-gbps", "400")
    page.click("#apply-assumptions")
    wait_for_charts(page)
    expect(page.locator("#sweep-chart .legendtext").last).to_have_text("line rate 50 GB/s")
    assert trace_count(page, "#sweep-chart") == 4
    expect(page.locator("#above-ideal")).to_contain_text(
        f"Above 100% of ideal in #{run_id} {log.name}: up to 678.0% at 400 Gbit/s per rank and α 5 µs."  # α 5 µs, not 2
    )
    assert page.url.endswith(f"/runs/{run_id}?link_gbps=400&latency_us=5&ranks=16")
    desktop_then_phone(page, "run-size-sweep")
    watch.assert_clean()


def test_spiky_run_with_log_y_shows_the_other_trials_and_lists_the_slowest(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    run_id = upload(live_server, "spike-allreduce.csv", spike_csv())
    page.goto(f"{live_server.url}/runs/{run_id}")
    wait_for_charts(page)
    assert axis_title(page, "#delay-chart", "y") == "completion time (ms)"
    assert page.evaluate("document.querySelector('#delay-chart').layout.yaxis.type") == "linear"
    page.check("#delay-log-y")
    expect(page.locator("#delay-chart")).to_have_attribute("data-drawn", "true")
    expect(page.locator("#delay-chart .ytick text").first).to_be_visible()
    assert page.evaluate("document.querySelector('#delay-chart').layout.yaxis.type") == "log"
    first_row = page.locator(".slowest-table tbody tr").first.locator("td")
    expect(first_row).to_have_text(["250", "5,000.00", "350"])  # 5000 ms ÷ p50 14.3 ms
    expect(page.locator("#stats-table thead th").nth(2)).to_have_text("Min (ms)")
    screenshot(page, "run-spike-log-y-desktop")
    page.check("#delay-clip")
    expect(page.locator("#delay-chart .textpoint text")).to_have_text(["5000 ms"])
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    screenshot(page, "run-spike-clipped-phone")
    watch.assert_clean()


def test_compare_of_unrelated_runs_says_so_and_the_picker_keeps_the_tick_order(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    log = NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"
    sweep = upload(live_server, log.name, log.read_bytes())
    spike = upload(live_server, "spike-allreduce.csv", spike_csv())
    page.goto(f"{live_server.url}/compare")
    page.check(f"#pick-form input[name=run][value='{spike}']")
    page.check(f"#pick-form input[name=run][value='{sweep}']")
    # Only ticked runs can be the baseline; the first ticked is the default.
    expect(page.locator("#baseline option")).to_have_text(
        [f"first ticked (#{spike} spike-allreduce.csv)", f"#{spike} spike-allreduce.csv", f"#{sweep} {log.name}"]
    )
    page.select_option("#baseline", str(sweep))
    page.click("#compare-button")
    page.wait_for_url(f"{live_server.url}/compare?runs={spike},{sweep}&baseline={sweep}")
    wait_for_charts(page)
    expect(page.locator("#compare-notice")).to_have_text(
        f"#{spike} spike-allreduce.csv shares no (collective, data size) with the baseline #{sweep} {log.name}: "
        "no ratios against it and no Kolmogorov–Smirnov test, which would compare unrelated collectives and sizes"
    )
    # A sweep beside one distribution: nothing to test (sweeps never are), and the sweep is no row of the
    # pooled statistics.
    expect(page.locator("#ks-section")).to_be_hidden()
    expect(page.locator("#compare-stats tbody tr")).to_have_count(1)
    expect(page.locator("#compare-stats small")).to_have_count(0)  # no ratios across unrelated runs
    # The URL keeps the order and the baseline: the picker shows them again.
    expect(page.locator("#baseline")).to_have_value(str(sweep))
    desktop_then_phone(page, "compare-unrelated")
    watch.assert_clean()


def test_compare_ratios_have_three_significant_figures_and_a_direction(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    slow = upload(live_server, "slow-allreduce.csv", spike_csv())
    fast_csv = spike_csv().replace(b",14.", b",3.")  # the same trials about 4.7 × faster
    fast = upload(live_server, "fast-allreduce.csv", fast_csv)
    page.goto(f"{live_server.url}/compare?runs={slow},{fast}")
    wait_for_charts(page)
    expect(page.locator("#compare-notice")).to_be_hidden()
    row = page.locator("#compare-groups tbody tr").nth(1)
    expect(row.locator("td").nth(2).locator("small")).to_have_class("delta-neutral")  # counts are not judged
    p50 = row.locator("td").nth(3).locator("small")
    expect(p50).to_have_text("0.231×")  # 3.3 ms ÷ 14.3 ms
    expect(p50).to_have_class("delta-better")
    watch.assert_clean()


def test_run_page_names_the_slowest_rank_and_host_of_a_file_timing_every_rank(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    report = RESULTS / "nccl-tests-json" / "constructed-4proc-2host-allreduce-I1.json"
    run_id = upload(live_server, report.name, report.read_bytes())
    page.goto(f"{live_server.url}/runs/{run_id}")
    wait_for_charts(page)
    expect(page.locator("#slowest-rank")).to_have_text(
        "Slowest rank: 3 on gpu-b — 1.167× the median rank, 1,480.0 µs lost over 16 calls "
        "(92.5 µs per call; mean 645.0 µs against the median rank's 552.5 µs)"
    )
    expect(page.locator("#slowest-host")).to_contain_text("Slowest host: gpu-b — 1.079× the median host, 760.0 µs")
    expect(page.locator("#ranks-table tbody tr")).to_have_count(4)
    expect(page.locator("#ranks-table tr.slowest td")).to_have_text(
        ["3", "gpu-b", "16", "645.0", "1,200.0", "1.167", "1,480.0", "16"]
    )
    expect(page.locator("#hosts-table tr.slowest td").first).to_have_text("gpu-b")
    # One bar per rank (per host), the slowest red, and the median line.
    expect(page.locator("#ranks-chart .barlayer .point")).to_have_count(4)
    expect(page.locator("#hosts-chart .barlayer .point")).to_have_count(2)
    assert axis_title(page, "#ranks-chart", "y") == "time ÷ the median rank's (lower is better)"
    assert axis_title(page, "#hosts-chart") == "host"
    desktop_then_phone(page, "run-stragglers")
    watch.assert_clean()


def test_compare_page_assumptions_are_editable_kept_in_the_url_and_set_busbw(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    ids = []
    for name, times in (("slow-allreduce.csv", (100, 200, 300)), ("fast-allreduce.csv", (50, 100, 150))):
        rows = "".join(f"{i},all_reduce,1000000,{t}\n" for i, t in enumerate(times))
        ids.append(upload(live_server, name, f"iteration,collective,size_bytes,duration_us\n{rows}".encode()))
    slow, fast = ids
    page.goto(f"{live_server.url}/compare?runs={slow},{fast}")
    wait_for_charts(page)
    # Without a rank count a run has no busbw: each run's own assumptions say where each figure came from, and
    # the server's fallback link is not applied (no line rate).
    expect(page.locator("#compare-assumptions tbody tr").first.locator("td")).to_have_text(
        [f"#{slow} slow-allreduce.csv", "none givenfallback 100 not applied", "5from settings", "unknownfrom none", "—"]
    )
    page.fill("#link-gbps", "100")
    page.fill("#ranks", "4")
    page.click("#apply-assumptions")
    page.wait_for_url(f"{live_server.url}/compare?runs={slow},{fast}&link_gbps=100&ranks=4")
    wait_for_charts(page)
    expect(page.locator("#ranks")).to_have_value("4")
    expect(page.locator("#latency-us")).to_have_value("")  # left to each run: the settings' 5 µs
    expect(page.locator("#compare-assumptions tbody tr").nth(1).locator("td").nth(3)).to_have_text("4from query")
    fast_row = page.locator("#compare-groups tbody tr").nth(1).locator("td")
    # busbw = 1e6 B ÷ 100 µs × 2·3/4 = 15 GB/s, twice the slow run's; ideal 150 µs = 150 % of ideal.
    expect(fast_row.nth(8).locator(".value")).to_have_text("15.00")
    expect(fast_row.nth(8).locator("small")).to_have_text("2.00×")
    expect(fast_row.nth(8).locator("small")).to_have_class("delta-better")
    expect(fast_row.nth(10).locator(".value")).to_have_text("150.0")  # after % of expected (no platform: —)
    # The JSON twin takes the same query.
    expect(page.locator(".page-head a.button", has_text="JSON")).to_have_attribute(
        "href", f"/api/compare?runs={slow},{fast}&link_gbps=100.0&ranks=4"
    )
    # Changing the baseline in the picker keeps the assumptions.
    page.select_option("#baseline", str(fast))
    page.click("#compare-button")
    page.wait_for_url(f"{live_server.url}/compare?runs={slow},{fast}&baseline={fast}&link_gbps=100&ranks=4")
    wait_for_charts(page)
    desktop_then_phone(page, "compare-assumptions")
    watch.assert_clean()


def test_compare_page_shows_the_logs_cells_and_warns_above_100_percent_of_ideal(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    b200, h100 = SHARED_NCCL / "b200-allreduce-2.17.6.txt", NCCL_TESTS / "h100-16rank-allreduce-mpirun.txt"
    ids = [upload(live_server, log.name, log.read_bytes()) for log in (b200, h100)]
    page.goto(f"{live_server.url}/compare?runs={ids[0]},{ids[1]}")
    wait_for_charts(page)
    expect(page.locator("#above-ideal")).to_be_hidden()  # no link typed: no % of ideal at all
    page.goto(f"{live_server.url}/compare?runs={ids[0]},{ids[1]}&link_gbps=100&latency_us=5")
    wait_for_charts(page)
    # NVLink logs read against a 100 Gbit/s link typed: the page says so, as the run page does.
    expect(page.locator("#above-ideal")).to_have_text(
        f"Above 100% of ideal in #{ids[0]} {b200.name}, #{ids[1]} {h100.name}: up to 5,625.9% (#{ids[0]} {b200.name}) "
        "at 100 Gbit/s per rank and α 5 µs. The collectives ran faster than the α-β model allows on that link, so "
        "the assumed link is slower than the fabric measured: set the link speed (and α) the fabric really has "
        "(NVLink, say) for a % of ideal that means something."
    )
    # Two sweeps: compared size by size; each one's peak is the log's cell as it printed it.
    expect(page.locator("#sweep-headlines tbody tr").first.locator("td").nth(2)).to_have_text(
        "702.91 at 2,147,483,648 B"
    )
    screenshot(page, "compare-above-ideal-desktop")
    page.goto(f"{live_server.url}/compare?runs={ids[0]},{ids[1]}&link_gbps=7200&latency_us=0.5")
    wait_for_charts(page)
    expect(page.locator("#above-ideal")).to_be_hidden()
    watch.assert_clean()


def api_requests(page: Page) -> list[str]:
    """The API paths the page asked for (with their queries), in order."""
    requested: list[str] = []
    page.on("request", lambda request: requested.append(urlsplit(request.url)._replace(scheme="", netloc="").geturl()))
    return requested


def test_compare_page_asks_for_its_data_once_while_plotly_loads_and_draws_cdfs_on_the_chosen_axis(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    slow = upload(live_server, "slow-allreduce.csv", spike_csv())
    fast = upload(live_server, "fast-allreduce.csv", spike_csv().replace(b",14.", b",3."))
    requested = api_requests(page)
    page.goto(f"{live_server.url}/compare?runs={slow},{fast}")
    wait_for_charts(page)
    # The comparison (tables and every chart) is preloaded from the page's head (initiator "link"), while Plotly
    # downloads and compiles, and compare.js takes that answer: one request.
    expected = [f"/api/compare?runs={slow},{fast}"]
    assert [path for path in requested if path.startswith("/api/")] == expected
    initiators = page.evaluate(
        "paths => paths.map(path => performance.getEntriesByName(location.origin + path).map(e => e.initiatorType))",
        expected,
    )
    assert initiators == [["link"]]
    # The delay series: one figure, a panel a run.
    assert page.evaluate("document.getElementById('delay-panels').data.map(t => t.yaxis)") == ["y", "y2"]
    # /compare opens with log x ticked: the CDFs are drawn on log axes, every panel's, then follow the box.
    x_types = "id => Object.entries(document.getElementById(id).layout).filter(([key]) => /^xaxis\\d*$/.test(key))" \
              ".map(([, axis]) => axis.type)"  # fmt: skip
    assert page.evaluate(x_types, "cdf-chart") == ["log"]
    assert page.evaluate(x_types, "cdf-multiples") == ["log", "log"]
    page.uncheck("#log-x")
    assert page.evaluate(x_types, "cdf-multiples") == ["linear", "linear"]
    # Two size sweeps (the B200 log, then the same 25 % slower at its three largest sizes): a verdict line and
    # busbw per size, and none of a distribution's sections: no CDFs, delay charts, pooled percentiles or KS.
    sweeps = [
        upload(live_server, B200_LOG.name, B200_LOG.read_bytes()),
        upload(live_server, "b200-allreduce-slower.txt", b200_slower_log()),
    ]
    requested.clear()
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/compare?runs={sweeps[0]},{sweeps[1]}")
    wait_for_charts(page)
    assert [path for path in requested if path.startswith("/api/")] == [f"/api/compare?runs={sweeps[0]},{sweeps[1]}"]
    for hidden in ("#groups-section", "#delay-section", "#distribution-charts", "#overall-section", "#ks-section"):
        expect(page.locator(hidden)).to_be_hidden()
    expect(page.locator("#sweep-verdicts li")).to_have_text([
        f"#{sweeps[1]} vs #{sweeps[0]}: −20.0 % busbw at 3 sizes (512 MiB–2 GiB), same (within ±5 %) at 22 sizes "
        "(128 B–256 MiB); 4 sizes (8 B–64 B) left out: busbw 0.00 GB/s in both, under the log's resolution"
    ])  # fmt: skip
    expect(page.locator("#sweep-sizes tbody tr")).to_have_count(58)  # 29 sizes, two runs
    expect(page.locator("#sweep-sizes tbody tr").last).to_contain_text("0.800× (−20.0 %)")
    assert trace_count(page, "#sweep-overlay") == 4  # each run's out-of-place and in-place curves
    desktop_then_phone(page, "compare-size-sweeps")
    # Beside a distribution each run keeps its own kind's view: the sweep as a busbw curve, the distribution's
    # CDF and delay panel for it alone, and nothing to test with one distribution.
    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/compare?runs={slow},{sweeps[0]}")
    wait_for_charts(page)
    for visible in ("#sweep-section", "#distribution-charts", "#groups-section"):  # the last: the shared sizes
        expect(page.locator(visible)).to_be_visible()
    expect(page.locator("#ks-section")).to_be_hidden()
    expect(page.locator("#compare-stats tbody tr")).to_have_count(1)
    assert page.evaluate("document.getElementById('delay-panels').data.map(t => t.yaxis)") == ["y"]
    assert trace_count(page, "#sweep-overlay") == 2
    watch.assert_clean()


def test_compare_page_renders_its_tables_while_plotly_still_loads(live_server: LiveServer, page: Page) -> None:
    slow = upload(live_server, "slow-allreduce.csv", spike_csv())
    fast = upload(live_server, "fast-allreduce.csv", spike_csv().replace(b",14.", b",3."))
    held = []  # Plotly's script, kept from the page until the tables are checked
    plotly_script = re.compile(r"/plotly\.min\.js$")
    page.route(plotly_script, lambda route: held.append(route))
    page.goto(f"{live_server.url}/compare?runs={slow},{fast}", wait_until="commit")
    expect(page.locator("#compare-stats tbody tr")).to_have_count(2)
    expect(page.locator("#compare-tests tbody tr")).to_have_count(2)  # all samples, and the one shared group
    assert page.evaluate("typeof window.Plotly") == "undefined"
    assert page.locator("body[data-charts-drawn]").count() == 0
    held[0].continue_()
    wait_for_charts(page)
    assert [trace_count(page, f"#{chart}") for chart in ("cdf-chart", "cdf-multiples", "delay-panels")] == [4, 2, 2]

    # The panels' log axes: with room, four ticks asked for, so from 3 ms to 5 s every decade is labelled.
    # In a phone's narrow panels two ticks, decades only, never 2 and 5 between them (they ran together):
    # every second decade, which leaves 100.
    def panel_ticks() -> list[list[str]]:
        return [page.locator(f"#cdf-multiples .{axis}tick text").all_text_contents() for axis in ("x", "x2")]

    assert panel_ticks() == [["10", "100", "1000"], ["10", "100", "1000"]]
    page.unroute(plotly_script)
    page.set_viewport_size(PHONE)
    page.reload()
    wait_for_charts(page)
    assert panel_ticks() == [["100"], ["100"]]
