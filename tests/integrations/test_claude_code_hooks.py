"""Claude Code's hooks against a stand-in for Claude Code (tests/integrations/fake_claude.py),
on both stores (a directory, and PostgreSQL):

- between hooks the session's run is live while Claude Code's process lives: ``tether runs``
  shows it running with when its Stop lands, and ``tether stop`` records the Stop for its
  next hook, which ends the session;
- once Claude Code's process is killed (no ``SessionEnd``) the run is orphaned;
- a ``PostToolUse`` and a ``UserPromptSubmit`` that come while another hook holds the run
  waiting for a decision are handed to that hook and recorded, nothing lost, and answered
  at once.

The real Claude Code CLI's tests are in test_claude_code.py. Every wait is on a condition
under a generous cap; nothing asserts on timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.store.control import ControlRequest
from tether.store.operate import request
from tether.integrations import claude_code
from tether.store.protocol import Store
from tether.vocab.state import Cancelled, NeedsApproval, RunState, Status
from tether.store.files.store import RunStore
from tests.support import TABLES

CAP_S = 120.0
SESSION = "s-fake-1"
RUN_ID = claude_code.run_id_of(SESSION)


@pytest.fixture(params=["file", "postgresql"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Store, str]]:
    """The store, and how the hooks and the CLI name it (``TETHER_STORE``)."""
    if request.param == "file":
        yield RunStore(tmp_path / "runs"), str(tmp_path / "runs")
        return
    from tether.store.postgres.store import PgStore

    url = request.getfixturevalue("pg_url")
    pg = PgStore(url)
    with pg._conn() as conn:
        conn.execute(pg.q("TRUNCATE " + ", ".join(f"{{s}}.{t}" for t in TABLES)))
    try:
        yield pg, url
    finally:
        pg.close()


@dataclass
class Claude:
    """The stand-in's process: hooks go in on its stdin, their answers come out on its stdout."""

    proc: asyncio.subprocess.Process
    cwd: Path

    async def hook(self, event: str, **payload: Any) -> None:
        body = {"session_id": SESSION, "cwd": str(self.cwd), "hook_event_name": event, "transcript_path": "",
                **payload}
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(body) + "\n").encode())
        await self.proc.stdin.drain()

    async def answer(self) -> dict[str, Any]:
        """The next hook's answer (in the order they end)."""
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), CAP_S)
        assert line, "the stand-in for Claude Code ended"
        return json.loads(line)


@pytest.fixture
async def claude(where: tuple[Store, str], tmp_path: Path) -> AsyncIterator[Claude]:
    _, name = where
    env = {**os.environ, "TETHER_STORE": name}
    if str(Path.cwd()) not in env.get("PYTHONPATH", ""):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path.cwd()), env.get("PYTHONPATH")) if p)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.integrations.fake_claude",
                                                "--deadline", "60", env=env, cwd=tmp_path,
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                start_new_session=True)
    try:
        yield Claude(proc, tmp_path)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the stand-in and any hook still running
        await proc.wait()


async def until(predicate, what: str) -> Any:
    deadline = time.monotonic() + CAP_S
    while not (value := await asyncio.to_thread(predicate)):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {CAP_S:g} s waiting for {what}")
        await asyncio.sleep(0.05)
    return value


async def tether_cli(name: str, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", *args,
                                                env={**os.environ, "TETHER_STORE": name},
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), CAP_S)
    return proc.returncode, out.decode()


def state_of(store: Store) -> RunState:
    return store.load(RUN_ID)


def bash(call_id: str, command: str) -> dict[str, Any]:
    return {"tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": call_id}


