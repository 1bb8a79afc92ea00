"""A notification's link in a real browser: ``tether serve`` sends a webhook when a run waits
for approval (its ``[notify.NAME]`` table), the link it carries opens a page that approves
once, and a second click is refused in words (issue 26, items 3 and 4)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.support import RecordingProvider, Served, WebhookReceiver, alive, finished, log_in, until


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    hook = WebhookReceiver()
    try:
        yield hook
    finally:
        hook.close()


@pytest.fixture
def notifying(browser: Any, tmp_path: Path, provider: RecordingProvider, receiver: WebhookReceiver) -> Iterator[Served]:
    config = tmp_path / "tether.toml"
    config.write_text(f'[notify.phone]\nkind = "webhook"\nurl = "{receiver.url}"\nevents = ["approval"]\n')
    server = Served(tmp_path, provider.url, config=config)
    try:
        yield server
    finally:
        server.stop()


def test_a_notifications_link_approves_once_and_a_second_click_is_refused(
        notifying: Served, receiver: WebhookReceiver, phone: Any):
    run = notifying.run("destructive", "n1", "--wait-for-decision")
    sent = until(lambda: alive(run) or [b for _, b in receiver.bodies if b.get("run_id") == "n1"],
                 "the approval's notification")
    links = sent[0]["links"]
    assert links["approve"].startswith(f"{notifying.url}/l/") and links["reject"].startswith(f"{notifying.url}/l/")
    phone.goto(links["approve"])  # a link needs a login unless its channel says bearer
    expect(phone.get_by_test_id("login-form")).to_be_visible()
    log_in(phone, notifying.url, "ana")
    phone.goto(links["approve"])
    expect(phone.get_by_test_id("tool")).to_have_text("delete_file")  # what it approves, before it does
    assert run.poll() is None  # opening the link decided nothing (chat apps open links to preview them)
    phone.get_by_test_id("approve").tap()
    summary = finished(run)
    assert summary["code"] == 0 and summary["status"] == "completed", summary
    phone.goto(links["approve"])  # the second click
    expect(phone.get_by_role("heading")).to_have_text("This link does not decide")
    expect(phone.get_by_test_id("words-text")).to_contain_text("already used")
    expect(phone.get_by_test_id("approve")).to_have_count(0)
    phone.goto(links["reject"])  # the other link of the same call: that call is decided
    expect(phone.get_by_test_id("approve").or_(phone.get_by_test_id("reject"))).to_have_count(0)
