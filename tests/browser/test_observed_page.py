"""An observed run's page in Chromium at 1280×800 and 390×844: the communicators, the KCCB trial that replays the
job, and, against the plan of the same model, every collective of a real DDP step matched, with no horizontal
scroll."""

from pathlib import Path

import pytest
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Browser, expect

from emuplan.results.budget import ImportBudget
from emuplan.services import imports as run_imports
from emuplan.store.db import Database
from live_server import LiveServer
from profiled_ddp import saved_ddp_plan


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_an_observed_run_shows_what_it_sent_against_its_plan(
    traces: list[Path], database: Database, live_server: LiveServer, browser: Browser, viewport: dict
) -> None:
    plan_id = saved_ddp_plan(database)
    with database.writing() as session, ImportBudget() as budget:
        run_id = run_imports.import_observed_files(session, traces, plan_id=plan_id, budget=budget).id
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(f"{live_server.url}/runs/{run_id}")
    expect(page.locator("#observed-summary")).to_have_text("plan predicted 100 % of the bytes per step")
    expect(page.locator("#observed-communicators tbody td")).to_have_text(["pg 0 (default_pg)", "2", "0, 1", "vm"])
    expect(page.locator("#observed-groups tbody tr")).to_have_count(4)
    expect(page.locator("#observed-groups tbody tr").nth(2).locator("td").nth(6)).to_have_text("—")  # gloo states none
    rows = page.locator("#observed-rows tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.nth(1).locator("td")).to_have_text(
        ["matched", "all_reduce", "2", "4,239,400", "4,239,400", "1", "1", "4,239,400", "4,239,400"]
    )
    # A KCCB trial from reality: the job's trials, downloaded as a plan's are.
    expect(page.locator("#observed-kccb a")).to_have_text(["KCCB YAML", "KCCB JSON", "KCCB list (text)"])
    with page.expect_download() as download:
        page.locator("#observed-kccb-yaml").click()
    assert download.value.suggested_filename == f"run-{run_id}-kccb.yaml"
    page.locator("#observed").scroll_into_view_if_needed()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"observed-run-{'desktop' if viewport is DESKTOP else 'phone'}")
    watch.assert_clean()
    page.close()
