"""Each kind of channel against a receiver on loopback, with a real run waiting for approval
(the scripted provider's ``destructive`` scenario asks to delete a file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tether.harness import Harness
from tether.notify import read_link
from tether.vocab.state import args_hash
from tether.demo.agents import DEMO
from tests.notify.conftest import Receiver, channel, sending


async def waiting_run(h: Harness) -> Any:
    out = await h.run(h.new_run("destructive").run_id)
    assert out.state.interruption is not None and out.state.interruption.type == "approval"
    return out.state


def token_of(url: str) -> str:
    assert url.startswith("https://tether.test/l/")
    return url.rsplit("/", 1)[1]


async def test_a_webhook_gets_the_event_object_with_links_that_decide_that_call(tmp_path: Path, receiver: Receiver):
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as h:
        hook = channel("ops", {"kind": "webhook", "url": f"{receiver.url}/hook?token=s3cret",
                               "headers": {"X-Tether": "yes"}})
        async with sending(h.store, [hook]):
            state = await waiting_run(h)
            await receiver.wait_for(lambda r: r.bodies("approval"), "the approval's webhook")
    (post,) = receiver.posts
    body = post["body"]
    assert post["path"] == "/hook?token=s3cret" and post["headers"]["X-Tether"] == "yes"
    assert post["headers"]["Idempotency-Key"] == body["id"]
    waiting = state.interruption
    assert (body["event"], body["run_id"], body["tool"], body["call_id"]) == \
        ("approval", state.run_id, "delete_file", waiting.call_id)
    assert "access.log" in body["args"] and body["agent"] == "destructive"
    assert body["args_hash"] == args_hash(waiting.args)
    approve, reject = read_link(h.store, token_of(body["links"]["approve"])), \
        read_link(h.store, token_of(body["links"]["reject"]))
    assert (approve.action, reject.action) == ("approve", "reject")
    assert approve.run_id == state.run_id and approve.call_id == waiting.call_id
    assert approve.args_hash == args_hash(waiting.args) and not approve.bearer
    assert body["links"]["run"] == f"https://tether.test/runs/{state.run_id}"


async def test_ntfy_gets_its_json_publish_with_action_buttons(tmp_path: Path, receiver: Receiver):
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as h:
        phone = channel("phone", {"kind": "ntfy", "url": f"{receiver.url}/tether-alerts", "links": "bearer",
                                  "priority": "max"})
        async with sending(h.store, [phone]):
            state = await waiting_run(h)
            await receiver.wait_for(lambda r: r.posts, "the ntfy publish")
    (post,) = receiver.posts
    body = post["body"]
    assert post["path"] == "/"  # JSON publishing goes to the server's root, the topic in the body
    assert body["topic"] == "tether-alerts" and body["priority"] == 5
    assert body["click"] == f"https://tether.test/runs/{state.run_id}"  # a tap opens the run's page
    assert "delete_file" in body["title"] and "access.log" in body["message"]
    approve, reject = body["actions"]
    assert (approve["action"], approve["method"], approve["label"]) == ("http", "POST", "Approve")
    assert (reject["action"], reject["label"]) == ("view", "Reject")  # the reason is asked on the page
    claim = read_link(h.store, token_of(approve["url"]))
    assert claim.bearer and claim.run_id == state.run_id


async def test_ntfy_links_that_need_a_login_open_the_page(tmp_path: Path, receiver: Receiver):
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as h:
        phone = channel("phone", {"kind": "ntfy", "url": receiver.url, "topic": "t"})
        async with sending(h.store, [phone]):
            await waiting_run(h)
            await receiver.wait_for(lambda r: r.posts, "the ntfy publish")
    actions = receiver.posts[0]["body"]["actions"]
    assert [a["action"] for a in actions] == ["view", "view"]
    assert not read_link(h.store, token_of(actions[0]["url"])).bearer


async def test_slack_gets_an_incoming_webhook_message_with_buttons(tmp_path: Path, receiver: Receiver):
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as h:
        team = channel("team", {"kind": "slack", "url": f"{receiver.url}/services/T0/B0/XXXX", "link_ttl": "10m"})
        async with sending(h.store, [team]):
            state = await waiting_run(h)
            await receiver.wait_for(lambda r: r.posts, "the slack message")
    body = receiver.posts[0]["body"]
    assert "delete_file" in body["text"] and state.run_id in body["text"]
    section, actions = body["blocks"]
    assert section["type"] == "section" and "access.log" in section["text"]["text"]
    approve, reject, page = actions["elements"]
    assert (approve["text"]["text"], approve["style"], reject["text"]["text"], reject["style"]) == \
        ("Approve", "primary", "Reject", "danger")
    assert page["url"] == f"https://tether.test/runs/{state.run_id}"
    claim = read_link(h.store, token_of(approve["url"]))
    assert 0 < claim.expires_at - state.interruption.asked_at <= 10 * 60 + 30  # link_ttl = "10m"


async def test_without_a_public_url_notifications_carry_no_links_and_say_so(tmp_path: Path, receiver: Receiver,
                                                                          notify_log):
    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as h:
        hook = channel("ops", {"kind": "webhook", "url": receiver.url})
        async with sending(h.store, [hook], public_url=None):
            await waiting_run(h)
            await receiver.wait_for(lambda r: r.posts, "the webhook")
    assert receiver.posts[0]["body"]["links"] == {}
    said = [r.getMessage() for r in notify_log.records if "public URL" in r.getMessage()]
    assert len(said) == 1 and "no links" in said[0]


async def test_a_programs_call_on_the_run_api_is_notified_with_links(tmp_path: Path, receiver: Receiver):
    """Any source: a program reporting through the run API holds its call in its own process."""
    import asyncio

    async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as h:
        hook = channel("ops", {"kind": "webhook", "url": receiver.url})
        async with sending(h.store, [hook]):
            async def program() -> object:
                async with h.track("bot", "close stale tickets", source="pydantic-ai") as run:
                    return await run.approval("close_ticket", {"id": 7}, call_id="c7")

            task = asyncio.create_task(program())
            await receiver.wait_for(lambda r: r.posts, "the program's approval")
            body = receiver.posts[0]["body"]
            assert (body["event"], body["agent"], body["tool"], body["call_id"]) == ("approval", "bot", "close_ticket",
                                                                                     "c7")
            claim = read_link(h.store, token_of(body["links"]["reject"]))
            assert claim.args_hash == args_hash(h.store.load(body["run_id"]).interruption.args)  # the call as held
            reply = await h.decide(body["run_id"], "reject", "not stale", by="bob")
            assert reply.ok, reply.words
            assert not (await asyncio.wait_for(task, 30)).approved
