"""A notification's links: each decides once, on the call it names, with its arguments; a
used, expired, forged or stale link is refused in words and changes nothing."""

from __future__ import annotations

import asyncio
import re

import pytest

from tether.approvals import DecisionQuery
from tether.notify.links import issue_link
from tether.vocab.state import NeedsApproval, Status, args_hash

from tests.web.conftest import PAGE, Served, logged_in


def link_for(served: Served, run_id: str, action: str = "approve", **kw) -> str:
    waiting = served.store.load(run_id).interruption
    assert isinstance(waiting, NeedsApproval)
    kw.setdefault("args_hash", args_hash(waiting.args))
    return issue_link(served.store, run_id=run_id, call_id=waiting.call_id, action=action,  # type: ignore[arg-type]
                      **kw)


def unchanged(served: Served, run_id: str) -> None:
    assert isinstance(served.store.load(run_id).interruption, NeedsApproval)
    assert served.store.decisions(DecisionQuery()) == []


def csrf_in(text: str) -> str:
    found = re.search(r'action="/l/[^"]+"[^>]*>\s*<input type="hidden" name="csrf" value="([^"]+)"', text)
    assert found is not None, text
    return found.group(1)


async def test_a_link_shows_the_call_on_get_and_decides_once_on_post(web: Served):
    run_id = await web.waiting_run()
    token = link_for(web, run_id)
    anonymous = web.client()
    client = await logged_in(web, "ana")
    try:
        first = await anonymous.get(f"/l/{token}", headers=PAGE, allow_redirects=False)
        assert first.status == 303 and first.headers["Location"].startswith("/login?next=")  # a login first
        assert (await anonymous.post(f"/l/{token}", data={})).status == 401
        page = await client.get(f"/l/{token}")  # a GET never decides (chat apps open links to preview them)
        text = await page.text()
        assert page.status == 200 and "Approve this call?" in text and "delete_file" in text
        unchanged(web, run_id)
        assert (await client.post(f"/l/{token}", data={})).status == 403  # no CSRF token: not this page's form
        unchanged(web, run_id)
        answer = await client.post(f"/l/{token}", data={"csrf": csrf_in(text)})
        assert answer.status == 200 and "delete_file approved by ana" in await answer.text()
        await web.settled()
        assert web.store.load(run_id).status is Status.COMPLETED
        (record,) = web.store.decisions(DecisionQuery())
        assert (record.verdict, record.by) == ("approved", "ana")
        again = await client.post(f"/l/{token}", data={"csrf": csrf_in(text)})
        assert again.status == 403 and "this link was already used" in await again.text()
    finally:
        await client.close()
        await anonymous.close()


async def test_a_bearer_link_decides_without_a_login_and_only_once(web: Served):
    run_id = await web.waiting_run()
    token = link_for(web, run_id, "reject", bearer=True)
    client = web.client()
    try:
        page = await client.get(f"/l/{token}")
        assert page.status == 200 and 'name="reason"' in await page.text()  # the reject link asks why
        answer = await client.post(f"/l/{token}", data={"reason": "not from the phone"})
        assert answer.status == 200, await answer.text()
        await web.settled()
        (record,) = web.store.decisions(DecisionQuery())
        assert (record.verdict, record.by, record.words) == ("rejected", "link", "not from the phone")
        again = await client.post(f"/l/{token}", data={"reason": "twice"})
        assert again.status == 403 and "already used" in await again.text()
        assert len(web.store.decisions(DecisionQuery())) == 1
    finally:
        await client.close()


