"""Exactly one sender per store, each notification sent once (across senders and restarts),
failures retried and shown, secrets never shown."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tether.harness import Harness
from tether.notify import sender_status
from tether.notify.notices import Notice
from tether.notify.storage import storage_for
from tether.store.files.store import RunStore
from tether.demo.agents import DEMO
from tests.notify.conftest import QUICK, Receiver, channel, sending


async def until(predicate: Any, what: str, timeout: float = 30.0) -> None:
    async def poll() -> None:
        while not await asyncio.to_thread(predicate):
            await asyncio.sleep(0.02)
    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"not within {timeout} s: {what}") from None


async def test_two_senders_at_once_send_one_notification(twin, store: Any, tmp_path: Path, receiver: Receiver,
                                                         notify_log):
    hook = channel("ops", {"kind": "webhook", "url": receiver.url, "events": ["approval", "completed"]})
    other = twin(store)
    async with sending(store, [hook]), sending(other, [hook], ready=False) as second:
        await until(lambda: any("another sender holds" in r.getMessage() for r in notify_log.records),
                    "the second sender says it waits")
        async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as h:
            await h.run(h.new_run("destructive").run_id)
            await h.run(h.new_run("plan").run_id)
        await receiver.wait_for(lambda r: r.bodies("approval") and r.bodies("completed"), "both notifications")
        await asyncio.sleep(0.5)  # room for a duplicate to arrive, were there one
        assert not second.done()
    waits = [r for r in notify_log.records if "another sender holds" in r.getMessage()]
    assert len(waits) == 1 and f"pid {os.getpid()}" in waits[0].getMessage()
    assert [b["event"] for b in receiver.bodies()] == ["approval", "completed"]


async def test_the_waiting_sender_takes_over_when_the_first_ends(twin, store: Any, tmp_path: Path, receiver: Receiver,
                                                                notify_log):
    hook = channel("ops", {"kind": "webhook", "url": receiver.url, "events": ["completed"]})
    other = twin(store)
    first = sending(store, [hook])
    await first.__aenter__()
    async with sending(other, [hook], ready=False) as second:
        await until(lambda: any("another sender holds" in r.getMessage() for r in notify_log.records), "a wait")
        await first.__aexit__(None, None, None)  # the first lets go
        await until(lambda: any("took over" in r.getMessage() for r in notify_log.records), "a take-over")
        async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as h:
            await h.run(h.new_run("plan").run_id)
        await receiver.wait_for(lambda r: r.bodies("completed"), "the take-over's notification")
        assert not second.done()


async def test_a_restarted_sender_does_not_send_again(twin, store: Any, tmp_path: Path, receiver: Receiver):
    hook = channel("ops", {"kind": "webhook", "url": receiver.url, "events": ["approval", "completed"]})
    async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as h:
        async with sending(store, [hook]):
            waiting = (await h.run(h.new_run("destructive").run_id)).state
            await receiver.wait_for(lambda r: r.posts, "the approval")
        done = (await h.run(h.new_run("plan").run_id)).state  # while no sender runs
        again = twin(store)
        async with sending(again, [hook]):  # the same approval still waits: not sent again
            await receiver.wait_for(lambda r: len(r.posts) == 2, "what happened while it was down")
            await asyncio.sleep(0.5)
    got = [(b["event"], b["run_id"]) for b in receiver.bodies()]
    assert got == [("approval", waiting.run_id), ("completed", done.run_id)]


async def test_a_notification_left_unsent_by_a_dead_sender_is_sent_by_the_next(store: Any, tmp_path: Path,
                                                                               receiver: Receiver):
    hook = channel("ops", {"kind": "webhook", "url": receiver.url, "events": ["failed"]})
    left = Notice("failed", "gone-run:failed:9", "gone-run", 1.0, "Run failed: gone-run", "gone-run failed: boom",
                  status="failed", reason="boom")
    lease = storage_for(store).lease()
    assert await asyncio.to_thread(lease.take)
    await asyncio.to_thread(lease.ledger_put, "ops", left.key, "sending", left.to_json())  # then it died
    lease.release()
    async with sending(store, [hook]):
        await receiver.wait_for(lambda r: r.posts, "the resend")
    (body,) = receiver.bodies()
    assert (body["event"], body["run_id"], body["reason"]) == ("failed", "gone-run", "boom")


async def test_failures_are_retried_shown_on_the_store_and_cleared(twin, store: Any, tmp_path: Path):
    flaky = Receiver(failing=3)
    await flaky.start()
    try:
        hook = channel("ops", {"kind": "webhook", "url": flaky.url, "events": ["completed"]})
        slow = dataclasses.replace(QUICK, first_retry_s=0.3, max_retry_s=0.3)
        async with sending(store, [hook], settings=slow):
            async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as h:
                await h.run(h.new_run("plan").run_id)
            watcher = twin(store)  # another process's view: the console's, the web page's
            await until(lambda: sender_status(watcher), "a status line")
            (line,) = sender_status(watcher)
            assert line.startswith("webhook 'ops': ") and "HTTP 500" in line and "retrying in" in line
            await flaky.wait_for(lambda r: r.posts, "the notification, at last")
            await until(lambda: not sender_status(watcher), "the status cleared")
        assert flaky.refused == 3 and len(flaky.posts) == 1
    finally:
        await flaky.stop()


async def test_a_notification_given_up_says_so_and_is_not_tried_again(tmp_path: Path):
    store = RunStore(tmp_path / "runs")
    down = Receiver(failing=1000)
    await down.start()
    try:
        hook = channel("ops", {"kind": "webhook", "url": down.url, "events": ["completed"]})
        async with sending(store, [hook]):
            async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as h:
                run = (await h.run(h.new_run("plan").run_id)).state
            await until(lambda: any("gave up" in line for line in sender_status(store)), "giving up")
        (line,) = sender_status(store)
        assert f"gave up on the completed of {run.run_id} after {QUICK.give_up_after} tries" in line
        tried = down.refused
        async with sending(RunStore(store.root), [hook]):
            await asyncio.sleep(0.5)
        assert down.refused == tried  # given up is given up, across a restart too
    finally:
        await down.stop()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_secrets_never_reach_a_log_or_a_status_line(tmp_path: Path, monkeypatch, notify_log, receiver: Receiver):
    notify_log.set_level(logging.DEBUG, logger="httpx")  # httpx logs each request's URL: not this one's secrets
    notify_log.set_level(logging.DEBUG, logger="httpcore")
    monkeypatch.setenv("NTFY_TOKEN", "tk_SECRET_token_123")
    store = RunStore(tmp_path / "runs")
    port = closed_port()
    channels = [
        channel("phone", {"kind": "ntfy", "url": f"http://127.0.0.1:{port}/topic-SECRET-xyz",
                          "headers": {"Authorization": "Bearer ${NTFY_TOKEN}"}, "events": ["completed"]}),
        channel("team", {"kind": "slack", "url": f"http://127.0.0.1:{port}/services/T0/B0/SLACKSECRET",
                         "events": ["completed"]}),
        channel("ops", {"kind": "webhook", "url": f"http://127.0.0.1:{port}/hook?key=QUERYSECRET",
                        "events": ["completed"]}),
        channel("fine", {"kind": "webhook", "url": f"{receiver.url}/hook/PATHSECRET?key=GOODSECRET",
                         "events": ["completed"]}),
    ]
    async with sending(store, channels):
        async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as h:
            await h.run(h.new_run("plan").run_id)
        await until(lambda: len(sender_status(store)) == 3, "three failing channels")
        lines = sender_status(store)
    said = "\n".join(r.getMessage() for r in notify_log.records) + "\n" + "\n".join(lines)
    for secret in ("tk_SECRET_token_123", "topic-SECRET-xyz", "SLACKSECRET", "QUERYSECRET", "/services/",
                   "PATHSECRET", "GOODSECRET"):
        assert secret not in said
    assert "HTTP Request: POST" in said and receiver.posts  # httpx's own line, for the one that was sent
    assert "connection refused" in said and f"127.0.0.1:{port}" in said
    assert sorted(line.split(":")[0] for line in lines) == ["ntfy 'phone'", "slack 'team'", "webhook 'ops'"]


def test_tether_notify_refuses_a_public_url_that_is_not_one(tmp_path: Path):
    (tmp_path / "tether.toml").write_text('[notify.ops]\nkind = "webhook"\nurl = "http://127.0.0.1:9/"\n')
    out = subprocess.run([sys.executable, "-m", "tether.tui.cli", "notify", "--store", str(tmp_path / "runs"),
                          "--config", str(tmp_path / "tether.toml"), "--public-url", "tether.example.com"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--public-url 'tether.example.com' is not an http:// or https:// URL" in out.stderr


def test_tether_notify_refuses_a_file_without_notify_tables(tmp_path: Path):
    (tmp_path / "tether.toml").write_text("[agents]\n")
    out = subprocess.run([sys.executable, "-m", "tether.tui.cli", "notify", "--store", str(tmp_path / "runs"),
                          "--config", str(tmp_path / "tether.toml")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no [notify.NAME] tables" in out.stderr


async def test_tether_notify_sends_and_a_second_one_takes_over_when_the_first_is_killed(tmp_path: Path,
                                                                                       receiver: Receiver):
    config = tmp_path / "tether.toml"
    config.write_text(f'[notify.ops]\nkind = "webhook"\nurl = "{receiver.url}/hook"\nevents = ["completed"]\n')
    command = [sys.executable, "-m", "tether.tui.cli", "notify", "--store", str(tmp_path / "runs"), "--config", str(config),
               "--public-url", "https://tether.test"]
    first = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    second: subprocess.Popen[str] | None = None
    try:
        assert "sending" in await asyncio.to_thread(first.stderr.readline)  # type: ignore[union-attr]
        second = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        said = await asyncio.to_thread(second.stderr.readline)  # type: ignore[union-attr]
        assert "another sender holds" in said and f"pid {first.pid}" in said
        async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as h:
            await h.run(h.new_run("plan").run_id)
        await receiver.wait_for(lambda r: r.posts, "the first sender's notification")
        await until(lambda: not storage_for(RunStore(tmp_path / "runs")).ledger_unsent(), "the send recorded")
        first.kill()  # however it ends: the kernel drops its lease
        await asyncio.to_thread(first.wait, 30)
        assert "took over" in await asyncio.to_thread(second.stderr.readline)  # type: ignore[union-attr]
        async with Harness(tmp_path / "runs", tmp_path / "ws", agent_sets=(DEMO,)) as h:
            await h.run(h.new_run("plan").run_id)
        await receiver.wait_for(lambda r: len(r.posts) == 2, "the second sender's notification")
        assert len({b["run_id"] for b in receiver.bodies()}) == 2
        second.send_signal(signal.SIGTERM)  # a signal ends it cleanly
        assert await asyncio.to_thread(second.wait, 30) == 0
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
            if process is not None and process.stderr is not None:
                process.stderr.close()


@pytest.mark.parametrize("table, words", [
    ({"kind": "email", "url": "https://x"}, "notify.ops.kind: no kind 'email': use webhook, ntfy or slack"),
    ({"kind": "webhook"}, "notify.ops.url is missing: add it"),
    ({"kind": "webhook", "url": "https://x", "events": ["aproval"]}, "no event 'aproval': did you mean 'approval'?"),
    ({"kind": "webhook", "url": "ftp://x"}, "notify.ops.url: must be an http:// or https:// URL"),
    ({"kind": "webhook", "url": "https://x", "link_ttl": "soon"}, "'soon' is not a duration"),
    ({"kind": "webhook", "url": "https://x", "agent": ["a"]}, "unknown key 'notify.ops.agent': did you mean 'agents'?"),
    ({"kind": "ntfy", "url": "https://ntfy.sh"}, "ntfy needs a topic"),
    ({"kind": "webhook", "url": "https://x", "headers": {"A": "${TETHER_TEST_UNSET_VAR}"}},
     "notify.ops.headers.A names ${TETHER_TEST_UNSET_VAR}, which is not set"),
    ({"kind": "slack", "url": "https://x", "topic": "t"}, "topic and priority are ntfy's"),
])
def test_a_bad_table_is_refused_in_words_naming_the_file_and_the_key(tmp_path: Path, table, words):
    from tether.agents.config import ConfigError

    with pytest.raises(ConfigError) as caught:
        channel("ops", table, tmp_path / "tether.toml")
    assert str(caught.value).startswith(str(tmp_path / "tether.toml")) and words in str(caught.value)


def test_load_channels_reads_the_tables_and_the_agent_file_still_loads(tmp_path: Path):
    from tether.agents.config import load_config
    from tether.notify import load_channels

    path = tmp_path / "tether.toml"
    path.write_text('[notify.phone]\nkind = "ntfy"\nurl = "https://ntfy.example.com/alerts"\n'
                    '[notify.ops]\nkind = "webhook"\nurl = "https://hooks.example.com/x"\n'
                    'events = ["completed"]\nlinks = "bearer"\nlink_ttl = "30m"\n')
    phone, ops = load_channels(path)
    assert (phone.kind, phone.topic, phone.url, sorted(phone.events)) == \
        ("ntfy", "alerts", "https://ntfy.example.com/", ["approval", "failed", "orphaned"])
    assert (ops.bearer, ops.link_ttl_s, ops.events) == (True, 1800.0, frozenset({"completed"}))
    assert load_config(path).names == []  # the agents' loader accepts the tables


async def test_a_sender_whose_database_session_ends_lets_the_other_send(pg_notify: Any, pg_server: Any, twin,
                                                                        tmp_path: Path, receiver: Receiver, notify_log):
    """The lease is the session's lock and the ledger is written through that session: once
    the server ends it, the first sender records nothing more, and the waiting one sends."""
    import psycopg

    store, other = pg_notify, twin(pg_notify)
    hook = channel("ops", {"kind": "webhook", "url": receiver.url, "events": ["completed"]})
    async with sending(store, [hook]), sending(other, [hook], ready=False):
        await until(lambda: any("another sender holds" in r.getMessage() for r in notify_log.records), "a wait")
        with psycopg.connect(pg_server.admin_conninfo, autocommit=True) as admin:
            ended = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                                  "AND classid = %s AND objsubid = 2 AND granted", (0x7E7F,)).fetchall()
        assert ended == [(True,)]
        await until(lambda: any("took over" in r.getMessage() for r in notify_log.records), "the take-over")
        async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as h:
            done = (await h.run(h.new_run("plan").run_id)).state
        await receiver.wait_for(lambda r: r.posts, "the notification")
        await asyncio.sleep(1.0)  # room for the first sender to send too, were it able to
    assert [b["run_id"] for b in receiver.bodies()] == [done.run_id]
    assert any("lease was lost" in r.getMessage() for r in notify_log.records)  # the first said why it stopped


async def test_a_cancelled_sender_lets_go_of_everything(tmp_path: Path, receiver: Receiver):
    import threading

    from tether.notify import run_sender

    store = RunStore(tmp_path / "runs")
    hook = channel("ops", {"kind": "webhook", "url": receiver.url})
    ready = asyncio.Event()
    task = asyncio.create_task(run_sender(store, public_url=None, stop=asyncio.Event(), channels=[hook],
                                          settings=QUICK, ready=ready))
    await asyncio.wait_for(ready.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # the cancellation is re-raised, after the cleanup
    assert not [t.name for t in threading.enumerate() if t.name.startswith("tether-watch")]
    lease = storage_for(RunStore(store.root)).lease()
    assert lease.take()  # the lease is free again
    lease.release()


async def test_a_database_restart_is_ridden_out(pg_notify: Any, pg_server: Any, tmp_path: Path, receiver: Receiver,
                                               notify_log):
    """Every session cut, every lock dropped: the sender says so, takes the lease again when
    the database is back, and goes on sending."""
    store = pg_notify
    hook = channel("ops", {"kind": "webhook", "url": receiver.url, "events": ["completed"]})
    async with sending(store, [hook]):
        await asyncio.to_thread(pg_server.restart)
        await until(lambda: sum("sending" in r.getMessage() and "notifications to" in r.getMessage()
                                for r in notify_log.records) >= 2, "the lease taken again")
        async with Harness(workspace=tmp_path / "ws", store=store, agent_sets=(DEMO,)) as h:
            done = (await h.run(h.new_run("plan").run_id)).state
        await receiver.wait_for(lambda r: r.posts, "the notification after the restart")
    assert [b["run_id"] for b in receiver.bodies()] == [done.run_id]


def test_a_status_left_by_a_sender_that_died_says_it_is_not_retried():
    from tether.notify.sender import status_line

    record = {"channel": "ntfy 'phone'", "failures": 3, "last": "connection refused", "at": 1000.0, "retry_at": 1008.0}
    assert status_line(record, now=1000.0).endswith("; retrying in 8 s")
    assert status_line(record, now=1000.0).startswith("ntfy 'phone': 3 failures, last 'connection refused' at ")
    assert "not tried again since" in status_line(record, now=2000.0)
