"""Sign-in in Chromium against a real server with EMUPLAN_AUTH=accounts: sign in, plan, make a token, sign out."""

import re

from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect

from emuplan.roles import Role
from live_server import LiveServer


def no_page_overflow(page: Page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_sign_in_plan_make_a_token_and_sign_out(
    accounts_server: LiveServer, add_account, page: Page, watch: PageWatch
) -> None:
    password = add_account("ada", Role.editor)
    page.goto(accounts_server.url + "/plan")
    page.wait_for_url(re.compile(r"/sign-in\?next=%2Fplan$"))
    expect(page.locator("h1")).to_have_text("Sign in")
    expect(page.locator("nav[aria-label=main]")).to_have_count(0)
    screenshot(page, "sign-in-desktop")
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    screenshot(page, "sign-in-phone")
    page.set_viewport_size(DESKTOP)

    page.fill("input[name=name]", "ada")
    page.fill("input[name=password]", "not her password")
    page.click("button[type=submit]")
    expect(page.locator(".error")).to_have_text("Wrong name or password.")
    expect(page.locator("input[name=name]")).to_have_value("ada")
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/plan$"))
    expect(page.locator(".topbar .who a")).to_have_text("ada · editor")

    page.select_option("#model", "fashion-mnist-mlp")
    page.select_option("#strategy", "data")
    expect(page.locator("#mode-tutorial .data-sizes")).to_have_text(["[971048]"], timeout=30000)
    page.fill("#plan-name", "planned while signed in")
    page.click("#save-plan")
    page.wait_for_url(re.compile(r"/plans/\d+$"))
    expect(page.locator("h1")).to_have_text("planned while signed in")

    page.click(".topbar .who a")
    page.wait_for_url(re.compile(r"/account$"))
    expect(page.locator(".page-head .sub")).to_have_text("Role: editor — may read, plan, upload, measure and share")
    page.fill("input[name=label]", "laptop CLI")
    page.select_option("select[name=expires_in_days]", "30")
    page.click("text=Make a token")
    expect(page.locator("#new-token-value")).to_have_text(re.compile(r"^emu_[A-Za-z0-9_\-]{43}$"))
    expect(page.locator("#tokens tbody tr td").first).to_have_text("laptop CLI")
    expect(page.locator("#tokens .token-state")).to_have_text("active")
    screenshot(page, "account-desktop")
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    # The token table fits the phone: its Revoke button is not scrolled away inside the table either.
    assert page.evaluate("document.querySelector('#tokens').parentElement.scrollWidth") <= page.evaluate(
        "document.querySelector('#tokens').parentElement.clientWidth"
    )
    screenshot(page, "account-phone")
    page.set_viewport_size(DESKTOP)
    page.click("#tokens button:has-text('Revoke')")
    page.wait_for_url(re.compile(r"/account$"))
    expect(page.locator("#tokens .token-state")).to_have_text("revoked")
    expect(page.locator("#new-token-value")).to_have_count(0)

    page.click("text=Sign out")
    page.wait_for_url(re.compile(r"/sign-in$"))
    page.goto(accounts_server.url + "/runs")
    page.wait_for_url(re.compile(r"/sign-in\?next=%2Fruns$"))
    watch.forgive_http_status(401)  # the wrong password, on purpose
    watch.assert_clean()


def test_a_viewer_sees_the_runs_without_an_upload_form(
    accounts_server: LiveServer, add_account, page: Page, watch: PageWatch
) -> None:
    password = add_account("vic", Role.viewer)
    page.goto(accounts_server.url + "/sign-in?next=%2Fruns")
    page.fill("input[name=name]", "vic")
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/runs$"))
    expect(page.locator("#upload-needs-editor")).to_have_text(
        "Uploading result files needs the editor role; your account has the viewer role."
    )
    expect(page.locator("#upload-form")).to_have_count(0)
    # The planner previews for a viewer too (saving is left out of it: test_roles_pages.py).
    expect(page.locator("nav[aria-label=main] a")).to_have_text(
        ["Home", "Plan", "Runs", "Compare", "Trend", "Platforms", "API"]
    )
    screenshot(page, "runs-viewer-desktop")
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    screenshot(page, "runs-viewer-phone")
    watch.assert_clean()
