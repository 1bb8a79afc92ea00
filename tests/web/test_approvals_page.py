"""The approvals page and a run's page: what they show, and what their forms decide, on a
file store (the same for PostgreSQL: test_serve_pg.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator

import pytest

from tether.approvals import DecisionQuery, Rule
from tether.harness import Harness
from tether.demo.provider import scenarios
from tether.vocab.state import Cancelled, NeedsApproval, StateError, Status

from tether.web.pages import HUB
from tether.demo.agents import DEMO

from tests import accounts
from tests.conftest import Recorder
from tests.web.conftest import Served, csrf_of, logged_in


def cards(text: str) -> list[tuple[str, str]]:
    return re.findall(r'data-testid="approval" data-run="([^"]+)" data-call="([^"]+)"', text)


async def decide(client, run_id: str, verdict: str, *, json_answer: bool = True, **fields: str):
    page = await client.get("/")
    text = await page.text()
    hashed = re.search(rf'name="run" value="{re.escape(run_id)}">\s*<input type="hidden" name="call" '
                       rf'value="[^"]+">\s*<input type="hidden" name="hash" value="([^"]+)"', text)
    data = {"csrf": await csrf_of(client), "run": run_id, "call": "call_1_0", "verdict": verdict,
            "hash": hashed.group(1) if hashed else "", **fields}
    headers = {"Accept": "application/json"} if json_answer else {"Accept": "text/html"}
    return await client.post("/decide", data=data, headers=headers)


async def test_the_page_shows_every_waiting_call_newest_first_with_what_it_would_do(web: Served):
    first = await web.waiting_run()
    second = await web.waiting_run()
    client = await logged_in(web, "ana")
    try:
        page = await client.get("/")
        text = await page.text()
        assert [rid for rid, _ in cards(text)] == [second, first]
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
        assert "delete_file" in text and "&#34;path&#34;: &#34;access.log&#34;" in text  # the arguments, escaped
        assert 'data-testid="preview"' in text and "delete access.log" in text  # what it would change
        assert "destructive · Tether · waiting" in text
        assert text.count('data-testid="approve"') == 2 and text.count('data-testid="reject"') == 2
        assert page.headers["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in page.headers[
            "Content-Security-Policy"]
    finally:
        await client.close()


async def test_approve_records_the_user_and_the_run_finishes(web: Served):
    run_id = await web.waiting_run()
    client = await logged_in(web, "ana")
    try:
        answer = await decide(client, run_id, "approve")
        assert answer.status == 200
        assert await answer.json() == {"ok": True, "words": f"delete_file approved by ana; run {run_id} goes on"}
        await web.settled()
        state = web.store.load(run_id)
        assert state.status is Status.COMPLETED and state.answer == scenarios.DESTRUCTIVE_DELETED
        (record,) = web.store.decisions(DecisionQuery())
        assert (record.run_id, record.verdict, record.by) == (run_id, "approved", "ana")
        again = await decide(client, run_id, "approve")  # the page was not reloaded: one decision per call
        assert again.status == 409
        assert (await again.json())["words"] == "already decided: approved by ana; there is one decision per call"
        assert cards(await (await client.get("/")).text()) == []
    finally:
        await client.close()


async def test_a_reason_for_a_rejection_reaches_the_model(web: Served):
    run_id = await web.waiting_run()
    client = await logged_in(web, "bob")
    try:
        answer = await decide(client, run_id, "reject", reason="those logs are evidence, keep them")
        assert (await answer.json())["ok"]
        await web.settled()
        state = web.store.load(run_id)
        assert state.status is Status.COMPLETED and state.answer == scenarios.DESTRUCTIVE_DECLINED
        last = web.model.requests[-1]  # what the model read after the rejection
        tool = [m for m in last if m["role"] == "tool"][-1]["content"]
        assert "those logs are evidence, keep them" in tool
        (record,) = web.store.decisions(DecisionQuery())
        assert (record.verdict, record.by, record.words) == ("rejected", "bob", "those logs are evidence, keep them")
    finally:
        await client.close()


async def test_without_javascript_a_decision_answers_with_a_page_in_words(web: Served):
    run_id = await web.waiting_run()
    client = await logged_in(web, "ana")
    try:
        answer = await decide(client, run_id, "approve", json_answer=False)
        assert answer.status == 200 and answer.content_type == "text/html"
        text = await answer.text()
        assert f"delete_file approved by ana; run {run_id} goes on" in text and 'href="/"' in text
        await web.settled()
    finally:
        await client.close()


async def test_edited_arguments_are_checked_and_the_call_runs_with_them(web: Served):
    run_id = await web.waiting_run()
    (web.harness.workspace.root / "old.log").write_text("old\n")
    client = await logged_in(web, "ana")
    try:
        bad = await decide(client, run_id, "approve", args="[1, 2]")
        assert bad.status == 400 and "must be a JSON object" in (await bad.json())["words"]
        broken = await decide(client, run_id, "approve", args="{path: ")
        assert broken.status == 400 and "not JSON" in (await broken.json())["words"]
        assert isinstance(web.store.load(run_id).interruption, NeedsApproval)  # nothing decided yet
        answer = await decide(client, run_id, "approve", args=json.dumps({"path": "old.log"}))
        assert (await answer.json())["ok"]
        await web.settled()
        assert not (web.harness.workspace.root / "old.log").exists()
        assert (web.harness.workspace.root / "access.log").exists()
        (record,) = web.store.decisions(DecisionQuery())
        assert record.by == "ana" and json.loads(record.edited_args or "{}") == {"path": "old.log"}
    finally:
        await client.close()


async def test_a_stale_page_decides_nothing(web: Served):
    run_id = await web.waiting_run()
    client = await logged_in(web, "ana")
    try:
        page = await client.get("/")
        assert cards(await page.text()) == [(run_id, "call_1_0")]
        data = {"csrf": await csrf_of(client), "run": run_id, "call": "call_1_0", "verdict": "approve",
                "hash": "0000000000000000"}  # the arguments it showed were other ones
        answer = await client.post("/decide", data=data, headers={"Accept": "application/json"})
        assert answer.status == 409 and "the call changed since" in (await answer.json())["words"]
        assert isinstance(web.store.load(run_id).interruption, NeedsApproval)
        assert web.store.decisions(DecisionQuery()) == []
    finally:
        await client.close()


async def test_every_change_needs_the_sessions_csrf_token(web: Served):
    run_id = await web.waiting_run()
    client = await logged_in(web, "ana")
    other = await logged_in(web, "bob")
    try:
        base = {"run": run_id, "call": "call_1_0", "verdict": "approve"}
        for data in (base, {**base, "csrf": "made-up"}, {**base, "csrf": await csrf_of(other)}):
            answer = await client.post("/decide", data=data)
            assert answer.status == 403
            assert "security token is missing or out of date" in await answer.text()
        stop = await client.post(f"/runs/{run_id}/stop", data={"csrf": "made-up"})
        assert stop.status == 403
        assert isinstance(web.store.load(run_id).interruption, NeedsApproval)
        assert web.store.decisions(DecisionQuery()) == []
    finally:
        await client.close()
        await other.close()


async def test_a_watcher_sees_but_cannot_decide_or_stop(web: Served):
    run_id = await web.waiting_run()
    client = await logged_in(web, "walt")
    try:
        text = await (await client.get("/")).text()
        assert cards(text) == [(run_id, "call_1_0")] and "walt · watching" in text
        assert 'data-testid="approve"' not in text and 'data-testid="reject"' not in text
        token = await csrf_of(client)
        answer = await client.post("/decide", data={"csrf": token, "run": run_id, "call": "call_1_0",
                                                    "verdict": "approve"}, headers={"Accept": "application/json"})
        assert answer.status == 403 and "logged in as a watcher" in (await answer.json())["words"]
        stop = await client.post(f"/runs/{run_id}/stop", data={"csrf": token}, headers={"Accept": "application/json"})
        assert stop.status == 403
        assert isinstance(web.store.load(run_id).interruption, NeedsApproval)
        assert web.store.decisions(DecisionQuery()) == []
    finally:
        await client.close()


async def test_a_decision_reaches_the_process_that_waits_for_it(web: Served, tmp_path):
    recorder = Recorder()
    async with Harness(workspace=tmp_path / "workspace", store=web.store, sinks=[recorder], agent_sets=(DEMO,)) as other:
        run_id = other.new_run("destructive").run_id
        waiting = asyncio.create_task(other.run(run_id, wait_for_decision=0))
        try:
            await recorder.wait_for(lambda e: e.kind == "approval_required")
            client = await logged_in(web, "ana")
            try:
                answer = await decide(client, run_id, "approve")
                assert (await answer.json())["ok"], await answer.text()
            finally:
                await client.close()
            out = await asyncio.wait_for(waiting, 30)
        finally:
            if not waiting.done():
                waiting.cancel()
    assert out.state.status is Status.COMPLETED
    assert out.state.approvals["call_1_0"].by == "ana"


async def test_two_people_each_approve_once_and_the_page_says_how_far(web: Served):
    web.store.rule_add(Rule("ask", "delete_file", "two people delete logs", "alice", approvals=2))
    state = web.harness.new_run("destructive")
    await web.harness.run(state.run_id)
    ana, bob = await logged_in(web, "ana"), await logged_in(web, "bob")
    try:
        first = await decide(ana, state.run_id, "approve")
        assert (await first.json())["words"].startswith("approved by ana: 1 of 2")
        await web.settled()
        assert "1 of 2 approved (ana)" in await (await bob.get("/")).text()
        twice = await decide(ana, state.run_id, "approve")
        assert twice.status == 409 and "ana has approved delete_file (call_1_0) already" in (await twice.json())[
            "words"]
        second = await decide(bob, state.run_id, "approve")
        assert (await second.json())["ok"]
        await web.settled()
        assert web.store.load(state.run_id).status is Status.COMPLETED
    finally:
        await ana.close()
        await bob.close()


async def test_a_web_login_is_one_person_and_the_server_s_account_another(web: Served):
    """A decision on the web counts as the login's user. The server's own account on the store
    (what ``tether approve`` in its shell counts as) is one more person, whatever names it
    gives; the approvals page and the run's page say how far the call is, and as whom."""
    web.store.rule_add(Rule("ask", "delete_file", "two people delete logs", "alice", approvals=2))
    state = web.harness.new_run("destructive")
    await web.harness.run(state.run_id)
    me = accounts.me()
    await web.harness.approve(state.run_id, by="mallory")  # from the server's shell, as mallory
    with pytest.raises(StateError, match=f"the account {me} has approved delete_file .* already, as mallory"):
        await web.harness.approve(state.run_id, by="trudy")  # the same account, another name
    ana = await logged_in(web, "ana")
    try:
        tally = f"1 of 2 approved (mallory as {me})"
        assert tally in await (await ana.get("/")).text()
        assert tally in await (await ana.get(f"/runs/{state.run_id}")).text()
        answer = await decide(ana, state.run_id, "approve")
        assert (await answer.json())["ok"], await answer.text()
        await web.settled()
    finally:
        await ana.close()
    final = web.store.load(state.run_id)
    assert final.status is Status.COMPLETED
    decision = final.approvals["call_1_0"]
    assert (decision.approvers, decision.accounts) == (["mallory", "ana"], [me, "ana"])