@pytest.mark.parametrize("bad", ["forged", "mangled", "expired", "stale", "decided"])
async def test_a_bad_link_is_refused_in_words_and_changes_nothing(web: Served, bad: str):
    run_id = await web.waiting_run()
    if bad == "forged":
        good = link_for(web, run_id, bearer=True)
        payload, signature = good.split(".")
        token = payload + "." + ("A" if signature[0] != "A" else "B") + signature[1:]
        words = "was not issued by this Tether, or was altered"
    elif bad == "mangled":
        token, words = link_for(web, run_id, bearer=True)[:20], "cut short or mangled"
    elif bad == "expired":
        token, words = link_for(web, run_id, bearer=True, ttl_s=0.001), "this link expired"
        await asyncio.sleep(0.01)
    elif bad == "stale":
        token, words = link_for(web, run_id, bearer=True, args_hash="0" * 16), "the call changed since"
    else:  # decided on the page first: the link's call waits no more
        token, words = link_for(web, run_id, bearer=True), "already decided: approved by ana"
    if bad == "decided":
        ana = await logged_in(web, "ana")
        try:
            from tests.web.test_approvals_page import decide

            assert (await (await decide(ana, run_id, "approve")).json())["ok"]
            await web.settled()
        finally:
            await ana.close()
    before = web.store.decisions(DecisionQuery())
    client = web.client()
    try:
        for response in (await client.get(f"/l/{token}"), await client.post(f"/l/{token}", data={})):
            assert response.status in (403, 409)
            text = await response.text()
            assert words in text and "Traceback" not in text
    finally:
        await client.close()
    if bad != "decided":
        unchanged(web, run_id)
    assert web.store.decisions(DecisionQuery()) == before


async def test_a_watcher_cannot_decide_through_a_link(web: Served):
    run_id = await web.waiting_run()
    token = link_for(web, run_id)
    client = await logged_in(web, "walt")
    try:
        page = await client.get(f"/l/{token}")
        text = await page.text()
        assert 'data-testid="refusal"' in text and "watcher" in text and 'data-testid="approve"' not in text
        token_field = re.search(r'name="csrf" value="([^"]+)"', text)
        assert token_field is not None
        answer = await client.post(f"/l/{token}", data={"csrf": token_field.group(1)})
        assert answer.status == 403 and "watcher" in await answer.text()
    finally:
        await client.close()
    unchanged(web, run_id)


async def test_a_links_token_is_in_no_log(web: Served, caplog):
    caplog.set_level("INFO")
    run_id = await web.waiting_run()
    token = link_for(web, run_id, bearer=True)
    client = web.client()
    try:
        assert (await client.get(f"/l/{token}")).status == 200
        assert (await client.post(f"/l/{token}", data={})).status == 200
        await web.settled()
    finally:
        await client.close()
    lines = [r.getMessage() for r in caplog.records]
    assert any('"POST /l/…" 200' in line for line in lines), lines
    assert not any(token in line or token.split(".")[1] in line for line in lines)


async def test_a_link_used_after_the_calls_deadline_is_refused_and_the_deadline_decides(web: Served):
    """Issue 37, item 1, by a notification's link: it was issued while the call waited, and is
    used after its deadline (the link itself still good): the deadline decides, in words."""
    import time

    from tether.vocab.state import Cancelled, Policies

    state = web.harness.new_run("destructive", policies=Policies(decision_deadline_s=0.2, on_deadline="stop"))
    waiting = (await web.harness.run(state.run_id)).state.interruption
    assert isinstance(waiting, NeedsApproval) and waiting.deadline_at is not None
    token = link_for(web, state.run_id, bearer=True)
    while time.time() <= waiting.deadline_at:
        await asyncio.sleep(waiting.deadline_at - time.time() + 0.01)
    client = web.client()
    try:
        answer = await client.post(f"/l/{token}", data={})
        text = await answer.text()
        assert answer.status == 409 and "too late: the decision deadline of delete_file (call_1_0) had passed" in text
        await web.settled()
    finally:
        await client.close()
    after = web.store.load(state.run_id)
    assert isinstance(after.interruption, Cancelled) and after.approvals["call_1_0"].by == "deadline"
    assert (web.harness.workspace.root / "access.log").exists()
