"""The dashboard walked through in Chromium against a real server: plan, upload, analyse, compare, share."""

import re
from itertools import pairwise
from pathlib import Path
from urllib.parse import urlparse

import httpx2
import pytest
from browser_support import PHONE, PageWatch, screenshot
from playwright.sync_api import Browser, Page, expect

from emuplan.demo import DEMO_SHAPES, generated_run_csv
from live_server import LiveServer
from paths import LLAMA_2_7B_CONFIG, MODELS

XSS_NAME = "<img src=x onerror=alert(1)>"
SEED_SIZES = {"data": "[971048]", "tensor": "[6438912]", "pipeline": "[2600, 33024, 131584, 803840]"}


def upload(server: LiveServer, name: str, content: bytes, strategy: str | None = None) -> int:
    data = {"name": name, **({"strategy": strategy} if strategy else {})}
    response = httpx2.post(f"{server.url}/api/runs", files={"file": ("run.csv", content)}, data=data, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def wait_for_charts(page: Page) -> None:
    # wait_for_function would eval a string in the page, which our CSP (rightly) forbids.
    page.wait_for_selector("body[data-charts-drawn='true']", state="attached", timeout=30000)


def trace_count(page: Page, selector: str) -> int:
    return page.locator(f"{selector} .scatterlayer .trace").count()


def axis_title(page: Page, selector: str, axis: str = "x") -> str:
    return page.locator(f"{selector} .g-{axis}title text").first.text_content()


def no_page_overflow(page: Page) -> bool:
    """No horizontal scrolling of the whole page, once Plotly has followed the resize (it debounces)."""
    for _ in range(50):
        if page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"):
            return True
        page.wait_for_timeout(100)
    return False


def test_planning_the_three_seed_strategies_shows_the_seed_numbers(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    page.goto(live_server.url + "/plan")
    page.select_option("#model", "fashion-mnist-mlp")
    tutorial = page.locator("#mode-tutorial")
    framework = page.locator("#mode-framework")
    for strategy, sizes in SEED_SIZES.items():
        page.select_option("#strategy", strategy)
        expect(tutorial.locator(".data-sizes")).to_have_text([sizes], timeout=30000)
        expect(tutorial.locator(".trial-count")).to_have_text("8")
        expect(tutorial.locator("button.copy[data-copy]").first).to_have_attribute("data-copy", "8")
        expect(tutorial.locator(".data-sizes + button.copy")).to_have_attribute("data-copy", sizes[1:-1])
        expect(framework.locator(".trial-count")).to_have_text("8")  # framework results side by side
        if strategy == "data":
            # DDP: the seed MLP fits one 971048-byte bucket, so both modes agree here.
            expect(framework.locator(".data-sizes")).to_have_text(["[971048]"])
            expect(page.locator("#workload-tutorial table")).to_contain_text("971,048")
        screenshot(page, f"plan-{strategy}-desktop")
    # Empty fields show the planner's defaults; the seed preset saves in tutorial mode by default.
    expect(page.locator("#dataset_size")).to_have_attribute("placeholder", "60000")
    expect(page.locator("#hosts")).to_have_attribute("placeholder", "4")
    expect(tutorial).to_have_class(re.compile("selected"))
    # Inputs change the plan: two epochs double the trials.
    page.fill("#epochs", "2")
    expect(tutorial.locator(".trial-count")).to_have_text("16")
    page.fill("#epochs", "")
    expect(tutorial.locator(".trial-count")).to_have_text("8")
    # A bad input is named next to its field, in the form's words.
    page.fill("#batch_size", "0")
    expect(page.locator("#batch_size-message")).to_have_text("must be at least 1, got 0")
    expect(tutorial.locator(".error")).to_have_text("Batch size: must be at least 1, got 0")
    page.fill("#batch_size", "")
    expect(page.locator("#batch_size-message")).to_be_hidden()
    page.fill("#plan-name", "seed pipeline")
    page.click("#save-plan")
    page.wait_for_url(re.compile(r"/plans/\d+$"))
    expect(page.locator("h1")).to_have_text("seed pipeline")
    expect(tutorial.locator(".data-sizes")).to_have_text([SEED_SIZES["pipeline"]])
    yaml_url = page.locator("#download-yaml").get_attribute("href")
    exported = httpx2.get(live_server.url + yaml_url)
    assert exported.status_code == 200 and "803840" in exported.text
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    screenshot(page, "plan-saved-phone")
    watch.forgive_http_status(422)  # the batch size of 0
    watch.assert_clean()


def test_a_saved_plan_is_read_only_and_edits_into_a_new_plan(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    saved = httpx2.post(
        f"{live_server.url}/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "name": "seed data"}
    ).json()
    page.goto(f"{live_server.url}/plans/{saved['id']}")
    tutorial = page.locator("#mode-tutorial")
    expect(tutorial.locator(".data-sizes")).to_have_text(["[971048]"], timeout=30000)
    expect(page.locator("#plan-form")).to_have_count(0)  # nothing to change here, so nothing disagrees
    expect(page.locator("#plan-settings dd[data-field=strategy]")).to_have_text("data parallel")
    expect(page.locator("#plan-settings dd[data-field=tp]")).to_have_text("1 default")
    screenshot(page, "plan-saved-desktop")
    page.click("#edit-as-new")
    page.wait_for_url(re.compile(rf"/plan\?from={saved['id']}$"))
    expect(page.locator("#based-on")).to_contain_text(f"#{saved['id']} seed data")
    expect(page.locator("#strategy")).to_have_value("data")
    # What the planner chose stays a default: TP is empty, so switching to tensor plans tensor.
    expect(page.locator("#tp")).to_have_value("")
    expect(page.locator("#tp")).to_have_attribute("placeholder", "1", timeout=30000)
    page.select_option("#strategy", "tensor")
    expect(tutorial.locator(".data-sizes")).to_have_text([SEED_SIZES["tensor"]], timeout=30000)
    expect(page.locator("#tp")).to_have_attribute("placeholder", "4")
    # A typed TP of 1 with the tensor strategy is refused next to the field.
    page.fill("#tp", "1")
    expect(page.locator("#tp-message")).to_have_text(
        "the tensor strategy needs a tensor-parallel degree of at least 2, got 1"
    )
    expect(page.locator("#tp")).to_have_attribute("aria-invalid", "")
    page.fill("#tp", "3")
    expect(page.locator("#gpus-message")).to_have_text("4 GPUs are not divisible by tp × pp = 3 × 1 = 3")
    page.fill("#tp", "")
    expect(page.locator("#gpus-message")).to_be_hidden()
    page.click("#save-plan")
    page.wait_for_url(re.compile(r"/plans/\d+$"))
    new_id = int(page.url.rsplit("/", 1)[1])
    assert new_id != saved["id"]
    expect(page.locator("#mode-tutorial .data-sizes")).to_have_text([SEED_SIZES["tensor"]], timeout=30000)
    # The original is untouched.
    assert httpx2.get(f"{live_server.url}/api/plans/{saved['id']}").json()["workload"]["kccb"]["data_sizes"] == [971048]
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/plan?from={saved['id']}")
    expect(tutorial.locator(".data-sizes")).to_have_text(["[971048]"], timeout=30000)
    assert no_page_overflow(page)
    screenshot(page, "plan-edit-phone")
    watch.forgive_http_status(422)  # tp 1 and tp 3
    watch.assert_clean()


def test_a_hybrid_preset_with_a_faster_link_changes_ideal_times_and_percent_of_ideal(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    page.goto(live_server.url + "/plan")
    page.select_option("#model", "llama-3-8b")
    page.select_option("#strategy", "hybrid")
    page.fill("#tp", "2")
    page.fill("#pp", "2")
    framework = page.locator("#mode-framework")
    workload = page.locator("#workload-framework")
    expect(workload.locator("th .th-sub")).to_have_text("100 Gbit/s, α 5 µs", timeout=30000)
    # The tutorial rules do not cover hybrid; for a model planned in framework mode their card goes, with a note.
    expect(page.locator("#mode-skipped")).to_have_text(
        "Tutorial rules do not apply here: Mode: the tutorial rules cover data, tensor and pipeline only; framework "
        "mode plans hybrid."
    )
    expect(page.locator("#mode-tutorial")).to_be_hidden()
    first_ideal_at_100 = workload.locator("tbody tr").first.locator("td").last.text_content()
    page.fill("#link_gbps", "400")
    page.fill("#latency_us", "2")
    expect(workload.locator("th .th-sub")).to_have_text("400 Gbit/s, α 2 µs")
    expect(workload.locator(".network-assumption")).to_contain_text("400 Gbit/s per rank, α = 2 µs")
    expect(workload.locator("tbody tr").first.locator("td").last).not_to_have_text(first_ideal_at_100)
    expect(framework.locator(".data-sizes").first).to_be_visible()
    screenshot(page, "plan-hybrid-400g-desktop")
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    screenshot(page, "plan-hybrid-400g-phone")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.fill("#plan-name", "llama hybrid 400G")
    page.click("#save-plan")
    page.wait_for_url(re.compile(r"/plans/\d+$"))
    fast = httpx2.get(f"{live_server.url}/api{urlparse(page.url).path}").json()
    assert fast["workload"]["network"] == {"link_gbps": 400.0, "latency_us": 2.0}
    slow = httpx2.post(
        f"{live_server.url}/api/plans",
        json={**fast["request"], "link_gbps": 100, "latency_us": 5, "name": "llama hybrid 100G"},
    ).json()
    # One planned collective measured at 10 ms against each plan: the faster link's ideal is a smaller share.
    trial = fast["workload"]["kccb"][0]
    size = trial["data_sizes"][0]
    percent = {}
    for plan in (fast, slow):
        rows = "".join(f"{i},{size},{trial['collective']},{10 + i / 100}\n" for i in range(20 + plan["id"]))
        csv = ("iteration,data_size_bytes,collective,completion_time_ms\n" + rows).encode()
        response = httpx2.post(
            f"{live_server.url}/api/runs",
            files={"file": (f"run-{plan['id']}.csv", csv)},
            data={"name": plan["name"], "plan_id": str(plan["id"])},
            timeout=30,
        )
        assert response.status_code == 201, response.text
        run_id = response.json()["id"]
        (group,) = httpx2.get(f"{live_server.url}/api/runs/{run_id}/stats").json()["groups"]
        page.goto(f"{live_server.url}/runs/{run_id}")
        cell = page.locator("#stats-table-rates td[data-key=pct_of_ideal]")
        expect(cell).to_have_text(f"{group['pct_of_ideal']:,.1f}")
        percent[plan["name"]] = group["pct_of_ideal"]
    assert percent["llama hybrid 400G"] < percent["llama hybrid 100G"]
    watch.forgive_http_status(422)  # the tutorial column's hybrid
    watch.assert_clean()


def test_uploading_a_result_draws_cdf_and_delay_charts_and_escapes_the_name(
    live_server: LiveServer, page: Page, watch: PageWatch, tmp_path: Path
) -> None:
    result = tmp_path / "data-parallel.csv"
    result.write_bytes(generated_run_csv(DEMO_SHAPES[0]))
    page.goto(live_server.url + "/runs")
    page.set_input_files("#upload-file", str(result))
    page.fill("#upload-name", XSS_NAME)
    page.select_option("#upload-strategy", "data")
    page.fill("#upload-tags", "lab-a, <b>bold</b>")
    page.click("#upload-submit")
    page.wait_for_url(re.compile(r"/runs/\d+$"))
    wait_for_charts(page)
    expect(page.locator("#run-name")).to_have_text(XSS_NAME)
    # CDF: one curve and its percentile markers; delay: one series. Axis titles as the charts module sets them.
    assert trace_count(page, "#cdf-chart") == 2
    assert axis_title(page, "#cdf-chart") == "completion time (ms)"
    assert axis_title(page, "#cdf-chart", "y") == "fraction of completions ≤ x"
    assert trace_count(page, "#delay-chart") == 1
    assert axis_title(page, "#delay-chart") == "iteration"
    assert axis_title(page, "#delay-chart", "y") == "completion time (ms)"
    # A chart's title says what it shows; the name is the page's heading, as text, not markup.
    expect(page.locator("#cdf-chart .gtitle")).to_have_text("Completion-time CDF")
    assert page.locator("img").count() == 0
    expect(page.locator(".badge", has_text="<b>bold</b>")).to_have_count(1)
    expect(page.locator("#stats-table tbody tr")).to_have_count(1)
    expect(page.locator("#stats-table td[data-key=count]")).to_have_text("2,000")
    expect(page.locator("#stats-table-rates td[data-key=pct_of_ideal]")).to_have_text("—")  # no plan, no ideal
    assert page.evaluate("document.querySelector('#cdf-chart').layout.xaxis.type") == "log"  # tails span decades
    page.uncheck("#cdf-log-x")
    expect(page.locator("#cdf-chart .xaxislayer-above .xtick text").first).to_have_text("0")
    page.check("#cdf-log-x")
    first_tick = page.locator("#cdf-chart .xaxislayer-above .xtick text").first
    expect(first_tick).to_have_text(re.compile(r"^(1|10|100|1000)$"))
    assert page.evaluate("document.querySelector('#cdf-chart').layout.xaxis.type") == "log"
    screenshot(page, "run-desktop")
    # Chart downloads from the modebar: PNG (Plotly's own button) and SVG (ours).
    for title, suffix in (("Download plot as a PNG", ".png"), ("Download plot as SVG", ".svg")):
        page.hover("#delay-chart")
        with page.expect_download() as download:
            page.click(f"#delay-chart .modebar-btn[data-title='{title}']")
        assert download.value.suggested_filename.endswith(suffix)
        assert download.value.suggested_filename.startswith("run-")
    svg = Path(download.value.path()).read_text()
    assert "<img" not in svg
    assert "Completion time per iteration</text>" in svg  # the chart's title: what it shows
    page.set_viewport_size(PHONE)
    page.reload()
    wait_for_charts(page)
    assert no_page_overflow(page)
    screenshot(page, "run-phone")
    page.goto(live_server.url + "/runs")
    expect(page.locator("#runs-table tbody tr td a").first).to_have_text(XSS_NAME)
    page.goto(live_server.url + "/")
    expect(page.get_by_role("link", name=XSS_NAME)).to_have_count(1)
    assert page.locator("img").count() == 0
    watch.assert_clean()


def test_an_upload_error_is_shown_inline_with_the_servers_message(
    live_server: LiveServer, page: Page, watch: PageWatch, tmp_path: Path
) -> None:
    bad = tmp_path / "broken.csv"
    bad.write_text("iteration,completion time (ms)\n1,12.5\n2,not-a-number\n")
    expected = httpx2.post(f"{live_server.url}/api/runs", files={"file": ("broken.csv", bad.read_bytes())})
    assert expected.status_code == 400
    page.goto(live_server.url + "/runs")
    page.set_input_files("#upload-file", str(bad))
    page.click("#upload-submit")
    expect(page.locator("#upload-error")).to_have_text(expected.json()["detail"])
    expect(page.locator("#upload-error")).to_contain_text("broken.csv")
    assert page.url == live_server.url + "/runs"
    screenshot(page, "runs-upload-error")
    watch.forgive_http_status(400)
    watch.assert_clean()


def test_comparing_three_runs_then_sharing_a_read_only_link(
    live_server: LiveServer, page: Page, watch: PageWatch, browser: Browser, access_log: list[str]
) -> None:
    # A name as long as the demo's: the baseline list must not widen the phone page.
    long_name = "pipeline run (measured locally: 4 gloo processes, 40 iterations)"
    names = {"data": "data run", "tensor": XSS_NAME, "pipeline": long_name}
    ids = {shape.strategy: upload(live_server, names[shape.strategy], generated_run_csv(shape), shape.strategy)
           for shape in DEMO_SHAPES}  # fmt: skip
    private_id = upload(live_server, "private run", generated_run_csv(DEMO_SHAPES[0], seed=7))
    page.goto(live_server.url + "/runs")
    for strategy in ("data", "tensor", "pipeline"):
        page.check(f"#runs-table input[value='{ids[strategy]}']")
    page.click("#compare-selected")
    selection = ",".join(str(ids[s]) for s in ("data", "tensor", "pipeline"))
    page.wait_for_url(re.compile(re.escape(f"/compare?runs={selection}") + "$"))
    wait_for_charts(page)
    # Overlaid CDF: a curve + percentile markers per run; the delays a panel per run, titled with its name.
    assert trace_count(page, "#cdf-chart") == 6
    assert axis_title(page, "#cdf-chart") == "completion time (ms)"
    # Six series: the data and tensor runs time one size each, the pipeline run four. A desktop's full-width
    # panel has room for each whole title (shown as text, not markup).
    assert trace_count(page, "#delay-panels") == 6
    expect(page.locator("#delay-panels .annotation-text")).to_have_text(
        [f"#{ids['data']} data run", f"#{ids['tensor']} {XSS_NAME}", f"#{ids['pipeline']} {long_name}"]
    )
    assert axis_title(page, "#delay-panels", "y") == "completion time (ms)"
    expect(page.locator("#compare-stats tbody tr")).to_have_count(3)
    expect(page.locator("#compare-stats tr.baseline")).to_contain_text("data run")
    # Over all sizes together only times and counts: busbw and % of ideal are per data size.
    expect(page.locator("#compare-stats thead th")).to_have_text(
        ["Run", "Count", "p50 (ms)", "p90 (ms)", "p99 (ms)", "p99.9 (ms)", "Max (ms)", "Mean (ms)", "p99/p50"]
    )
    expect(page.locator("#compare-tests tbody tr")).to_have_count(3)
    # The hostile name is text in the legend, the panel titles, the tables; never an element.
    expect(page.locator("#cdf-chart .legendtext").nth(1)).to_have_text(f"#{ids['tensor']} {XSS_NAME}")
    # Three panels a row: a title is cut to its panel's width (the whole title in its hover), as text.
    tensor_title = page.locator("#cdf-multiples .annotation-text").nth(1).text_content()
    assert tensor_title.endswith("…") and f"#{ids['tensor']} {XSS_NAME}".startswith(tensor_title[:-1]), tensor_title
    assert len(tensor_title) > 16  # more than a phone's panel has room for
    expect(page.locator("#compare-stats tbody tr").nth(1)).to_contain_text(XSS_NAME)
    assert page.locator("img").count() == 0
    screenshot(page, "compare-desktop")
    # The URL carries the selection: a reload shows the same runs.
    page.reload()
    wait_for_charts(page)
    expect(page.locator("#compare-stats tbody tr")).to_have_count(3)
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    # Opened on a phone, the three panels' titles are cut shorter, each within its own panel's width.
    page.reload()
    wait_for_charts(page)
    titles = [title.bounding_box() for title in page.locator("#cdf-multiples .annotation-text").all()]
    assert len(titles) == 3
    assert all(left["x"] + left["width"] + 4 <= right["x"] for left, right in pairwise(titles)), titles
    screenshot(page, "compare-phone")
    page.set_viewport_size({"width": 1280, "height": 800})

    page.fill("#save-name", "dp vs tp vs pp")
    page.select_option("#share-expiry", "7")
    page.click("#save-and-share")
    share_url = page.locator("#share-url").text_content()
    assert re.fullmatch(re.escape(live_server.url) + r"/s/[A-Za-z0-9_\-]{43}", share_url)
    token = share_url.rsplit("/", 1)[1]

    # A fresh browser context: no cookies, no history, only the link.
    outsider = browser.new_context(viewport={"width": 1280, "height": 800})
    shared = outsider.new_page()
    outsider_watch = PageWatch(shared)
    requested: list[str] = []
    shared.on("request", lambda request: requested.append(request.url))
    response = shared.goto(share_url)
    assert response.status == 200
    assert response.headers["referrer-policy"] == "no-referrer"
    wait_for_charts(shared)
    # The comparison is asked for once (the head's preload serves compare.js); every chart is in it.
    api_paths = [re.sub(r"^http://127\.0\.0\.1:\d+", "", url) for url in requested if "/api/" in url]
    assert api_paths == [f"/api/shared/{token}"]
    assert trace_count(shared, "#delay-panels") == 6
    expect(shared.locator("#comparison-name")).to_have_text("dp vs tp vs pp")
    assert trace_count(shared, "#cdf-chart") == 6
    expect(shared.locator("#compare-stats tbody tr")).to_have_count(3)
    # Nothing leads anywhere else: no navigation, no edit, delete, upload or share controls, no other run.
    assert shared.locator("main a, header a").count() == 0
    assert shared.locator("button:not(.modebar-btn), input[type=file], form").count() == 0
    assert "private run" not in shared.content()
    expect(shared.locator("#compare-stats tbody tr").nth(1)).to_contain_text(XSS_NAME)
    assert shared.locator("img").count() == 0
    paths = {re.sub(r"^http://127\.0\.0\.1:\d+", "", url) for url in requested}
    allowed = (f"/s/{token}", f"/api/shared/{token}", "/static/")
    assert all(path.startswith(allowed) for path in paths), paths
    other = shared.request.get(f"{live_server.url}/api/shared/{token}/runs/{private_id}/figures/delay")
    assert other.status == 404
    screenshot(shared, "shared-desktop")
    shared.set_viewport_size(PHONE)
    assert no_page_overflow(shared)
    screenshot(shared, "shared-phone")
    outsider_watch.assert_clean()

    # Revoke it from the comparison page: the outsider now gets 410.
    page.click("#manage-shares")
    page.wait_for_url(re.compile(r"/comparisons/\d+$"))
    expect(page.locator("#share-table tbody tr")).to_have_count(1)
    page.click("#share-table button.revoke")
    expect(page.locator("#share-table .badge")).to_have_text("revoked")
    screenshot(page, "comparison-shares")
    gone = shared.goto(share_url)
    assert gone.status == 410
    expect(shared.locator(".error")).to_contain_text("revoked")
    outsider.close()
    watch.assert_clean()
    # The access log saw every request of the outsider, and never the token.
    assert any('"GET /s/[redacted] HTTP/1.1" 200' in line for line in access_log)
    assert any('"GET /s/[redacted] HTTP/1.1" 410' in line for line in access_log)
    assert any("/api/shared/[redacted]/runs/" in line for line in access_log)
    assert not [line for line in access_log if token in line]


@pytest.fixture
def demo_server(database_url: str):
    from emuplan.settings import Settings
    from live_server import start_server, stop_server

    live = start_server(Settings(database_url=database_url, demo=True))
    yield live
    stop_server(live)


def test_a_newcomer_reaches_the_demo_comparison_in_one_click(
    demo_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    page.goto(demo_server.url + "/")
    screenshot(page, "home-demo-desktop")
    page.click("#demo-link")
    wait_for_charts(page)
    expect(page.locator("h1")).to_have_text("Demo: data vs tensor vs pipeline")
    expect(page.locator(".generated-note").first).to_contain_text("Generated demo data, not a KCCB result.")
    expect(page.locator("#compare-stats tbody tr")).to_have_count(3)
    # Per group, the first table: 1 data + 1 tensor + 4 pipeline sizes; the demo runs are linked to their
    # plans: % of ideal.
    expect(page.locator("#compare-groups tbody tr")).to_have_count(6)
    expect(page.locator("#compare-groups tbody tr").first.locator("td").last).to_have_text(re.compile(r"^\d+\.\d$"))
    expect(page.locator("#compare-stats .badge.origin-generated")).to_have_count(3)
    screenshot(page, "demo-comparison-desktop")
    watch.assert_clean()


def drop_file(page: Page, file_name: str, text: str, check_highlight: bool = False) -> None:
    """What a drag from the file manager delivers: a DataTransfer holding one File."""
    transfer = page.evaluate_handle(
        """([name, text]) => { const transfer = new DataTransfer();
                               transfer.items.add(new File([text], name, { type: "text/csv" }));
                               return transfer; }""",
        [file_name, text],
    )
    page.dispatch_event("#dropzone", "dragover", {"dataTransfer": transfer})
    if check_highlight:
        expect(page.locator("#dropzone")).to_have_class(re.compile("dragover"))
    page.dispatch_event("#dropzone", "drop", {"dataTransfer": transfer})


def test_drag_and_drop_upload_and_a_duplicate_named_inline(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    content = generated_run_csv(DEMO_SHAPES[1]).decode()
    existing = upload(live_server, "first copy", content.encode())
    page.goto(live_server.url + "/runs")
    drop_file(page, "dropped.csv", content, check_highlight=True)
    expect(page.locator("#upload-chosen")).to_have_text(f"dropped.csv ({len(content):,} bytes)")
    page.click("#upload-submit")
    # Same bytes as run `existing`: the server's 409 message, and a link to that run.
    expect(page.locator("#upload-error")).to_contain_text(f"identical content was already imported as run {existing}")
    expect(page.locator("#existing-run")).to_have_attribute("href", f"/runs/{existing}")
    # The progress bar followed the whole multipart body (file + form fields) up to the last byte.
    sent, total = page.eval_on_selector("#upload-progress", "bar => [bar.value, bar.max]")
    assert sent == total > len(content)
    page.locator("#upload-name").fill("second copy")
    drop_file(page, "other.csv", content + "2000,6438912,all_gather,99.5\n")
    page.click("#upload-submit")
    page.wait_for_url(re.compile(r"/runs/\d+$"))
    expect(page.locator("#run-name")).to_have_text("second copy")
    watch.forgive_http_status(409)
    watch.assert_clean()


@pytest.fixture
def small_upload_server(database_url: str):
    from emuplan.settings import Settings
    from live_server import start_server, stop_server

    live = start_server(Settings(database_url=database_url, demo=False, max_upload_bytes=20_000))
    yield live
    stop_server(live)


def test_an_upload_over_the_limit_says_so_inline_before_sending(
    small_upload_server: LiveServer, page: Page, watch: PageWatch, tmp_path: Path, access_log: list[str]
) -> None:
    big = tmp_path / "big.csv"
    big.write_bytes(generated_run_csv(DEMO_SHAPES[0]))
    size = big.stat().st_size
    assert size > 20_000
    page.goto(small_upload_server.url + "/runs")
    expect(page.locator("#dropzone .sub")).to_contain_text("Up to 20,000 bytes in one upload.")
    page.set_input_files("#upload-file", str(big))
    page.click("#upload-submit")
    expect(page.locator("#upload-error")).to_have_text(
        f"big.csv ({size} bytes) is larger than the limit of 20000 bytes (EMUPLAN_MAX_UPLOAD_BYTES) for one "
        "upload: nothing was sent."
    )
    small = tmp_path / "small.csv"
    small.write_text("iteration,duration_us\n0,10\n")
    page.set_input_files("#upload-file", [str(big), str(small)])
    page.click("#upload-submit")
    expect(page.locator("#upload-error")).to_have_text(
        f"These 2 files ({size + small.stat().st_size} bytes together) are larger than the limit of 20000 bytes "
        "(EMUPLAN_MAX_UPLOAD_BYTES) for one upload: nothing was sent. Upload them a few at a time."
    )
    assert not any("POST /api/runs" in line for line in access_log)
    watch.assert_clean()


def test_a_model_definition_uploaded_on_the_plan_page_is_planned(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    config = LLAMA_2_7B_CONFIG
    page.goto(live_server.url + "/plan")
    page.click("details.upload-model summary")
    page.set_input_files("#model-file", str(config))
    page.fill("#model-form input[name=name]", "Llama 2 7B <script>")
    page.click("#model-upload")
    expect(page.locator("#model option:checked")).to_have_text(re.compile(r"^Llama 2 7B <script> \(hf_config, #\d+\)$"))
    # Llama-2-7B's exact parameter count, as the HuggingFace config gives it.
    expect(page.locator("#workload-framework .sub")).to_contain_text("6,738,415,616 parameters", timeout=30000)
    expect(page.locator("#mode-framework .trial-count")).to_have_text(re.compile(r"^\d+$"))
    expect(page.locator("#mode-framework")).to_have_class(re.compile("selected"))  # framework by default
    assert page.locator("script:not([src])").count() == 0
    screenshot(page, "plan-uploaded-model")
    watch.forgive_http_status(422)  # the tutorial rules do not cover a transformer; that column says so
    watch.assert_clean()


@pytest.mark.sandbox
def test_pytorch_source_shows_the_captured_collectives_beside_the_analytic_ones(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    source = MODELS / "seed_classifier.py"
    page.goto(live_server.url + "/plan")
    page.click("details.upload-model summary")
    page.set_input_files("#model-file", str(source))
    page.fill("#model-form input[name=model_class]", "Classifier")
    page.fill("#model-form input[name=input_shape]", "1,28,28")
    page.click("#model-upload")
    expect(page.locator("#model option:checked")).to_have_text(re.compile(r"\(pytorch, #\d+\)$"), timeout=60000)
    page.select_option("#strategy", "data")
    page.select_option("#dp_impl", "fsdp2")
    framework = page.locator("#mode-framework")
    # FSDP2 at 4 GPUs: KCCB gets the per-rank pieces; fc4's 2600 bytes padded to 3120 (780 per rank).
    expect(framework.locator(".data-sizes")).to_have_text(
        ["[200960, 32896, 8256, 780]", "[780, 8256, 32896, 200960]"], timeout=60000
    )
    captured = page.locator("#workload-framework .captured")
    expect(captured).to_contain_text("Captured from PyTorch", timeout=60000)
    expect(captured.locator("tbody tr").first).to_contain_text("803,840")
    expect(captured.locator("tbody")).to_contain_text("3,120")
    expect(page.locator("#workload-tutorial .workload")).not_to_contain_text("null")
    screenshot(page, "plan-captured-fsdp2")
    watch.assert_clean()


def test_ks_rows_show_the_servers_tests_overall_and_per_shared_group(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    first = upload(live_server, "tensor A", generated_run_csv(DEMO_SHAPES[1]), "tensor")
    second = upload(live_server, "tensor B", generated_run_csv(DEMO_SHAPES[1], seed=3), "tensor")
    expected = httpx2.get(f"{live_server.url}/api/compare?runs={first},{second}").json()["ks_tests"]
    page.goto(f"{live_server.url}/compare?runs={first},{second}")
    wait_for_charts(page)
    rows = page.locator("#compare-tests tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).locator("td").nth(2)).to_have_text("all samples")
    expect(rows.nth(1).locator("td").nth(2)).to_have_text("same group: all_gather · 6438912 B")
    expect(rows.nth(0).locator("td").nth(3)).to_have_text(f"{expected[0]['statistic']:.4f}")
    expect(rows.nth(1).locator("td").nth(3)).to_have_text(f"{expected[0]['groups'][0]['statistic']:.4f}")
    watch.assert_clean()