async def test_the_run_page_shows_the_run_and_its_stop_reaches_it(web: Served, tmp_path):
    recorder = Recorder()
    async with Harness(workspace=tmp_path / "workspace", store=web.store, sinks=[recorder], agent_sets=(DEMO,)) as other:
        run_id = other.new_run("slow").run_id
        running = asyncio.create_task(other.run(run_id))
        try:
            await recorder.wait_for(lambda e: e.kind == "tool_progress")
            client = await logged_in(web, "ana")
            try:
                page = await client.get(f"/runs/{run_id}")
                text = await page.text()
                assert 'data-testid="status">running' in text and 'data-testid="stop"' in text
                assert "scan_archive" in text  # the transcript's tail
                token = await csrf_of(client, f"/runs/{run_id}")
                answer = await client.post(f"/runs/{run_id}/stop", data={"csrf": token, "reason": "enough"},
                                           headers={"Accept": "application/json"})
                said = await answer.json()
                assert said["ok"] and said["words"].startswith(f"run {run_id} stops now"), said
            finally:
                await client.close()
            out = await asyncio.wait_for(running, 30)
        finally:
            if not running.done():
                running.cancel()
    assert out.state.interruption == Cancelled("enough", "ana")


async def test_an_unknown_run_and_an_unknown_page_are_pages_in_words(web: Served):
    client = await logged_in(web, "ana")
    try:
        missing = await client.get("/runs/nope")
        assert missing.status == 404 and "no run nope" in (await missing.text()).lower()
        nowhere = await client.get("/no/such/page")
        assert nowhere.status == 404 and "there is no such page on this server" in await nowhere.text()
        assert "Traceback" not in await nowhere.text()
    finally:
        await client.close()


