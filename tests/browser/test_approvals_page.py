"""The approvals page in a real browser (Debian's Chromium), phone-sized, against a real
``tether serve`` process, with runs waiting in processes of their own: what an operator away
from the terminal does with their phone (issue 26, item 4)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.support import CAP_S, RecordingProvider, Served, alive, finished, log_in, until


@pytest.fixture(scope="module")
def shared(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, RecordingProvider]]:
    """One ``tether serve`` (and its provider) for the tests that leave its users as they
    found them, each with runs of its own names and a page of its own; the test that
    removes a user has a server of its own."""
    provider = RecordingProvider()
    try:
        server = Served(tmp_path_factory.mktemp("served"), provider.url)
        try:
            yield server, provider
        finally:
            server.stop()
    finally:
        provider.close()


def _card(page: Any, run_id: str) -> Any:
    return page.locator(f'[data-testid="approval"][data-run="{run_id}"]')


def _shown(page: Any, run: Any, run_id: str) -> Any:
    """The run's approval card, once the page shows it (the run still waiting in its process)."""
    card = _card(page, run_id)
    until(lambda: alive(run) or card.count(), f"{run_id}'s approval on the page")
    expect(card).to_be_visible()
    return card


def _decisions(served: Served) -> list[dict[str, Any]]:
    code, out, err = served.tether_here("decisions", "--store", str(served.runs), "--json")
    assert code == 0, err
    return json.loads(out)


def test_no_page_works_without_a_login(shared: tuple[Served, RecordingProvider], phone: Any):
    served = shared[0]
    for path in ("/", "/runs/r1", "/console/"):
        phone.goto(served.url + path)
        expect(phone.get_by_test_id("login-form")).to_be_visible()
    for path in ("/events", "/console/ws"):
        assert phone.request.get(served.url + path, max_redirects=0).status in (302, 303, 401)
    refused = phone.request.post(f"{served.url}/decide", max_redirects=0,
                                 form={"run": "r1", "call": "c1", "verdict": "approve"})
    assert refused.status in (302, 303, 401, 403)
    log_in(phone, served.url, "ana", "not her password")
    expect(phone.get_by_test_id("login-problem")).to_be_visible()
    expect(phone.get_by_test_id("approvals")).to_have_count(0)


def test_a_waiting_run_appears_live_and_a_phone_approves_it(shared: tuple[Served, RecordingProvider], phone: Any):
    served = shared[0]
    log_in(phone, served.url, "ana")
    expect(phone.get_by_test_id("approvals")).to_be_visible()
    expect(_card(phone, "r1")).to_have_count(0)
    run = served.run("destructive", "r1", "--wait-for-decision")
    card = _shown(phone, run, "r1")  # the page is not reloaded: the card comes from the store's watch
    expect(card.get_by_test_id("tool")).to_have_text("delete_file")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scrolling on a phone
    card.get_by_test_id("approve").tap()
    summary = finished(run)
    assert summary["code"] == 0 and summary["status"] == "completed", summary
    expect(_card(phone, "r1")).to_have_count(0)
    decided = [d for d in _decisions(served) if d.get("run_id") == "r1"]
    assert decided and decided[-1]["by"] == "ana" and decided[-1]["verdict"] == "approved", decided