async def test_the_session_is_live_between_hooks_while_claude_code_lives_and_orphaned_once_killed(
        where: tuple[Store, str], claude: Claude):
    store, name = where
    await claude.hook("SessionStart", source="startup")
    assert (await claude.answer())["code"] == 0
    summary = store.summary(RUN_ID)
    assert summary.status == "running" and summary.liveness == "running"  # no hook holds it: Claude Code lives
    assert summary.owner.kept and summary.owner.pid == claude.proc.pid
    owner = store.owner(RUN_ID)
    assert owner.alive and owner.kept and owner.pid == claude.proc.pid
    code, said = await tether_cli(name, "runs")
    line = next(x for x in said.splitlines() if x.startswith(RUN_ID))
    assert "running" in line and "orphaned" not in line and f"{claude.proc.pid}@" in line
    assert "Claude Code, between hooks: Stop lands at its next hook" in line

    os.kill(claude.proc.pid, signal.SIGKILL)  # Claude Code dies without a SessionEnd
    await claude.proc.wait()
    summary = store.summary(RUN_ID)
    assert (summary.status, summary.liveness) == ("running", "orphaned")
    assert not store.owner(RUN_ID) or not store.owner(RUN_ID).alive
    assert [s.liveness for s in store.summaries() if s.run_id == RUN_ID] == ["orphaned"]
    code, said = await tether_cli(name, "runs")
    assert "orphaned" in next(x for x in said.splitlines() if x.startswith(RUN_ID))


async def test_a_stop_between_hooks_is_recorded_for_the_next_hook_which_ends_the_session(
        where: tuple[Store, str], claude: Claude):
    store, name = where
    await claude.hook("SessionStart", source="startup")
    await claude.answer()
    code, said = await tether_cli(name, "stop", RUN_ID, "--reason", "wrong branch", "--as", "carol")
    assert code == 1, said  # recorded, not done yet
    assert "is recorded and lands at its next hook" in said and "orphaned" not in said
    assert state_of(store).status is Status.RUNNING  # nothing reaches Claude Code before a hook
    await claude.hook("UserPromptSubmit", prompt="go on")
    answer = json.loads((await claude.answer())["out"])
    assert answer["continue"] is False
    assert answer["stopReason"] == f"The operator carol stopped this session in Tether (run {RUN_ID}): wrong branch."
    state = state_of(store)
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled("wrong branch", "carol")


async def test_a_stop_between_a_call_and_its_result_keeps_the_result_claude_received(
        where: tuple[Store, str], claude: Claude):
    """The call ran and Claude Code read its result; the Stop made meanwhile ends the session
    at ``PostToolUse``, and the transcript still has that result (issue 37, item 18)."""
    from tether.approvals import Rule

    store, name = where
    store.rule_add(Rule("allow", "Bash", "the tests' shell", "alice", source="program"))
    await claude.hook("SessionStart", source="startup")
    await claude.answer()
    await claude.hook("PreToolUse", **bash("t1", "make test"))
    allowed = await claude.answer()
    assert json.loads(allowed["out"])["hookSpecificOutput"]["permissionDecision"] == "allow", allowed
    code, said = await tether_cli(name, "stop", RUN_ID, "--reason", "wrong branch", "--as", "carol")
    assert code == 1 and "lands at its next hook" in said, said
    await claude.hook("PostToolUse", **bash("t1", "make test"), tool_response={"stdout": "12 passed"})
    answer = json.loads((await claude.answer())["out"])
    assert answer["continue"] is False  # the session ends here
    state = state_of(store)
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled("wrong branch", "carol")
    results = {m["tool_call_id"]: m["content"] for m in state.messages if m["role"] == "tool"}
    assert results == {"t1": "12 passed"}, "the result Claude Code received is in the transcript"
    code, shown = await tether_cli(name, "show", RUN_ID)
    assert "[tool] 12 passed" in shown, shown