async def next_change(stream, run_id: str) -> dict:
    """The next server-sent event that names ``run_id`` with more than a trace line."""
    while True:
        line = (await asyncio.wait_for(stream.content.readline(), 30)).decode()
        if line.startswith("data: "):
            data = json.loads(line[6:])
            if set(data["runs"].get(run_id, ())) - {"trace"}:
                return data


async def test_a_call_that_starts_waiting_is_pushed_to_every_open_page_from_one_watch(web: Served):
    import threading

    def watch_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("tether-watch")}

    await asyncio.wait_for(web.app[HUB].ready.wait(), 30)  # the server's watch is in place
    before = watch_threads()
    assert before  # the server watches the store (one thread of its own)
    client = await logged_in(web, "ana")
    try:
        streams = [await client.get("/events", headers={"Accept": "text/event-stream"}) for _ in range(3)]
        try:
            for stream in streams:
                assert stream.status == 200 and stream.headers["Content-Type"] == "text/event-stream"
                assert (await stream.content.readline()).decode().startswith("retry:")
            run_id = await web.waiting_run()
            for stream in streams:
                assert "journal" in (await next_change(stream, run_id))["runs"][run_id]
            assert len(web.app[HUB].listeners) == 3 and watch_threads() == before  # three pages, one watch
            fragment = await client.get("/fragment/approvals")
            assert cards(await fragment.text()) == [(run_id, "call_1_0")]
        finally:
            for stream in streams:
                stream.close()
    finally:
        await client.close()


