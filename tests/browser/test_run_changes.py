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


def test_a_runs_work_is_merged_from_its_page_on_a_phone_after_an_approval(served: Served, phone: Any) -> None:
    """Merge on the run's page asks (the page says so in words), the approvals page shows the
    call merge like any other, and its Approve merges the work into main (issue 38, item 4)."""
    import subprocess

    repo = served.ws
    repo.mkdir(exist_ok=True)
    (repo / "notes.txt").write_text("one\ntwo\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    assert finished(served.run("plan", "m1", "--isolate", "worktree"))["status"] == "completed"
    (served.tmp / "home" / "workspaces" / "m1" / "notes.txt").write_text("one\n2\n")
    log_in(phone, served.url, "ana")
    phone.goto(f"{served.url}/runs/m1")
    expect(phone.get_by_test_id("changes-stat")).to_have_text("+1 \u22121 in 1 file")
    phone.screenshot(path=str(served.tmp / "merge-form.png"), full_page=True)
    phone.get_by_test_id("merge").tap()
    expect(phone.locator("h1")).to_have_text("Asked: waiting for a decision")
    expect(phone.get_by_test_id("words-text")).to_contain_text("run m1: its merge into main waits for a decision")
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), "sideways scroll"
    phone.screenshot(path=str(served.tmp / "merge-asked.png"), full_page=True)
    phone.goto(served.url)
    card = phone.locator('[data-testid="approval"][data-run="m1"]')
    expect(card.get_by_test_id("tool")).to_have_text("merge")
    phone.screenshot(path=str(served.tmp / "merge-card.png"), full_page=True)
    card.get_by_test_id("approve").tap()
    expect(card).to_have_count(0)
    assert (repo / "notes.txt").read_text() == "one\n2\n"  # merged into main, its checkout moved
