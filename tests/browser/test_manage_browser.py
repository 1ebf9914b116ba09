"""Managing from the pages in Chromium at 1280x800 and 390x844: several files uploaded at once with an outcome
line each, the runs list filtered and sorted through its URL, a run's facts and note edited, its plan linked, a
plan deleted after a confirmation that counts its runs, a run deleted after one that names its comparison."""

import re

import httpx2
import pytest
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect

from live_server import LiveServer
from paths import RESULTS, SHARED_NCCL

A100 = SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"
V100_BROADCAST = SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"


def no_sideways_scroll(page: Page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_several_files_upload_at_once_each_with_its_outcome(
    live_server: LiveServer, page: Page, watch: PageWatch, tmp_path, viewport
) -> None:
    existing = httpx2.post(f"{live_server.url}/api/runs", files={"file": (A100.name, A100.read_bytes())}, timeout=60)
    broken = tmp_path / "broken.csv"
    broken.write_text("when,what\n1,2\n")
    page.set_viewport_size(viewport)
    page.goto(f"{live_server.url}/runs")
    page.set_input_files("#upload-file", [str(A100), str(broken), str(V100_BROADCAST)])
    expect(page.locator("#upload-chosen")).to_contain_text("3 files (")
    page.fill("#upload-tags", "batch")
    page.fill("#upload-facts", "nic = ConnectX-6")
    page.click("#upload-submit")
    expect(page.locator("#upload-status")).to_have_text("1 of 3 files stored. The list shows them.")
    # The new run is in the list without a reload, and the list's compare picker still works on it.
    expect(page.locator("#runs-table tbody tr")).to_have_count(2)
    expect(page.locator("#runs-table tbody tr").first).to_contain_text(V100_BROADCAST.name)
    outcomes = page.locator("#upload-outcomes li").all_inner_texts()
    assert outcomes[0] == f"{A100.name}: duplicate of #{existing.json()['id']} (not imported again)"
    assert outcomes[1].startswith("broken.csv: refused: broken.csv: unknown format:")
    assert outcomes[1].endswith("say which column holds what (the upload form's Column mapping, --column-map or "
                                "column_map=, e.g. duration=wall_ms,size=payload_bytes) or pick its Format "
                                "(--format, format=)")  # fmt: skip
    assert outcomes[2] == f"{V100_BROADCAST.name}: stored as #2"
    assert page.url == f"{live_server.url}/runs"  # several files: the outcomes stay in view
    no_sideways_scroll(page)
    screenshot(page, f"runs-upload-several-{viewport['width']}")
    page.locator("#runs-table input[name=run]").nth(0).check()
    page.locator("#runs-table input[name=run]").nth(1).check()
    page.click("#compare-selected")
    page.wait_for_url(f"{live_server.url}/compare?runs=2,{existing.json()['id']}")
    stored = httpx2.get(f"{live_server.url}/api/runs/2", timeout=30).json()
    assert (stored["tags"], stored["facts"]) == (["batch"], {"nic": "ConnectX-6"})
    watch.forgive_http_status(400, 409)
    watch.assert_clean()


def upload(server: LiveServer, path, **form) -> int:
    response = httpx2.post(
        f"{server.url}/api/runs", files={"file": (path.name, path.read_bytes())}, data=form, timeout=60
    )
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_the_list_keeps_its_filters_and_sort_in_the_url(live_server: LiveServer, page: Page, watch: PageWatch) -> None:
    upload(live_server, A100, facts="nic = ConnectX-6")
    upload(live_server, V100_BROADCAST)
    upload(live_server, RESULTS / "generated-per-iteration.csv")
    page.goto(f"{live_server.url}/runs")
    page.select_option("#run-filters select[name=collective]", "all_reduce")
    page.select_option("#run-filters select[name=sort]", "p50")
    page.click("#run-filters button[type=submit]")
    page.wait_for_url(re.compile(r"collective=all_reduce.*sort=p50"))
    cells = page.locator("#runs-table td.headline").all_inner_texts()
    assert cells == ["p50 19,922.8 µs", "peak busbw 222.88 GB/s"]  # p50 19,922.8 µs, then 90,330 µs
    assert page.locator("#runs-table td[data-label=Sizes]").all_inner_texts() == ["2.54 KiB – 785 KiB", "10 GiB"]
    assert page.locator("#runs-table td[data-label='Ranks × hosts']").all_inner_texts() == ["—", "16 × 2"]
    expect(page.locator(".pager span")).to_have_text("runs 1–2 of 2, by p50, lowest first")
    page.goto(f"{live_server.url}/runs?fact=NIC%3Dconnectx-6")
    assert page.locator("#runs-table tbody a").first.inner_text() == A100.name
    expect(page.locator("#run-filters input[name=fact]")).to_have_value("NIC=connectx-6")
    watch.assert_clean()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_run_is_edited_and_deleted_and_a_plan_deleted_from_their_pages(
    live_server: LiveServer, page: Page, watch: PageWatch, viewport
) -> None:
    run_id = upload(live_server, A100)
    other = upload(live_server, V100_BROADCAST)
    plan = httpx2.post(f"{live_server.url}/api/plans", json={"model": "fashion-mnist-mlp", "gpus": 16}, timeout=60)
    plan_id = plan.json()["id"]
    comparison = httpx2.post(
        f"{live_server.url}/api/comparisons", json={"name": "A vs V", "run_ids": [run_id, other]}, timeout=60
    ).json()
    page.set_viewport_size(viewport)
    page.goto(f"{live_server.url}/runs/{run_id}")
    expect(page.locator("#no-facts")).to_be_visible()
    page.click("#manage-edit summary")
    page.fill("#manage-form input[name=name]", "A100 rail 3")
    page.fill("#manage-form input[name=tags]", "rail-3, nightly")
    page.fill("#manage-form textarea[name=facts]", "topology = rail-optimised\nnic = ConnectX-6\nnccl = 2.17.1")
    page.fill("#manage-form textarea[name=note]", "after the firmware update")
    page.select_option("#manage-form select[name=plan_id]", str(plan_id))
    page.click("#manage-save")
    expect(page.locator("#run-name")).to_have_text("A100 rail 3")
    assert page.locator("#facts dt").all_inner_texts() == ["topology", "nic", "nccl"]
    assert page.locator("#facts dd").all_inner_texts() == ["rail-optimised", "ConnectX-6", "2.17.1"]
    expect(page.locator("#manage-note")).to_have_text("after the firmware update")
    no_sideways_scroll(page)
    screenshot(page, f"run-manage-{viewport['width']}")
    # A line that is not key = value is named, and nothing is sent.
    page.click("#manage-edit summary")
    page.fill("#manage-form textarea[name=facts]", "nic ConnectX-7")
    page.click("#manage-save")
    expect(page.locator("#manage-error")).to_have_text("Fabric facts: line 1 (“nic ConnectX-7”) is not “key = value”.")

    reading = {"name": "V with the plan", "run_ids": [other], "plans": {str(other): plan_id}}
    reader = httpx2.post(f"{live_server.url}/api/comparisons", json=reading, timeout=60).json()["id"]
    page.goto(f"{live_server.url}/plans/{plan_id}")
    page.click("#delete-open")
    expect(page.locator("#delete-consequences")).to_have_text(
        f"1 run is linked to plan #{plan_id} (#{run_id}): they will be unlinked and their statistics computed again "
        f"without its network. 1 saved comparison reads a run with it (#{reader} “V with the plan”): they will read "
        "that run with its own plan. This cannot be undone."
    )
    screenshot(page, f"plan-delete-confirm-{viewport['width']}")
    page.click("#delete-no")
    expect(page.locator("#delete-confirm")).to_be_hidden()
    page.click("#delete-open")
    page.click("#delete-yes")
    page.wait_for_url(f"{live_server.url}/")
    assert httpx2.get(f"{live_server.url}/api/runs/{run_id}", timeout=30).json()["plan_id"] is None

    page.goto(f"{live_server.url}/runs/{run_id}")
    page.click("#delete-open")
    expect(page.locator("#delete-consequences")).to_have_text(
        f"Run #{run_id} is in 1 saved comparison (#{comparison['id']} “A vs V”): they will show their other runs. "
        "Its samples, statistics, tags and facts are deleted with it; this cannot be undone."
    )
    no_sideways_scroll(page)
    page.click("#delete-yes")
    page.wait_for_url(f"{live_server.url}/runs")
    assert page.locator("#runs-table tbody a").first.inner_text() == V100_BROADCAST.name
    assert httpx2.get(f"{live_server.url}/api/runs/{run_id}", timeout=30).status_code == 404
    watch.assert_clean()


def test_a_share_link_is_labelled_and_a_comparison_deleted_with_its_links(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    run_ids = [upload(live_server, A100), upload(live_server, V100_BROADCAST)]
    comparison = httpx2.post(
        f"{live_server.url}/api/comparisons", json={"name": "A vs V", "run_ids": run_ids}, timeout=60
    ).json()
    page.goto(f"{live_server.url}/comparisons/{comparison['id']}")
    page.fill("#share-label", "vendor review")
    page.click("#share-create")
    expect(page.locator("#share-table input.share-label")).to_have_value("vendor review")
    page.fill("#share-table input.share-label", "team review")
    page.press("#share-table input.share-label", "Enter")
    shares = f"{live_server.url}/api/comparisons/{comparison['id']}/shares"
    page.wait_for_function("url => fetch(url).then(r => r.json()).then(s => s[0].label === 'team review')", arg=shares)
    page.click("#delete-open")
    expect(page.locator("#delete-consequences")).to_have_text(
        f"Comparison #{comparison['id']} has 1 share link (1 active): they are deleted with it and stop opening it. "
        "Its runs stay. This cannot be undone."
    )
    page.click("#delete-yes")
    page.wait_for_url(f"{live_server.url}/compare")
    assert httpx2.get(shares, timeout=30).status_code == 404
    assert [run["id"] for run in httpx2.get(f"{live_server.url}/api/runs", timeout=30).json()] == run_ids[::-1]
    watch.assert_clean()