async def test_a_passed_deadline_nobody_holds_is_applied_before_the_page_shows_it(web: Served):
    from tether.vocab.state import Policies

    state = web.harness.new_run("destructive", policies=Policies(decision_deadline_s=0.01))
    out = await web.harness.run(state.run_id)
    assert isinstance(out.state.interruption, NeedsApproval) and out.state.interruption.deadline_at is not None
    await asyncio.sleep(0.05)  # the deadline passes while nobody looks
    client = await logged_in(web, "ana")
    try:
        assert cards(await (await client.get("/")).text()) == []
    finally:
        await client.close()
    waiting = web.store.load(state.run_id).interruption
    assert not isinstance(waiting, NeedsApproval)  # rejected by its deadline, never approved


async def test_a_store_that_cannot_be_read_gives_a_page_in_words(web: Served):
    client = await logged_in(web, "ana")
    try:
        token = await csrf_of(client)
        (web.store.root / "users.json").write_text("{not json")
        answer = await client.post("/decide", data={"csrf": token, "run": "r", "call": "c", "verdict": "approve"})
        text = await answer.text()
        assert answer.status == 503 and "the users of this store cannot be read now" in text
        assert "Traceback" not in text and "not json" not in text
    finally:
        await client.close()


async def test_arguments_opened_for_editing_but_not_changed_are_not_an_edit(web: Served):
    run_id = await web.waiting_run()
    client = await logged_in(web, "ana")
    try:
        answer = await decide(client, run_id, "approve", args='{ "path" : "access.log" }')
        assert (await answer.json())["ok"]
        await web.settled()
        (record,) = web.store.decisions(DecisionQuery())
        assert record.edited_args is None
    finally:
        await client.close()


