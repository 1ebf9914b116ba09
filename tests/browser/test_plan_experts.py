"""Planning a mixture of experts with expert parallelism on the plan page, in Chromium against a real server."""

import re

import httpx2
from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect
from test_dashboard import no_page_overflow

from live_server import LiveServer


def test_planning_mixtral_with_expert_parallelism_shows_the_all_to_alls(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    page.goto(live_server.url + "/plan")
    page.select_option("#model", "mixtral-8x7b")
    page.fill("#ep", "8")
    framework = page.locator("#mode-framework")
    workload = page.locator("#workload-framework")
    all_to_all = workload.locator("tbody tr", has_text="MoE token dispatch + combine")
    # 1 × 4096 tokens × top-2 × hidden 4096 × 2 bytes; 2 × 32 MoE layers × 128 micro-batches per step.
    expect(all_to_all.locator("td")).to_have_text(
        ["MoE token dispatch + combine (per MoE layer ×2)", "all_to_all", "forward", "ep × 8",
         "67,108,864", "67,108,864", "8,192", "4,732.6"],
        timeout=30000,
    )  # fmt: skip
    expect(framework.locator("h3").first).to_have_text("ALGO_ALL_TO_ALL_PARALLEL (1)")
    # The tokens, and since Megatron-core 0.12 their routing probabilities (4096 × 2 rows × 2 bytes).
    expect(framework.locator(".data-sizes").first).to_have_text("[67108864, 16384]")
    page.select_option("#megatron_core", "0.11")
    expect(framework.locator(".data-sizes").first).to_have_text("[67108864]")
    page.select_option("#megatron_core", "0.16")
    expect(framework.locator(".data-sizes").first).to_have_text("[67108864, 16384]")
    expect(workload.locator(".notes li", has_text="carved from the 8 DP ranks")).to_have_count(1)
    expect(workload.locator(".notes li", has_text="Load imbalance")).to_contain_text("--hot-expert-factor")
    # The seeds have no experts: the tutorial rules do not apply, so their card goes and a line says why.
    expect(page.locator("#mode-tutorial")).to_be_hidden()
    expect(page.locator("#mode-skipped")).to_have_text(
        "Tutorial rules do not apply here: EP degree: tutorial mode reproduces the seed notebooks, which have no "
        "mixture of experts; plan expert parallelism in framework mode."
    )
    # On a phone the result sits under the fields, in view while the EP degree is typed.
    page.set_viewport_size(PHONE)
    page.fill("#ep", "4")
    expect(framework.locator("dd", has_text="ep · ").first).to_have_text("ep · 4 ranks")
    for selector in ("#ep", "#mode-framework .trial-count", "#mode-framework .data-sizes"):
        box = page.locator(selector).first.bounding_box()
        assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], selector
    ep_box, result_box = page.locator("#ep").bounding_box(), page.locator("#plan-results").bounding_box()
    assert ep_box["y"] + ep_box["height"] <= result_box["y"]  # the strip never covers the field
    screenshot(page, "plan-mixtral-ep4-typing-phone")
    page.set_viewport_size(DESKTOP)
    page.fill("#ep", "8")
    expect(framework.locator("dd", has_text="ep · ").first).to_have_text("ep · 8 ranks")
    page.fill("#hot_expert_factor", "2")
    expect(all_to_all.locator("td").nth(5)).to_have_text("134,217,728")
    screenshot(page, "plan-mixtral-ep8-desktop")
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    screenshot(page, "plan-mixtral-ep8-phone")
    page.fill("#hot_expert_factor", "9")
    expect(page.locator("#hot_expert_factor-message")).to_contain_text("must be between 1 (even load) and ep 8")
    page.fill("#hot_expert_factor", "")
    page.set_viewport_size(DESKTOP)
    page.fill("#plan-name", "mixtral ep8")
    page.click("#save-plan")
    page.wait_for_url(re.compile(r"/plans/\d+$"))
    expect(page.locator('dd[data-field="ep"]')).to_have_text("8")
    expect(page.locator("#download-chakra")).to_be_visible()
    expect(page.locator("#workload-framework tbody tr").first.locator("td").nth(5)).to_have_text("67,108,864")
    screenshot(page, "plan-mixtral-ep8-saved-desktop")
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    screenshot(page, "plan-mixtral-ep8-saved-phone")
    # Experts with tensor parallelism: the Chakra export schedules their gathers too.
    saved = httpx2.post(f"{live_server.url}/api/plans", json={"model": "mixtral-8x7b", "ep": 4, "tp": 2}).json()
    page.goto(f"{live_server.url}/plans/{saved['id']}")
    expect(page.locator("#download-chakra")).to_be_visible()
    expect(page.locator("#no-chakra")).to_have_count(0)
    assert no_page_overflow(page)
    screenshot(page, "plan-mixtral-ep4-tp2-saved-phone")
    page.set_viewport_size(DESKTOP)
    screenshot(page, "plan-mixtral-ep4-tp2-saved-desktop")
    watch.forgive_http_status(422)  # the tutorial column's ep, and the hot-expert factor above ep
    watch.assert_clean()
