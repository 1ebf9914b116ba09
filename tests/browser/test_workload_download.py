"""The saved plan page offers the Chakra traces as a download, and the zip it gives decodes."""

import zipfile
from pathlib import Path

import httpx2
from browser_support import PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect

from emuplan.workload.chakra import et_def_pb2 as et
from emuplan.workload.chakra.bundle import attribute, decode_trace
from live_server import LiveServer


def save_plan(server: LiveServer, body: dict) -> int:
    response = httpx2.post(f"{server.url}/api/plans", json=body, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_chakra_download_gives_a_zip_whose_traces_decode(
    live_server: LiveServer, page: Page, watch: PageWatch, tmp_path: Path
) -> None:
    plan_id = save_plan(
        live_server, {"model": "fashion-mnist-mlp", "strategy": "data", "mode": "framework", "gpus": 4, "name": "ddp"}
    )
    page.goto(f"{live_server.url}/plans/{plan_id}")
    link = page.locator("#download-chakra")
    expect(link).to_have_text("Chakra traces (zip)")
    with page.expect_download() as download_info:
        link.click()
    download = download_info.value
    assert download.suggested_filename == f"plan-{plan_id}-chakra.zip"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    with zipfile.ZipFile(saved) as archive:
        traces = {name: decode_trace(archive.read(name)) for name in archive.namelist() if name.endswith(".et")}
    assert sorted(traces) == [f"workload.{rank}.et" for rank in range(4)]
    for metadata, nodes in traces.values():
        assert metadata.version == "0.0.4"
        sizes = [attribute(node, "comm_size") for node in nodes if node.type == et.COMM_COLL_NODE]
        assert sizes == [971048]
    screenshot(page, "plan-chakra-desktop")
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, "plan-chakra-phone")

    # A tutorial-mode plan has no trace to offer: the framework's schedule is what the trace follows.
    tutorial_id = save_plan(live_server, {"model": "fashion-mnist-mlp", "strategy": "data"})
    page.goto(f"{live_server.url}/plans/{tutorial_id}")
    expect(page.locator("#download-yaml")).to_be_visible()
    expect(page.locator("#download-chakra")).to_have_count(0)
    watch.assert_clean()