async def test_a_long_list_shows_the_newest_first_and_the_rest_on_request(web: Served, monkeypatch):
    from tether.web import pages

    monkeypatch.setattr(pages, "FIRST_CARDS", 2)
    made = [await web.waiting_run() for _ in range(3)]
    client = await logged_in(web, "ana")
    try:
        text = await (await client.get("/")).text()
        assert [rid for rid, _ in cards(text)] == made[:0:-1]
        assert "3 waiting, the newest 2 shown" in text and 'href="/?all=1"' in text
        every = await (await client.get("/fragment/approvals?all=1")).text()
        assert [rid for rid, _ in cards(every)] == made[::-1]
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def program_asking(web: Served, tmp_path, source: str, **approval: object) -> AsyncIterator[asyncio.Task]:
    """A program of ``source`` (another harness on the page's store) whose send_email call
    waits for a decision: the task that gets the program's :class:`Approval`."""
    recorder = Recorder()
    async with Harness(workspace=tmp_path / "workspace", store=web.store, sinks=[recorder], agent_sets=(DEMO,)) as program:
        async def triage() -> object:
            async with program.track("triage", "sort the inbox", source=source) as run:
                return await run.approval("send_email", {"to": "all@example.org", "subject": "hello"},
                                          call_id="call_1_0", **approval)  # type: ignore[arg-type]

        waiting = asyncio.create_task(triage())
        try:
            await recorder.wait_for(lambda e: e.kind == "approval_required")
            yield waiting
        finally:
            if not waiting.done():
                waiting.cancel()


async def test_a_programs_call_is_shown_with_its_source_and_the_decision_reaches_the_program(web: Served, tmp_path):
    async with program_asking(web, tmp_path, "openai-agents") as waiting:
        client = await logged_in(web, "ana")
        try:
            text = await (await client.get("/")).text()
            (shown,) = cards(text)
            assert "send_email" in text and "triage · openai-agents · waiting" in text
            answer = await decide(client, shown[0], "reject", reason="not to everyone")
            assert (await answer.json())["ok"], await answer.text()
        finally:
            await client.close()
        approval = await asyncio.wait_for(waiting, 30)
    assert not approval.approved and approval.by == "ana" and "not to everyone" in approval.words


async def test_an_edit_of_a_programs_call_is_checked_against_the_schema_its_program_reported(web: Served, tmp_path):
    """Issue 37, item 4: the page's edit goes through the one check ``tether approve --args``
    makes, against the schema the program reported with its call."""
    schema = {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
              "required": ["to", "subject"], "additionalProperties": False}
    async with program_asking(web, tmp_path, "pydantic-ai", schema=schema) as waiting:
        client = await logged_in(web, "ana")
        try:
            (shown,) = cards(await (await client.get("/")).text())
            bad = await decide(client, shown[0], "approve", args=json.dumps({"to": "ops@example.org"}))
            words = (await bad.json())["words"]
            assert bad.status == 409 and "the edited arguments do not fit send_email: " in words, words
            assert "'subject' is a required property; nothing was decided" in words
            twice = await decide(client, shown[0], "approve", args='{"to": "a@example.org", "to": "b@example.org"}')
            assert twice.status == 400 and 'give the key "to" twice' in (await twice.json())["words"]
            edited = {"to": "ops@example.org", "subject": "hello"}
            answer = await decide(client, shown[0], "approve", args=json.dumps(edited))
            assert (await answer.json())["ok"], await answer.text()
        finally:
            await client.close()
        approval = await asyncio.wait_for(waiting, 30)
    assert approval.approved and approval.by == "ana" and approval.args == edited


async def test_an_acp_agents_request_is_shown_with_its_diff_refuses_an_edit_and_is_approved(web: Served, tmp_path):
    from tests.acp.driving import waiting as acp_waiting
    from tests.acp.fake_agent import WRITE_NAME, WRITE_TEXT
    from tests.acp.test_acp_runs import agent as fake_acp_agent

    folder = tmp_path / "acp-workspace"
    folder.mkdir()
    async with Harness(workspace=tmp_path / "workspace", store=web.store, agent_sets=(DEMO,)) as other:
        state = other.create(fake_acp_agent(folder), "write the file")
        running = asyncio.create_task(other.run(state.run_id, wait_for_decision=0))
        try:
            pending = await acp_waiting(other, state.run_id)
            client = await logged_in(web, "ana")
            try:
                text = await (await client.get("/")).text()
                assert cards(text) == [(state.run_id, pending.call_id)]
                assert "ACP agent" in text and "+written by the fake agent" in text  # its diff
                assert 'data-testid="edit-args"' not in text  # an ACP agent's call is not edited
                hashed = re.search(r'name="hash" value="([^"]+)"', text).group(1)
                base = {"csrf": await csrf_of(client), "run": state.run_id, "call": pending.call_id, "hash": hashed,
                        "verdict": "approve"}
                edit = await client.post("/decide", data={**base, "args": '{"path": "elsewhere.txt"}'},
                                         headers={"Accept": "application/json"})
                assert "ACP offers no way to change the arguments" in (await edit.json())["words"]
                answer = await client.post("/decide", data=base, headers={"Accept": "application/json"})
                assert (await answer.json())["ok"], await answer.text()
            finally:
                await client.close()
            outcome = await asyncio.wait_for(running, 60)
        finally:
            if not running.done():
                running.cancel()
    assert outcome.state.status is Status.COMPLETED
    assert (folder / WRITE_NAME).read_text() == WRITE_TEXT
    assert outcome.state.approvals[pending.call_id].by == "ana"