def test_a_reason_given_on_the_phone_is_what_the_model_reads(shared: tuple[Served, RecordingProvider],
                                                             phone: Any):
    """The reason typed on the card is what the model reads next; and an update of the list that
    was on its way as the reason was typed (another run came to wait: a slow network, a loaded
    host) is not drawn over the card and the words in it."""
    served, provider = shared
    run = served.run("destructive", "r2", "--wait-for-decision")
    log_in(phone, served.url, "ana")
    card = _shown(phone, run, "r2")
    held: list[Any] = []

    def keep(route: Any) -> None:  # the list's next update, kept on its way
        held.append(route)

    phone.route("**/fragment/approvals*", keep)
    other = served.run("destructive", "r2-other", "--wait-for-decision")
    deadline = time.monotonic() + CAP_S
    while not held:  # Playwright hands the route over while the page is waited on
        assert time.monotonic() < deadline, "the page never asked for the list again"
        phone.wait_for_timeout(50)
    words = "not on a Friday, keep the logs for the audit"
    assert not provider.said(words)
    card.get_by_test_id("reason").fill(words)
    with phone.expect_response(lambda response: "/fragment/approvals" in response.url):
        held[0].continue_()
    phone.unroute("**/fragment/approvals*", keep)  # (the later updates go on their way)
    phone.evaluate("() => new Promise(done => setTimeout(done, 200))")  # the page has handled the answer
    expect(card.get_by_test_id("reason")).to_have_value(words)
    card.get_by_test_id("reject").tap()
    summary = finished(run)
    assert summary["code"] == 0, summary
    assert provider.said(words)  # the next request the model got carries the operator's words
    decided = [d for d in _decisions(served) if d.get("run_id") == "r2"]
    assert decided[-1]["by"] == "ana" and decided[-1]["verdict"] == "rejected", decided
    _shown(phone, other, "r2-other")  # (drawn once the reason was sent) then declined, so nothing is left waiting
    code, _, err = served.tether_here("reject", "r2-other", "--reason", "not this one", "--store", str(served.runs))
    assert code == 0, err
    assert finished(other)["code"] == 0


def test_stop_on_the_run_page_stops_a_running_run(shared: tuple[Served, RecordingProvider], phone: Any):
    served = shared[0]
    run = served.run("slow", "s1")
    log_in(phone, served.url, "ana")
    trace = served.runs / "s1" / "trace.jsonl"
    until(lambda: alive(run) or (trace.exists() and "tool_progress" in trace.read_text()), "s1 scanning")
    phone.goto(f"{served.url}/runs/s1")
    expect(phone.get_by_test_id("status")).to_contain_text("running")
    phone.get_by_test_id("stop-reason").fill("enough scanning")
    phone.get_by_test_id("stop").tap()
    summary = finished(run)
    assert summary["code"] == 5, summary
    assert summary["interruption"] == {"type": "cancelled", "reason": "enough scanning", "by": "ana"}
    expect(phone.get_by_test_id("stop")).to_have_count(0)


def test_a_watcher_sees_the_approval_but_cannot_decide_it(shared: tuple[Served, RecordingProvider], phone: Any,
                                                          new_phone: Any):
    served = shared[0]
    run = served.run("destructive", "r3", "--wait-for-decision")
    log_in(phone, served.url, "walt")
    card = _shown(phone, run, "r3")
    expect(card.get_by_test_id("approve")).to_have_count(0)
    expect(card.get_by_test_id("reject")).to_have_count(0)
    csrf = phone.locator('input[name="csrf"]').first.get_attribute("value")
    forced = phone.request.post(f"{served.url}/decide", max_redirects=0,
                                form={"csrf": csrf or "", "run": "r3", "call": card.get_attribute("data-call") or "",
                                      "verdict": "approve"})
    assert forced.status == 403, forced.status
    assert "watch" in forced.text()
    assert run.poll() is None  # still waiting: nothing was decided
    other = new_phone()  # a person who may decide still can
    log_in(other, served.url, "bob")
    _card(other, "r3").get_by_test_id("approve").tap()
    assert finished(run)["status"] == "completed"
    until(lambda: [d for d in _decisions(served) if d.get("run_id") == "r3"], "bob's decision recorded", CAP_S)


def test_a_page_left_open_goes_to_the_login_when_its_user_is_removed(served: Served, phone: Any):
    log_in(phone, served.url, "bob")
    expect(phone.get_by_test_id("approvals")).to_be_visible()
    expect(phone.locator("body")).to_have_attribute("data-live", "yes")  # following /events
    code, out, err = served.tether_here("serve", "--remove-user", "bob", "--store", str(served.runs))  # not the server
    assert code == 0, err
    expect(phone.get_by_test_id("login-form")).to_be_visible(timeout=CAP_S * 1000)  # nobody touched the page
    phone.goto(served.url + "/")
    expect(phone.get_by_test_id("login-form")).to_be_visible()
