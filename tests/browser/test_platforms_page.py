"""The platforms page in Chromium: the built-ins' figures and sources, a profile added from a copy of one,
edited and deleted through its forms, at 1280×800 and 390×844 without sideways scrolling."""

import re

from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect

from emuplan.workload.platforms import BUILTIN_PLATFORMS
from live_server import LiveServer


def no_page_overflow(page: Page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_copy_a_builtin_edit_and_delete_it_at_both_widths(
    live_server: LiveServer, page: Page, watch: PageWatch
) -> None:
    page.goto(live_server.url + "/platforms")
    expect(page.locator("nav[aria-label=main] a[aria-current=page]")).to_have_text("Platforms")
    expect(page.locator("#platforms .platform h2")).to_have_text([p.title for p in BUILTIN_PLATFORMS.values()])
    gb200 = page.locator("#platform-gb200-nvl72")
    expect(gb200.locator(".scale-up")).to_have_text(
        "NVLink 5 (NVL72): 900 GB/s per GPU per direction, 72 GPUs per domain"
    )
    expect(gb200.locator(".scale-out")).to_have_text(
        "ConnectX-7 400G: 4 × 400 Gbit/s per node = 50 GB/s per GPU per direction"
    )
    gb200.locator("summary").click()
    expect(gb200.locator(".sources li")).to_have_count(3)
    expect(gb200.locator(".sources li").first).to_contain_text("https://docs.nvidia.com/dgx/dgxgb200-user-guide/")
    screenshot(page, "platforms-desktop")
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    screenshot(page, "platforms-phone")
    page.set_viewport_size(DESKTOP)

    page.locator("#platform-h100-ndr a:has-text('Copy as new')").click()
    page.wait_for_url(re.compile(r"/platforms\?copy=h100-ndr"))
    expect(page.locator("#platform-form input[name=nic_gbit_s]")).to_have_value("400")
    page.fill("#platform-form input[name=name]", "h100-roce-200g")
    page.fill("#platform-form input[name=title]", "H100 SXM + RoCE 200G")
    page.fill("#platform-form input[name=scale_out_fabric]", "RoCE 200G")
    page.fill("#platform-form input[name=nic_gbit_s]", "200")
    page.fill("#platform-form textarea[name=sources]", "our acceptance test, 2026-11")
    page.click("#platform-form button[type=submit]")
    expect(page.locator(".note[role=status]")).to_have_text("Platform h100-roce-200g added.")
    added = page.locator("#platform-h100-roce-200g")
    expect(added.locator(".scale-out")).to_have_text(
        "RoCE 200G: 8 × 200 Gbit/s per node = 25 GB/s per GPU per direction"
    )

    added.locator("a:has-text('Edit')").click()
    expect(page.locator("#platform-form h2")).to_have_text("Edit h100-roce-200g")
    page.fill("#platform-form input[name=fail_below_pct]", "90")
    page.click("#platform-form button[type=submit]")
    expect(page.locator(".error[role=alert]")).to_have_text(
        "fail_below_pct: 90 % must be below degraded_below_pct (80 %)"
    )
    expect(page.locator("#platform-form input[name=fail_below_pct]")).to_have_value("90")
    page.fill("#platform-form input[name=fail_below_pct]", "60")
    page.click("#platform-form button[type=submit]")
    expect(page.locator(".note[role=status]")).to_have_text("Platform h100-roce-200g saved.")
    expect(added).to_contain_text("fails below 60 %")
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    page.set_viewport_size(DESKTOP)

    added.locator("button:has-text('Delete')").click()
    expect(page.locator(".note[role=status]")).to_have_text(
        "Platform h100-roce-200g deleted; 0 runs and 0 plans that named it now have no platform."
    )
    expect(page.locator("#platform-h100-roce-200g")).to_have_count(0)
    watch.forgive_http_status(422)  # the threshold refused on purpose
    watch.assert_clean()
