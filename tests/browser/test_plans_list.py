"""/plans in Chromium at 1280x800 and 390x844: every stored plan with its linked runs, for a viewer too, whose
"Plan a workload" opens the preview (no Save); never wider than the screen."""

import re

from browser_support import DESKTOP, PageWatch
from playwright.sync_api import Page, expect
from test_roles_pages import both_widths, save_plan, sign_in

from emuplan.roles import Role
from emuplan.store.db import Database
from live_server import LiveServer


def test_a_viewer_finds_every_plan_on_the_plans_list_and_previews_one(
    accounts_server: LiveServer, add_account, database: Database, page: Page, watch: PageWatch
) -> None:
    plan_id = save_plan(database)
    page.set_viewport_size(DESKTOP)
    sign_in(page, accounts_server, "vi", add_account("vi", Role.viewer), "/")
    page.click("#all-plans")
    expect(page.locator("h1")).to_have_text("Plans")
    row = page.locator("#plans-table tbody tr")
    saved = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d$")
    cells = [str(plan_id), "mlp for viewers", "fashion-mnist-mlp", "data", "tutorial", "8", "—", "", "0", saved]
    expect(row.locator("td")).to_have_text(cells)
    # A viewer previews plans on /plan (saving is the editor's): the way there is offered.
    expect(page.locator("a.button:has-text('Plan a workload')")).to_be_visible()
    both_widths(page, "plans-viewer")
    row.locator("a").first.click()
    expect(page.locator("h1")).to_contain_text("mlp for viewers")

    page.go_back()
    page.click("a.button:has-text('Plan a workload')")
    expect(page.locator("#plan-form")).to_be_visible()
    expect(page.locator("#save-plan")).to_have_count(0)
    watch.assert_clean()