async def test_an_acp_agents_run_page_shows_its_warning_and_not_tethers_system_prompt(web: Served, tmp_path):
    """An agent that wrote a refused file itself, outside its workspace: its run's page says
    so above the transcript, which shows what the agent was sent (issue 37, items 2 and 13)."""
    from tests.acp.fake_agent import ESCAPE_PATH
    from tests.acp.test_acp_runs import agent as fake_acp_agent

    folder = tmp_path / "acp-workspace"
    folder.mkdir()
    coder = fake_acp_agent(folder, "write-itself")
    async with Harness(workspace=tmp_path / "workspace", store=web.store, agent_sets=(DEMO,)) as other:
        outcome = await other.start(coder, "write outside")
    escaped = (folder / ESCAPE_PATH).resolve()
    assert outcome.state.status is Status.COMPLETED and escaped.exists()
    client = await logged_in(web, "ana")
    try:
        text = await (await client.get(f"/runs/{outcome.state.run_id}")).text()
    finally:
        await client.close()
    warnings = re.search(r'data-testid="warnings">(.*?)</ul>', text, re.S)
    assert warnings is not None, text
    assert f"the agent wrote {escaped} itself, outside the workspace" in warnings.group(1)
    assert coder.instructions not in text and "role-system" not in text
    assert "role-user" in text and "write outside" in text


async def test_a_decision_posted_after_the_deadline_is_refused_and_the_deadline_decides(web: Served):
    """Issue 37, item 1: the page's decide, posted after the call's deadline (the page was
    shown before it), approved the call. The deadline decides, and the page says so."""
    await late_decision_is_refused(web)


async def late_decision_is_refused(web: Served) -> None:
    """A page shown before a call's deadline posts its approval after it (either store)."""
    import time

    from tether.vocab.state import Policies, args_hash

    client = await logged_in(web, "ana")
    try:
        token = await csrf_of(client)  # the page, shown before the deadline
        state = web.harness.new_run("destructive", policies=Policies(decision_deadline_s=0.2, on_deadline="stop"))
        waiting = (await web.harness.run(state.run_id)).state.interruption
        assert isinstance(waiting, NeedsApproval) and waiting.deadline_at is not None
        while time.time() <= waiting.deadline_at:
            await asyncio.sleep(waiting.deadline_at - time.time() + 0.01)
        answer = await client.post("/decide", data={"csrf": token, "run": state.run_id, "call": "call_1_0",
                                                    "verdict": "approve", "hash": args_hash(waiting.args)},
                                   headers={"Accept": "application/json"})
        said = await answer.json()
        assert answer.status == 409 and not said["ok"], said
        assert said["words"].startswith("too late: the decision deadline of delete_file (call_1_0) had passed, and "
                                        "the deadline decided it: the run was stopped"), said
        await web.settled()
    finally:
        await client.close()
    assert (web.harness.workspace.root / "access.log").exists()
    after = web.store.load(state.run_id)
    assert isinstance(after.interruption, Cancelled) and after.interruption.by == "deadline"
    assert after.approvals["call_1_0"].by == "deadline"


