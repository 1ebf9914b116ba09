"""A run's collective in Chromium at 1280×800: chosen in the upload form's select, set after import with the
run page's form (editors), the page's figures following."""

import re
from pathlib import Path

from browser_support import DESKTOP, PageWatch, screenshot
from playwright.sync_api import Page, expect

from live_server import LiveServer
from paths import NCCL_TESTS

# Its cells fit all_gather and all_to_all alike: under a name that says neither it is stored as 'unknown'.
ALLTOALL = NCCL_TESTS / "v100-64rank-alltoall-pre2.13.txt"


def upload_with_the_form(page: Page, server: LiveServer, path: Path, collective: str) -> None:
    page.goto(server.url + "/runs")
    page.set_input_files("#upload-file", str(path))
    page.select_option("#upload-collective", collective)
    page.click("#upload-submit")
    page.wait_for_url(re.compile(r"/runs/\d+$"))


def collective_options(page: Page, select: str) -> list[str]:
    return page.locator(f"{select} option").evaluate_all("options => options.map(o => o.value)")


def test_the_upload_form_and_the_run_page_set_the_collective(
    live_server: LiveServer, page: Page, watch: PageWatch, tmp_path: Path
) -> None:
    page.set_viewport_size(DESKTOP)
    renamed = tmp_path / "slurm-4242.out"
    renamed.write_bytes(ALLTOALL.read_bytes())
    page.goto(live_server.url + "/runs")
    assert collective_options(page, "#upload-collective") == [
        "", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "send_recv",
    ]  # fmt: skip
    assert collective_options(page, "#upload-format")[:2] == ["", "per-iteration"]

    upload_with_the_form(page, live_server, renamed, "")  # "from the file": the cells leave it open
    assert collective_options(page, "#relabel-from") == ["unknown"]
    expect(page.locator("#relabel")).to_contain_text("Collective")
    assert page.evaluate("document.documentElement.scrollWidth") == DESKTOP["width"]
    screenshot(page, "run-relabel-desktop")

    page.select_option("#relabel-to", "all_to_all")
    page.click("#relabel-submit")
    expect(page.locator(".note", has_text="collective set after import: unknown → all_to_all")).to_have_count(1)
    assert collective_options(page, "#relabel-from") == ["all_to_all"]

    # The same log again (one more line: not a duplicate), its collective chosen in the upload form.
    renamed.write_bytes(ALLTOALL.read_bytes() + b"\n")
    upload_with_the_form(page, live_server, renamed, "all_to_all")
    assert collective_options(page, "#relabel-from") == ["all_to_all"]

    # A choice the log's cells rule out is refused, the server's message shown in the form.
    renamed.write_bytes(ALLTOALL.read_bytes() + b"\n\n")
    page.goto(live_server.url + "/runs")
    page.set_input_files("#upload-file", str(renamed))
    page.select_option("#upload-collective", "broadcast")
    page.click("#upload-submit")
    expect(page.locator("#upload-error")).to_have_text(
        "slurm-4242.out: line 3: collective 'broadcast' was given, but its redop/root/count cells fit only "
        "all_gather or all_to_all; leave the collective out (a run can be relabelled after import)"
    )
    watch.forgive_http_status(400)
    watch.assert_clean()