async def test_reports_made_while_a_call_waits_for_a_decision_reach_the_run(where: tuple[Store, str], claude: Claude):
    store, _ = where
    await claude.hook("SessionStart", source="startup")
    await claude.answer()
    await claude.hook("PreToolUse", **bash("t1", "make deploy"))
    await until(lambda: isinstance(state_of(store).interruption, NeedsApproval), "the call to wait for a decision")
    holder = store.owner(RUN_ID)
    assert holder.alive and not holder.kept and holder.pid != claude.proc.pid  # the waiting hook holds the run

    # A parallel tool's result, and a prompt, while the call waits: answered at once, not lost.
    await claude.hook("PostToolUse", tool_name="Read", tool_input={"file_path": "notes.md"}, tool_use_id="t2",
                      tool_response="the notes")
    done = await claude.answer()
    assert (done["id"], done["code"], done["out"]) == ("t2", 0, ""), done
    await claude.hook("UserPromptSubmit", prompt="also tidy up")
    assert (await claude.answer())["code"] == 0
    def prompted() -> RunState | None:
        state = state_of(store)
        return state if any(m.get("content") == "also tidy up" for m in state.messages) else None

    state = await until(prompted, "the relayed reports to be saved")
    results = {m["tool_call_id"]: m["content"] for m in state.messages if m["role"] == "tool"}
    assert results == {"t2": "the notes"}
    assert isinstance(state.interruption, NeedsApproval) and state.interruption.call_id == "t1"  # still waiting

    reply = await request(store, RUN_ID, ControlRequest("approve", "fine", call_id="t1", by="alice"))
    assert reply.ok, reply.words
    decided = await claude.answer()
    assert decided["id"] == "t1", decided
    assert json.loads(decided["out"])["hookSpecificOutput"]["permissionDecision"] == "allow", decided
    await claude.hook("PostToolUse", **bash("t1", "make deploy"), tool_response={"stdout": "deployed"})
    assert (await claude.answer())["code"] == 0
    state = state_of(store)
    results = {m["tool_call_id"]: m["content"] for m in state.messages if m["role"] == "tool"}
    assert results == {"t2": "the notes", "t1": "deployed"}
    assert [m["content"] for m in state.messages if m["role"] == "user"] == ["also tidy up"]
    assert state.status is Status.RUNNING and state.approvals["t1"].by == "alice"


async def test_a_report_left_when_the_holder_lets_go_is_added_by_the_next_hook(where: tuple[Store, str],
                                                                                claude: Claude):
    from tether.run.tracked import report_into

    store, _ = where
    await claude.hook("SessionStart", source="startup")
    await claude.answer()
    # Nobody holds the run (Claude Code is thinking): the report waits in the run's channel.
    assert await report_into(store, RUN_ID, [{"op": "user", "text": "from the channel"}]) is None
    assert not any(m.get("content") == "from the channel" for m in state_of(store).messages)
    await claude.hook("Stop")
    assert (await claude.answer())["code"] == 0
    assert [m["content"] for m in state_of(store).messages if m["role"] == "user"] == ["from the channel"]


async def test_the_console_shows_the_session_live_between_hooks_then_orphaned(where: tuple[Store, str],
                                                                             claude: Claude, tmp_path: Path):
    from textual.widgets import Static

    from tests.support import SIZE, finish, make_app
    from tests.support import wait_for as painted

    await claude.hook("SessionStart", source="startup")
    await claude.answer()
    console_store = None
    if not isinstance(where[0], RunStore):
        from tether.store.postgres.store import PgStore

        console_store = PgStore(where[1])
    app = make_app(tmp_path, store=console_store)  # (the console closes a store it is given)
    async with app.run_test(size=SIZE) as pilot:
        await painted(pilot, lambda: RUN_ID in app.states, "the session's run in the console")
        app.select(RUN_ID)
        await painted(pilot, lambda: app.model.is_live(RUN_ID), "the session's run shown live")
        assert not app.model.is_orphaned(RUN_ID) and app.model.badge_key(RUN_ID) != "orphaned"
        assert f"run by pid {claude.proc.pid}@" in (app.model.owner_words(RUN_ID) or "")
        await painted(pilot, lambda: "Claude Code: Stop lands at its next hook" in str(
            app.console_screen.query_one("#run-header", Static).render()), "the source's words in the header")
        os.kill(claude.proc.pid, signal.SIGKILL)
        await claude.proc.wait()
        await painted(pilot, lambda: app.model.is_orphaned(RUN_ID), "the run shown orphaned once Claude Code died",
                      CAP_S)
        await finish(pilot, app)


def test_a_keeper_is_its_process_not_its_pid(tmp_path: Path):
    import subprocess

    from tether.store import keeper

    mine = keeper.record(os.getpid(), "this test")
    assert mine is not None and keeper.living(mine)
    assert not keeper.living({**mine, "started": mine["started"] + 1})  # the pid, reused by a later process
    assert not keeper.living({**mine, "host": mine["host"] + "-elsewhere"})  # cannot be checked from here
    assert not keeper.living({**mine, "boot": "another-boot"})
    assert not keeper.living(None) and not keeper.living({"pid": "1"})
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert keeper.record(gone.pid, "gone") is None
