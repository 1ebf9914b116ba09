"""The compare page with a profiled DDP job (training) and a benchmark of its plan (emulation), in Chromium at
1280×800 and 390×844: which run is which, the job's groups under the benchmark's sizes, both steps, no horizontal
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

# The DDP plan's four collectives, five iterations each at one time (µs): a benchmark of the plan.
BENCHMARK_US = {("all_reduce", 4239400): 1000.0, ("all_reduce", 2109440): 500.0, ("broadcast", 8192): 100.0,
                ("broadcast", 8): 50.0}  # fmt: skip


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_training_job_against_a_benchmark_of_its_plan(
    traces: list[Path], database: Database, live_server: LiveServer, browser: Browser, viewport: dict
) -> None:
    rows = "".join(f"{i},{op},{size},{us}\n" for (op, size), us in BENCHMARK_US.items() for i in range(5))
    csv = f"iteration,collective,size_bytes,duration_us\n{rows}".encode()
    plan_id = saved_ddp_plan(database)
    with database.writing() as session:
        benchmark = run_imports.import_result_file(
            session, csv, "bench.csv", name="Benchmark of the plan", plan_id=plan_id
        )
        with ImportBudget() as budget:
            job = run_imports.import_observed_files(session, traces, name="DDP job", plan_id=plan_id, budget=budget)
        benchmark_id, job_id = benchmark.id, job.id
    page = browser.new_page(viewport=viewport)
    watch = PageWatch(page)
    page.goto(f"{live_server.url}/compare?runs={benchmark_id},{job_id}")
    expect(page.locator("#training-vs-emulation")).to_contain_text(
        f"Training: #{job_id} DDP job (observed: the job's own records). "
        f"Emulation: #{benchmark_id} Benchmark of the plan"
    )
    table = page.locator("#compare-groups table tbody tr")
    expect(table).to_have_count(8)  # four sizes, each with the benchmark's row and the job's under it
    expect(table.nth(0).locator("td").nth(0)).to_have_text("all_reduce · 2109440 B")
    expect(table.nth(1).locator("td").nth(1)).to_contain_text(f"#{job_id} DDP job training")
    expect(table.nth(1).locator("td").nth(1)).to_contain_text("pg 0 (default_pg)")
    expect(page.locator("#step-cost-table tbody tr")).to_have_count(2)
    expect(page.locator("#step-cost-table tbody tr").nth(0).locator("td").nth(1)).to_have_text("1.65")
    page.wait_for_function("document.body.dataset.chartsDrawn === 'true'")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"training-vs-emulation-{'desktop' if viewport is DESKTOP else 'phone'}")
    watch.assert_clean()
    page.close()
