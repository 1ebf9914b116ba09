"""Roles in Chromium at 1280x800 and 390x844: a viewer previews plans and sees no control that would be
refused; an admin manages accounts on /admin, and cannot remove the last admin."""

import re

from browser_support import DESKTOP, PHONE, PageWatch, screenshot
from playwright.sync_api import Page, expect
from test_sign_in import no_page_overflow

from emuplan.roles import Role
from emuplan.services.plans import plan_request
from emuplan.store import plans as plan_store
from emuplan.store.db import Database
from emuplan.workload.document import PlanRequest
from live_server import LiveServer


def sign_in(page: Page, server: LiveServer, name: str, password: str, target: str) -> None:
    page.goto(f"{server.url}/sign-in?next={target.replace('/', '%2F')}")
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(re.escape(target) + "$"))


def both_widths(page: Page, name: str) -> None:
    screenshot(page, f"{name}-desktop")
    page.set_viewport_size(PHONE)
    assert no_page_overflow(page)
    screenshot(page, f"{name}-phone")
    page.set_viewport_size(DESKTOP)


def save_plan(database: Database) -> int:
    """A preset plan, saved as `emuplan plan --save` saves it."""
    request = PlanRequest(model="fashion-mnist-mlp", strategy="data")
    document, _ = plan_request(request)
    with database.writing() as session:
        return plan_store.save_document(session, document, request, "mlp for viewers").id


def test_a_viewer_previews_a_plan_and_sees_no_control_that_would_be_refused(
    accounts_server: LiveServer, add_account, database: Database, page: Page, watch: PageWatch
) -> None:
    plan_id = save_plan(database)
    sign_in(page, accounts_server, "vic", add_account("vic", Role.viewer), f"/plans/{plan_id}")
    expect(page.locator("h1")).to_have_text("mlp for viewers")
    expect(page.locator("#edit-as-new")).to_have_count(0)
    expect(page.locator("#measure")).to_have_count(0)
    both_widths(page, "plan-saved-viewer")
    page.click("#preview-other-settings")
    page.wait_for_url(re.compile(rf"/plan\?from={plan_id}$"))
    # The preview is answered for a viewer: the sizes, and no error anywhere.
    expect(page.locator("#mode-tutorial .data-sizes")).to_have_text(["[971048]"], timeout=30000)
    page.fill("#batch_size", "128")
    expect(page.locator("#workload-tutorial .workload")).not_to_be_empty()
    expect(page.locator(".error:visible, .field-message:visible")).to_have_count(0)
    expect(page.locator("#save-needs-editor")).to_have_text(
        "Previews only: saving plans and uploading models needs the editor role; your account has the viewer role."
    )
    expect(page.locator("#save-plan, #model-form, #plan-name")).to_have_count(0)
    expect(page.locator("nav[aria-label=main] a")).to_have_text(
        ["Home", "Plan", "Runs", "Compare", "Trend", "Platforms", "API"]
    )
    both_widths(page, "plan-viewer")
    watch.assert_clean()


def test_an_admin_adds_changes_resets_and_removes_an_account_but_never_the_last_admin(
    accounts_server: LiveServer, add_account, page: Page, watch: PageWatch
) -> None:
    sign_in(page, accounts_server, "root", add_account("root", Role.admin), "/runs")
    page.click(".topbar .who a:has-text('Accounts')")
    page.wait_for_url(re.compile(r"/admin$"))
    expect(page.locator("h1")).to_have_text("Accounts")

    page.fill("#add-account input[name=name]", "newcomer")
    page.select_option("#add-account select[name=role]", "editor")
    page.click("#add-account button")
    expect(page.locator("#admin-notice")).to_have_text("Account 'newcomer' added as editor.")
    expect(page.locator("#issued-password-value")).to_have_text(re.compile(r"^[A-Za-z0-9_\-]{16}$"))
    rows = page.locator(".account-row")
    expect(rows.locator(".account-name")).to_have_text(["newcomer", "root"])
    expect(rows.locator(".account-role")).to_have_text(["editor", "admin"])
    both_widths(page, "admin-accounts")

    newcomer = page.locator(".account-row[data-name=newcomer]")
    newcomer.locator("select[name=role]").select_option("viewer")
    newcomer.locator("button:has-text('Set role')").click()
    expect(page.locator("#admin-notice")).to_have_text("'newcomer' is now viewer.")
    expect(newcomer.locator(".account-role")).to_have_text("viewer")
    expect(page.locator("#issued-password-value")).to_have_count(0)

    expect(page.locator(".last-admin")).to_have_count(1)  # root's, while newcomer is no admin
    newcomer.locator("select[name=role]").select_option("admin")
    newcomer.locator("button:has-text('Set role')").click()
    expect(page.locator(".last-admin")).to_have_count(0)  # two admins: either may go
    expect(page.locator(".account-row[data-name=root] summary")).to_have_text("Remove…")
    newcomer.locator("select[name=role]").select_option("viewer")
    newcomer.locator("button:has-text('Set role')").click()

    newcomer.locator("button:has-text('New password')").click()
    expect(page.locator("#admin-notice")).to_have_text("New password for 'newcomer'.")
    expect(page.locator("#issued-password-value")).to_have_text(re.compile(r"^[A-Za-z0-9_\-]{16}$"))

    # Removing asks first: the button is behind "Remove…".
    expect(newcomer.locator("button.danger")).to_be_hidden()
    newcomer.locator("summary:has-text('Remove')").click()
    newcomer.locator("button.danger").click()
    expect(page.locator("#admin-notice")).to_have_text("Account 'newcomer' removed, with its sessions and API tokens.")
    expect(rows.locator(".account-name")).to_have_text(["root"])

    # The last admin's row offers neither a role change nor a removal (the server refuses both), and says why.
    root = page.locator(".account-row[data-name=root]")
    expect(root.locator(".last-admin")).to_have_text(
        "The last admin: make another account admin before changing this one's role or removing it."
    )
    expect(root.locator("select[name=role], summary, button.danger")).to_have_count(0)
    expect(root.locator("button:has-text('New password')")).to_be_visible()
    both_widths(page, "admin-last-admin")
    watch.assert_clean()
