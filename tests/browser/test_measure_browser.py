""" "Measure locally" on a saved plan's page, in Chromium: progress, the new run, cancel."""

import socket

from browser_support import PageWatch, screenshot
from playwright.sync_api import Page, expect

from live_server import LiveServer
from scheduling import EXPECTED_REALTIME_POLICY


def saved_seed_plan(page: Page, live_server: LiveServer) -> int:
    response = page.request.post(
        f"{live_server.url}/api/plans", data={"model": "fashion-mnist-mlp", "strategy": "data", "name": "seed data"}
    )
    assert response.status == 201
    return response.json()["id"]


def test_measure_locally_shows_progress_and_links_the_measured_run(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    plan_id = saved_seed_plan(page, live_server)
    page.goto(f"{live_server.url}/plans/{plan_id}")
    expect(page.locator("#measure-iterations")).to_have_attribute("placeholder", "8")
    expect(page.locator("#measure-realtime")).to_be_checked()
    page.fill("#measure-world-size", "2")
    page.fill("#measure-iterations", "8000")  # long enough to watch it progress (~3 s on 2 idle cores)
    page.click("#measure-start")
    expect(page.locator("#measure-start")).to_be_disabled()
    expect(page.locator("#measure-status")).to_contain_text("iterations done", timeout=60000)
    expect(page.locator("#measure-progress")).to_be_visible()
    screenshot(page, "plan-measuring-desktop")

    link = page.locator("#measure-run-link")
    expect(link).to_be_visible(timeout=90000)
    expect(page.locator("#measure-progress")).to_be_hidden()
    link.click()
    expect(page.locator(".badge.origin-measured").first).to_have_text("measured")
    expect(page.locator("body")).to_contain_text(
        f"measured locally (gloo, world size 2, host {socket.gethostname()}, timed at {EXPECTED_REALTIME_POLICY})"
    )
    watch.assert_clean()


def test_cancel_stops_the_measurement_and_stores_nothing(live_server: LiveServer, page: Page, watch: PageWatch) -> None:
    plan_id = saved_seed_plan(page, live_server)
    page.goto(f"{live_server.url}/plans/{plan_id}")
    page.fill("#measure-world-size", "2")
    page.fill("#measure-iterations", "100000")
    page.uncheck("#measure-realtime")  # a long run: leave the machine's scheduling alone
    page.click("#measure-start")
    expect(page.locator("#measure-status")).to_contain_text("iterations done", timeout=60000)
    [job] = page.request.get(f"{live_server.url}/api/measurements").json()
    assert (job["world_size"], job["scheduling"]) == (2, "normal")
    page.click("#measure-cancel")
    expect(page.locator("#measure-status")).to_have_text("Cancelled: no run stored.", timeout=20000)
    expect(page.locator("#measure-start")).to_be_enabled()
    assert page.request.get(f"{live_server.url}/api/runs").json() == []
    watch.assert_clean()
