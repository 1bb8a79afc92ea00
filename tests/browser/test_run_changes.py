"""A run's changes on its page, on a phone: the counts, each file a tap away from its coloured
diff, with JavaScript off as with it on (issue 38, item 3)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.browser.support import Served, finished, log_in


def test_a_runs_changes_open_file_by_file_on_a_phone(served: Served, phone: Any) -> None:
    served.ws.mkdir(exist_ok=True)
    (served.ws / "notes.txt").write_text("one\ntwo\n")
    assert finished(served.run("plan", "p1", "--isolate", "copy"))["status"] == "completed"
    copy = served.tmp / "home" / "workspaces" / "p1"
    (copy / "notes.txt").write_text("one\n2\n")  # as a shell command of the agent's would
    log_in(phone, served.url, "ana")
    phone.goto(f"{served.url}/runs/p1")
    expect(phone.get_by_test_id("changes-stat")).to_have_text("+1 \u22121 in 1 file")
    diff = phone.get_by_test_id("diff")
    expect(diff).to_be_hidden()  # folded until tapped: a long diff does not bury the transcript
    phone.locator(".changed summary").click()
    expect(diff).to_be_visible()
    expect(phone.locator(".d-add")).to_have_text("+2")
    expect(phone.locator(".d-del")).to_have_text("-two")
    assert phone.locator(".d-add").evaluate("e => getComputedStyle(e).color") == "rgb(26, 127, 55)"
    width = phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert width, "the page scrolls sideways on a phone"
