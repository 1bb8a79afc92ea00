"""The whole console in a desktop-sized browser, through ``tether serve``'s ``/console/``: it
shows the store's runs and takes keys, as the terminal console does (issue 26, items 1 and 4).
The terminal is drawn on a canvas, so the test reads xterm.js's buffer (support.XTERM_HOOK)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.browser.support import XTERM_HOOK, Served, descendants, finished, log_in, until


def _screen(page: Any) -> str:
    return page.evaluate("window.__screen ? window.__screen() : ''")


def test_the_console_page_shows_the_runs_and_takes_a_key(served: Served, desktop: Any):
    assert finished(served.run("plan", "p1"))["status"] == "completed"
    desktop.context.add_init_script(XTERM_HOOK)
    log_in(desktop, served.url, "ana")
    desktop.goto(f"{served.url}/console/")
    until(lambda: "p1" in _screen(desktop) and "Pending approvals" in _screen(desktop), "the run p1 in the console")
    consoles = [c for _, c in descendants(served.process.pid) if "tether.tui.cli console" in c]
    assert len(consoles) == 1 and "--as ana" in consoles[0]  # one console per tab, recorded as who logged in
    desktop.locator("#terminal").click()
    desktop.keyboard.press("D")  # the record of decisions
    until(lambda: "Decisions" in _screen(desktop) and "Pending approvals" not in _screen(desktop),
          "the decisions screen after D")
    desktop.close()  # the tab closes: its console ends
    until(lambda: not [c for _, c in descendants(served.process.pid) if "tether.tui.cli console" in c],
          "the console process ended with its tab")


def test_stopping_the_server_with_a_console_tab_open_ends_the_console_and_tells_the_page(served: Served,
                                                                                          desktop: Any):
    desktop.context.add_init_script(XTERM_HOOK)
    log_in(desktop, served.url, "bob")
    desktop.goto(f"{served.url}/console/")
    until(lambda: "Pending approvals" in _screen(desktop), "the console drawn")
    assert [c for _, c in descendants(served.process.pid) if "tether.tui.cli console" in c]
    served.stop()  # SIGTERM with the tab open: the server ends on its own, and leaves no console behind
    assert "tether serve: stopping" in served.output()
    expect(desktop.locator("body.-closed")).to_have_count(1)  # the page says its session ended