async def test_the_run_pages_stop_ends_a_run_whose_process_waits_for_a_decision(web: Served, tmp_path):
    """Issue 37, item 8: Stop on a run whose process waits for a decision ends the run, and
    its call is declined in words (it no longer waits on the page)."""
    recorder = Recorder()
    async with Harness(workspace=tmp_path / "workspace", store=web.store, sinks=[recorder], agent_sets=(DEMO,)) as other:
        run_id = other.new_run("destructive").run_id
        waiting = asyncio.create_task(other.run(run_id, wait_for_decision=0))
        try:
            await recorder.wait_for(lambda e: e.kind == "approval_required")
            client = await logged_in(web, "ana")
            try:
                page = await (await client.get(f"/runs/{run_id}")).text()
                assert 'data-testid="stop"' in page
                token = await csrf_of(client, f"/runs/{run_id}")
                answer = await client.post(f"/runs/{run_id}/stop", data={"csrf": token, "reason": "enough"},
                                           headers={"Accept": "application/json"})
                said = await answer.json()
                assert said["ok"] and "delete_file (call_1_0), which waited for a decision, is declined" in said[
                    "words"], said
                out = await asyncio.wait_for(waiting, 30)
                assert cards(await (await client.get("/")).text()) == []
            finally:
                await client.close()
        finally:
            if not waiting.done():
                waiting.cancel()
    assert out.state.interruption == Cancelled("enough", "ana")
    decision = out.state.approvals["call_1_0"]
    assert (decision.verdict, decision.by, decision.text) == ("rejected", "ana", "the run was stopped (enough)")
    assert (tmp_path / "workspace" / "access.log").exists()


@pytest.fixture
async def budget_web(tmp_path) -> AsyncIterator[Served]:
    """A server whose agent file has an ``ask`` fleet budget over the runaway agent ($0.02 a day)."""
    from tether.agents.config import load_config
    from tether.store.files.store import RunStore
    from tests.web.conftest import serving

    path = tmp_path / "tether.toml"
    path.write_text('[budgets.runaway-daily]\nagent = "runaway"\nusd = 0.02\non_exceed = "ask"\n')
    async for served in serving(RunStore(tmp_path / "runs"), tmp_path, config=load_config(path)):
        yield served


async def post_decision(client, run_id: str, waiting: NeedsApproval, verdict: str, **fields: str):
    from tether.vocab.state import args_hash

    data = {"csrf": await csrf_of(client, f"/runs/{run_id}"), "run": run_id, "call": waiting.call_id,
            "verdict": verdict, "hash": args_hash(waiting.args), **fields}
    return await client.post("/decide", data=data, headers={"Accept": "application/json"})


async def test_a_budget_call_shows_in_its_words_on_the_run_page_and_is_approved_and_rejected_there(
        budget_web: Served):
    from tether.vocab.state import Limits, MaxBudget

    web = budget_web
    out = await web.harness.run(web.harness.new_run("runaway", limits=Limits(max_turns=None)).run_id)
    run_id, first = out.state.run_id, out.state.interruption
    assert isinstance(first, NeedsApproval) and first.tool_name == "budget"
    client = await logged_in(web, "ana")
    try:
        text = await (await client.get(f"/runs/{run_id}")).text()
        assert "budget runaway-daily ($0.02/day) reached: $0.0" in text and "approve to go on" in text
        assert 'data-testid="approve"' in text and 'data-testid="reject"' in text
        assert "How much more this run may spend, as {\"usd\": N}" in text  # the amount is its to edit
        assert cards(await (await client.get("/")).text()) == [(run_id, first.call_id)]
        bad = await post_decision(client, run_id, first, "approve", args='{"usd": "lots"}')
        assert bad.status == 409 and 'takes {"usd": N}' in (await bad.json())["words"]
        went = await post_decision(client, run_id, first, "approve", args='{"usd": 0.03}')
        assert (await went.json()) == {"ok": True, "words": f"budget approved by ana; run {run_id} goes on"}
        await web.settled()
        state = web.store.load(run_id)
        second = state.interruption
        assert isinstance(second, NeedsApproval) and second.tool_name == "budget" and state.cost_usd >= 0.05
        ended = await post_decision(client, run_id, second, "reject", reason="enough for today")
        assert (await ended.json())["ok"]
        await web.settled()
    finally:
        await client.close()
    state = web.store.load(run_id)
    assert state.status is Status.BUDGET_EXCEEDED and state.interruption == MaxBudget()
    assert state.approvals[second.call_id].by == "ana" and state.approvals[second.call_id].text == "enough for today"
