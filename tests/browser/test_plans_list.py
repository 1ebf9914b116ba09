"""/plans in Chromium at 1280x800 and 390x844: every stored plan with its linked runs, for a viewer without the
editor's "Plan a workload", for an editor with it; never wider than the screen."""

import re

from browser_support import DESKTOP, PageWatch
from playwright.sync_api import Page, expect
from test_roles_pages import both_widths, save_plan, sign_in

from emuplan.roles import Role
from emuplan.store.db import Database
from live_server import LiveServer


def test_a_viewer_and_an_editor_find_every_plan_on_the_plans_list(
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
    expect(page.locator("a.button:has-text('Plan a workload')")).to_have_count(0)
    both_widths(page, "plans-viewer")
    row.locator("a").first.click()
    expect(page.locator("h1")).to_contain_text("mlp for viewers")

    page.context.clear_cookies()
    sign_in(page, accounts_server, "ed", add_account("ed", Role.editor), "/plans")
    expect(page.locator("a.button:has-text('Plan a workload')")).to_be_visible()
    watch.assert_clean()
