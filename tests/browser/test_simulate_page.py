"""A saved plan's "Simulate with ASTRA-sim" section: with the shared build it runs the plan and shows each rank's
simulated step beside the planned communication, at desktop and phone widths; without the setting it says how to
install ASTRA-sim; a plan without Chakra traces says why it cannot be simulated."""

from collections.abc import Iterator

import httpx2
import pytest
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect

from astra_sim_binary import requires_astra_sim
from emuplan.settings import Settings
from emuplan.simulate.options import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S
from live_server import LiveServer, start_server, stop_server
from paths import ASTRA_SIM

HYBRID = {"model": "fashion-mnist-mlp", "strategy": "hybrid", "mode": "framework", "tp": 2, "pp": 2, "dp": 2,
          "gpus_per_host": 4, "hosts": 2, "name": "seed hybrid"}  # fmt: skip


@pytest.fixture
def astra_server(database_url: str) -> Iterator[LiveServer]:
    live = start_server(Settings(database_url=database_url, demo=False, astra_sim=ASTRA_SIM))
    yield live
    stop_server(live)


def save_plan(server: LiveServer, body: dict) -> int:
    response = httpx2.post(f"{server.url}/api/plans", json=body, timeout=30)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def no_horizontal_scroll(page: Page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@requires_astra_sim
def test_simulate_shows_each_ranks_step_beside_the_planned_communication(
    astra_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    plan_id = save_plan(astra_server, HYBRID)
    page.goto(f"{astra_server.url}/plans/{plan_id}")
    section = page.locator("#simulate")
    expect(section.locator("h2")).to_have_text("Simulate with ASTRA-sim")
    # The time limit starts at the API's default, bounded by its ceiling; what the user sets is what the job gets.
    limit = section.locator("#simulate-timeout")
    assert (limit.input_value(), limit.get_attribute("max")) == (f"{DEFAULT_TIMEOUT_S:g}", f"{MAX_TIMEOUT_S:g}")
    limit.fill("300")
    # The GPU and the share of its peak start at the API's defaults.
    assert section.locator("#simulate-gpu option:checked").inner_text() == "NVIDIA H100 SXM · 989 TFLOP/s"
    assert section.locator("#simulate-utilisation").input_value() == "40"
    section.locator("#simulate-start").click()
    expect(page.locator("#simulate-status")).to_contain_text("Simulated ", timeout=60_000)
    jobs = httpx2.get(f"{astra_server.url}/api/simulations", params={"plan_id": plan_id}, timeout=30).json()
    assert [job["request"] for job in jobs] == [{"gpu": "h100-sxm", "utilisation": 0.4, "timeout_s": 300.0}]
    expect(page.locator("#simulate-network")).to_have_text(
        "Network: 4 × 2 NPUs as rings, links 12.5 GB/s and 5,000 ns."
    )
    expect(page.locator("#simulate-all-to-all")).to_contain_text(
        "all-to-all runs as NCCL's grouped send/recv moves it, with ASTRA-sim's direct implementation one peer at a "
        "time (direct1)"
    )
    expect(page.locator("#simulate-summary")).to_have_text(
        "Simulated step 635.9 µs (ranks 0-1, 4-5): compute 13.0 µs at 40% of NVIDIA H100 SXM's bf16 peak, exposed "
        "communication 622.9 µs."
    )
    ranks = page.locator("#simulate-ranks table")
    expect(ranks.locator("thead th")).to_have_text(
        ["ranks", "count", "step (µs)", "compute (µs)", "exposed comm (µs)", "exposed (% of step)"]
    )
    expect(ranks.locator("tbody tr").nth(0).locator("td")).to_have_text(
        ["0-1, 4-5", "4", "635.9", "13.0", "622.9", "98.0"]
    )
    expect(ranks.locator("tbody tr").nth(1).locator("td")).to_have_text(
        ["2-3, 6-7", "4", "585.6", "13.0", "572.6", "97.8"]
    )
    planned = page.locator("#simulate-planned table")
    expect(planned.locator("thead th")).to_have_text(["dimension", "collectives per step", "ideal time (µs)"])
    expect(planned.locator("tbody tr td:first-child")).to_have_text(["tp", "pp", "dp", "all"])
    expect(planned.locator("tbody tr").nth(3).locator("td")).to_have_text(["all", "7", "590.8"])
    expect(page.locator("#simulate-start")).to_be_enabled()
    section.scroll_into_view_if_needed()
    assert no_horizontal_scroll(page)
    screenshot(page, "plan-simulate-desktop")
    page.set_viewport_size(PHONE)
    section.scroll_into_view_if_needed()
    assert no_horizontal_scroll(page)
    screenshot(page, "plan-simulate-phone")

    # A reload shows the plan's last simulation without running it again.
    page.set_viewport_size(DESKTOP)
    page.reload()
    expect(page.locator("#simulate-summary")).to_contain_text("Simulated step 635.9 µs")

    # Another GPU at another share of its peak. A compute node lasts FLOPs ÷ (peak × utilisation), at least 1 µs:
    # this small model's 13 nodes per rank all took the floor on an H100 at 40 %; at 2.5 times as long on an A100
    # at 50 %, six of them take 3 µs (the traces' durations: 1, 1, 3, 1, 1, 1, 3, 3, 1, 1, 3, 3, 1 on rank 0).
    section.locator("#simulate-gpu").select_option("a100")
    section.locator("#simulate-utilisation").fill("50")
    section.locator("#simulate-start").click()
    expect(page.locator("#simulate-summary")).to_contain_text("NVIDIA A100 SXM", timeout=60_000)
    jobs = httpx2.get(f"{astra_server.url}/api/simulations", params={"plan_id": plan_id}, timeout=30).json()
    # The time limit is the shown simulation's (the reload above set the form as that one was run).
    assert jobs[0]["request"] == {"gpu": "a100", "utilisation": 0.5, "timeout_s": 300.0}
    # A reload shows that simulation, the form set as it was run.
    page.reload()
    expect(page.locator("#simulate-summary")).to_contain_text("NVIDIA A100 SXM")
    assert section.locator("#simulate-gpu").input_value() == "a100"
    assert (section.locator("#simulate-utilisation").input_value(), limit.input_value()) == ("50", "300")
    expect(page.locator("#simulate-summary")).to_have_text(
        "Simulated step 641.9 µs (ranks 0-1, 4-5): compute 25.0 µs at 50% of NVIDIA A100 SXM's bf16 peak, exposed "
        "communication 616.9 µs."
    )
    watch.assert_clean()


def test_without_astra_sim_the_section_says_how_to_install_it(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    plan_id = save_plan(live_server, HYBRID)
    page.goto(f"{live_server.url}/plans/{plan_id}")
    note = page.locator("#simulate-install")
    expect(note).to_contain_text("ASTRA-sim is not set up on this server.")
    expect(note).to_contain_text('"Simulating a plan with ASTRA-sim"')
    expect(note).to_contain_text("EMUPLAN_ASTRA_SIM")
    expect(page.locator("#simulate-start")).to_have_count(0)
    assert no_horizontal_scroll(page)
    screenshot(page, "plan-simulate-install-desktop")
    page.set_viewport_size(PHONE)
    assert no_horizontal_scroll(page)
    screenshot(page, "plan-simulate-install-phone")

    tutorial_id = save_plan(live_server, {"model": "fashion-mnist-mlp", "strategy": "data"})
    page.goto(f"{live_server.url}/plans/{tutorial_id}")
    expect(page.locator("#simulate-refused")).to_contain_text("this plan has none (mode: a Chakra trace follows")
    watch.assert_clean()
