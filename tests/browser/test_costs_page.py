"""/costs in Chromium on a phone (issue 41): the runs' spend as server-drawn SVG, readable at
390 px without sideways scrolling, with JavaScript on as off."""

from __future__ import annotations

import os
from typing import Any

from playwright.sync_api import expect

from tests.browser.support import Served, finished, log_in


def test_the_costs_page_draws_the_fleets_spend_on_a_phone(served: Served, phone: Any) -> None:
    assert finished(served.run("plan", "p1"))["status"] == "completed"
    assert finished(served.run("forbidden", "f1"))["status"] in ("completed", "failed")
    log_in(phone, served.url, "ana")
    phone.get_by_test_id("nav-costs").click()
    expect(phone.locator("h1")).to_have_text("Costs")
    day = phone.get_by_test_id("day-chart")
    expect(day).to_be_visible()
    assert day.locator("rect").count() == 30
    bars = phone.get_by_test_id("agent-chart").locator("rect")
    assert bars.count() == 2 and bars.nth(0).bounding_box()["width"] > bars.nth(1).bounding_box()["width"] > 0
    expect(phone.get_by_test_id("agents-table")).to_contain_text("plan")
    dearest = phone.get_by_test_id("dearest-table")
    expect(dearest.get_by_role("link", name="p1")).to_have_attribute("href", "/runs/p1")
    dearest.get_by_role("link", name="f1").click()
    expect(phone).to_have_url(served.url + "/runs/f1")
    phone.go_back()
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), "the page scrolls sideways"
    shot = os.environ.get("TETHER_SCREENSHOTS")
    phone.screenshot(path=os.path.join(shot, "costs-page.png") if shot else str(served.tmp / "costs-page.png"),
                     full_page=True)
