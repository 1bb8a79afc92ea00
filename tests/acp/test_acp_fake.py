"""tether.acp against the fake ACP agent: every mode a real agent will not show on demand."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tether.acp import AcpError, AcpSession, AgentDied, AgentProtocolError, AgentStartError, probe
from tether.acp.events import (
    AcpEvent,
    AgentExited,
    BadFrame,
    CommandsAvailable,
    FileRefused,
    FileWritten,
    OtherUpdate,
    PermissionAsked,
    PermissionSettled,
    PlanUpdated,
    SlashCommand,
    TextChunk,
    ThoughtChunk,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    UsageReported,
)
from tether.acp.permissions import raw_input_hash

from tests.acp.conftest import fake_agent
from tests.acp.fake_agent import BIG_FRAME_COMMANDS, FLOOD_CHUNKS, WRITE_NAME, WRITE_TEXT
from tests.acp.procs import alive_in, group_alive

CAP_S = 30.0


class Events:
    """Every event of a session, and a decider for its permission requests."""

    def __init__(self, answer: str | None = "allow") -> None:
        self.seen: list[AcpEvent] = []
        self.answer = answer  # the option to pick, or None: leave the request pending
        self.asked = asyncio.Event()

    def __call__(self, event: AcpEvent) -> None:
        self.seen.append(event)
        if isinstance(event, PermissionAsked):
            self.asked.set()
            if self.answer is not None:
                event.request.decide(self.answer)

    def of(self, kind: type) -> list:
        return [e for e in self.seen if isinstance(e, kind)]


def session(mode: str, workspace: Path, env: dict[str, str], events: Events, **kw) -> AcpSession:
    return AcpSession(fake_agent(mode), workspace=workspace, env=env, on_event=events, **kw)


async def test_a_write_with_permission_streams_every_kind_of_event(acp_workspace: Path, fake_env: dict) -> None:
    events = Events("allow")
    async with session("normal", acp_workspace, fake_env, events) as s:
        assert s.info is not None and (s.info.name, s.info.version, s.info.load_session) == ("fake-agent", "1.0.0", False)
        await s.new_session()
        ended = await asyncio.wait_for(s.prompt("write it"), CAP_S)
        pid = s.pid
    assert ended == TurnEnded("end_turn")
    assert (acp_workspace / WRITE_NAME).read_text() == WRITE_TEXT
    assert [e.text for e in events.of(ThoughtChunk)] == ["Planning the write."]
    assert events.of(PlanUpdated)[0].entries[0].status == "in_progress"
    assert "".join(e.text for e in events.of(TextChunk)) == f"I will write {WRITE_NAME}.Done."
    started = events.of(ToolCallStarted)[0]
    assert (started.kind, started.status, started.diffs[0].new_text) == ("edit", "pending", WRITE_TEXT)
    request = events.of(PermissionAsked)[0].request
    assert [(o.option_id, o.kind) for o in request.options] == [
        ("allow", "allow_once"), ("always", "allow_always"), ("reject", "reject_once")]
    assert request.diffs[0].path == str(acp_workspace / WRITE_NAME)
    assert request.args_hash == raw_input_hash({"content": WRITE_TEXT, "path": str(acp_workspace / WRITE_NAME)})
    assert events.of(PermissionSettled) == [PermissionSettled("call_1", "allow")]
    assert events.of(FileWritten) == [FileWritten(str(acp_workspace / WRITE_NAME), len(WRITE_TEXT))]
    assert events.of(ToolCallUpdated)[-1].status == "completed"
    usage = {u.source: u for u in events.of(UsageReported)}
    assert (usage["usage_update"].cost_amount, usage["usage_update"].cost_currency) == (0.0125, "USD")
    assert (usage["meta"].input_tokens, usage["meta"].thought_tokens) == (40, 2)
    assert usage["prompt_response"].total_tokens == 48
    kinds = [type(e).__name__ for e in events.seen]
    assert kinds.index("PermissionAsked") < kinds.index("FileWritten") < kinds.index("TurnEnded")
    # Ended by the close: by itself once its stdin closed, or (on a loaded host, past the short
    # wait for that) by the signal that follows; either way Tether expected it and nothing is left.
    exited = events.seen[-1]
    assert isinstance(exited, AgentExited) and exited.expected and exited.returncode in (0, -signal.SIGTERM)
    assert pid is not None and not group_alive(pid)


async def test_a_rejected_write_fails_the_tool_call_and_writes_nothing(acp_workspace: Path, fake_env: dict) -> None:
    events = Events("reject")
    async with session("normal", acp_workspace, fake_env, events) as s:
        await s.new_session()
        assert await asyncio.wait_for(s.prompt("write it"), CAP_S) == TurnEnded("end_turn")
    assert not (acp_workspace / WRITE_NAME).exists()
    assert events.of(ToolCallUpdated)[-1].status == "failed"


async def test_a_stale_or_unknown_decision_is_refused_in_words(acp_workspace: Path, fake_env: dict) -> None:
    events = Events(None)
    async with session("normal", acp_workspace, fake_env, events) as s:
        await s.new_session()
        turn = asyncio.create_task(s.prompt("write it"))
        await asyncio.wait_for(events.asked.wait(), CAP_S)
        request = events.of(PermissionAsked)[0].request
        with pytest.raises(ValueError, match="other arguments"):
            request.decide("allow", args_hash="0" * 16)
        with pytest.raises(ValueError, match="tool call other"):
            request.decide("allow", tool_call_id="other")
        with pytest.raises(ValueError, match="offers no option 'maybe'"):
            request.decide("maybe")
        request.decide("allow", tool_call_id="call_1", args_hash=request.args_hash)
        with pytest.raises(ValueError, match="already answered"):
            request.decide("reject")
        assert await asyncio.wait_for(turn, CAP_S) == TurnEnded("end_turn")
    assert (acp_workspace / WRITE_NAME).exists()


async def test_cancel_while_a_permission_request_is_pending(acp_workspace: Path, fake_env: dict) -> None:
    events = Events(None)
    async with session("normal", acp_workspace, fake_env, events) as s:
        await s.new_session()
        turn = asyncio.create_task(s.prompt("write it"))
        await asyncio.wait_for(events.asked.wait(), CAP_S)
        assert await s.cancel() is False
        assert await asyncio.wait_for(turn, CAP_S) == TurnEnded("cancelled")
    assert events.of(PermissionSettled) == [PermissionSettled("call_1", None, by_cancel=True)]
    assert not (acp_workspace / WRITE_NAME).exists()


async def test_cancel_mid_stream_ends_the_turn_cancelled(acp_workspace: Path, fake_env: dict) -> None:
    events = Events()
    async with session("normal", acp_workspace, fake_env, events) as s:
        await s.new_session()
        turn = asyncio.create_task(s.prompt("SLOW"))
        while len(events.of(TextChunk)) < 3:
            await asyncio.sleep(0.01)
        started = time.monotonic()
        assert await s.cancel() is False
        assert await asyncio.wait_for(turn, CAP_S) == TurnEnded("cancelled")
        assert time.monotonic() - started < 2.0
        # The session goes on: a second turn in it works.
        events.answer = "allow"
        assert await asyncio.wait_for(s.prompt("write it"), CAP_S) == TurnEnded("end_turn")


async def test_an_agent_that_ignores_cancel_is_killed_after_the_grace(acp_workspace: Path, fake_env: dict) -> None:
    events = Events()
    async with session("ignore-cancel", acp_workspace, fake_env, events, cancel_grace_s=0.5) as s:
        await s.new_session()
        turn = asyncio.create_task(s.prompt("go"))
        while not events.of(TextChunk):
            await asyncio.sleep(0.01)
        started = time.monotonic()
        assert await s.cancel() is True
        took = time.monotonic() - started
        assert await asyncio.wait_for(turn, CAP_S) == TurnEnded("cancelled", killed=True)
        assert 0.5 <= took < 5.0
        assert s.pid is not None and not group_alive(s.pid)
        assert not alive_in(acp_workspace)
        with pytest.raises(AcpError):
            await s.prompt("again")
    exited = events.of(AgentExited)
    assert len(exited) == 1 and exited[0].expected


async def test_an_agent_that_dies_mid_turn_says_how_and_what_it_wrote(acp_workspace: Path, fake_env: dict) -> None:
    events = Events()
    async with session("die-mid-turn", acp_workspace, fake_env, events) as s:
        await s.new_session()
        with pytest.raises(AgentDied) as died:
            await asyncio.wait_for(s.prompt("go"), CAP_S)
    assert died.value.returncode == 3
    assert "exited with status 3 during session/prompt" in str(died.value)
    assert "simulated crash" in str(died.value) and "simulated crash" in died.value.stderr_tail
    exited = events.of(AgentExited)
    assert len(exited) == 1 and exited[0].returncode == 3 and not exited[0].expected
    assert "simulated crash" in exited[0].stderr_tail


async def test_malformed_frames_are_skipped_and_counted(acp_workspace: Path, fake_env: dict) -> None:
    events = Events()
    async with session("malformed", acp_workspace, fake_env, events) as s:
        await s.new_session()
        assert await asyncio.wait_for(s.prompt("go"), CAP_S) == TurnEnded("end_turn")
        assert s.bad_frames == 4
    assert [e.count for e in events.of(BadFrame)] == [1, 2, 3, 4]
    assert events.of(BadFrame)[0].sample == "this is not json"
    assert [e.text for e in events.of(TextChunk)] == ["still here"]


async def test_a_run_of_garbage_ends_the_session_in_words(acp_workspace: Path, fake_env: dict) -> None:
    events = Events()
    async with session("garbage", acp_workspace, fake_env, events, max_bad_frames=20) as s:
        await s.new_session()
        with pytest.raises(AgentProtocolError, match="sent 20 malformed frames in a row during session/prompt"):
            await asyncio.wait_for(s.prompt("go"), CAP_S)
        assert s.pid is not None and not group_alive(s.pid)
    assert len(events.of(BadFrame)) == 20
    assert events.of(AgentExited)[0].expected


async def test_writes_outside_the_workspace_get_an_error_the_agent_reads(acp_workspace: Path, fake_env: dict) -> None:
    events = Events()
    async with session("write-outside", acp_workspace, fake_env, events) as s:
        await s.new_session()
        assert await asyncio.wait_for(s.prompt("go"), CAP_S) == TurnEnded("end_turn")
    refused = events.of(FileRefused)
    assert [r.path for r in refused] == [str(acp_workspace.parent / "escaped.txt"),
                                         str(acp_workspace / ".." / "escaped2.txt")]
    said = "".join(e.text for e in events.of(TextChunk))
    assert said.count("is outside the workspace") == 2, said
    assert not (acp_workspace.parent / "escaped.txt").exists()
    assert not (acp_workspace.parent / "escaped2.txt").exists()
    assert not events.of(FileWritten)


async def test_a_flood_and_a_frame_of_600_kb_arrive_whole_and_in_order(acp_workspace: Path, fake_env: dict) -> None:
    events = Events()
    async with session("flood", acp_workspace, fake_env, events) as s:
        await s.new_session()
        stream = s.events()
        assert await asyncio.wait_for(s.prompt("go"), CAP_S) == TurnEnded("end_turn")
    assert not events.of(OtherUpdate)
    listed = events.of(CommandsAvailable)  # the 600 kB frame: the agent's slash commands
    assert [len(e.commands) for e in listed] == [BIG_FRAME_COMMANDS]
    assert listed[0].commands[0] == SlashCommand("command-0", "x" * 200)
    assert [e.text for e in events.of(TextChunk)] == [f"{i} " for i in range(FLOOD_CHUNKS)]
    streamed = [e async for e in stream]  # the stream saw the same, and ended with the session
    assert [e.text for e in streamed if isinstance(e, TextChunk)] == [f"{i} " for i in range(FLOOD_CHUNKS)]
    assert isinstance(streamed[-1], AgentExited)
    assert BIG_FRAME_COMMANDS * 200 > 570_000


async def test_close_on_asyncio_cancellation_leaves_no_process(acp_workspace: Path, fake_env: dict) -> None:
    events = Events()
    pids: list[int] = []

    async def run() -> None:
        async with session("ignore-cancel", acp_workspace, fake_env, events) as s:
            assert s.pid is not None
            pids.append(s.pid)
            await s.new_session()
            await s.prompt("go")

    task = asyncio.create_task(run())
    while not events.of(TextChunk):
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not group_alive(pids[0])
    assert not alive_in(acp_workspace)


async def test_probe_reports_the_agent_without_a_session(fake_env: dict) -> None:
    info = await probe(fake_agent("normal"), fake_env)
    assert (info.name, info.title, info.version, info.auth_methods) == ("fake-agent", "Fake agent", "1.0.0", ())
    assert info.capabilities["loadSession"] is False
    json.dumps(info.capabilities)  # plain JSON: it can go on the store


@pytest.mark.parametrize(("command", "words"), [
    (["no-such-agent-xyz"], "the agent's command 'no-such-agent-xyz' was not found on PATH"),
    ([sys.executable, "-c", "print('hello')"], "is not an ACP agent: it exited with status 0 before answering initialize"),
    (["sleep", "30"], "did not answer initialize within 1 s: is it an ACP agent?"),
    (["cat"], "is not a usable ACP agent"),
    ([sys.executable, "-c", "import json, sys; m = json.loads(sys.stdin.readline()); "
                            "print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {}}), flush=True); "
                            "sys.stdin.read()"],
     "is not an ACP agent: its answer to initialize is malformed: protocolVersion is missing$"),
])
async def test_a_command_that_is_not_an_acp_agent_is_refused_in_words(command: list[str], words: str) -> None:
    with pytest.raises(AgentStartError, match=words.replace("?", r"\?")):
        await probe(command, timeout_s=1.0)


_HOLDER = """
import asyncio, sys
from pathlib import Path
from tether.acp import AcpSession

async def main():
    session = AcpSession(sys.argv[1:], workspace=Path.cwd())
    await session.start()
    await session.new_session()
    turn = asyncio.ensure_future(session.prompt("go"))
    await asyncio.sleep(0.5)
    print("holding", session.pid, flush=True)
    await turn

asyncio.run(main())
"""


async def test_a_sigkilled_tether_takes_its_agent_down(acp_workspace: Path, fake_env: dict) -> None:
    """The agent runs under tether.agents.mcp_launcher: its parent-death signal reaches it."""
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HOLDER, *fake_agent("ignore-cancel"), cwd=acp_workspace,
        stdout=asyncio.subprocess.PIPE, env={**os.environ, **fake_env})
    try:
        assert holder.stdout is not None
        line = await asyncio.wait_for(holder.stdout.readline(), CAP_S)
        assert line.startswith(b"holding"), line
        pgid = int(line.split()[1])
        assert group_alive(pgid)
    finally:
        holder.kill()
        await holder.wait()
    deadline = time.monotonic() + 10.0
    while (group_alive(pgid) or alive_in(acp_workspace)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not group_alive(pgid)
    assert not alive_in(acp_workspace), alive_in(acp_workspace)


async def test_loading_a_session_is_refused_in_words_without_load_session(acp_workspace: Path, fake_env: dict) -> None:
    async with session("normal", acp_workspace, fake_env, Events()) as s:
        with pytest.raises(AcpError, match="cannot load an earlier session"):
            await s.load_session("fake-1")


async def test_reap_ends_what_the_launcher_left_in_its_group_without_waiting_on_its_pipes() -> None:
    """A process left in the agent's group holds the group's stdout and stderr open. Reaping
    waits for the leader's exit, then kills the group. It does not wait for the pipes first:
    asyncio's Process.wait() on Python 3.11 also waits for them, and would wait as long as the
    process lives (30 s here). The leader lingers a moment, so that the reap is already
    waiting when it ends."""
    from tether.acp import process

    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", "sleep 30 & echo $!; sleep 0.5; exit 3", stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    left = int((await proc.stdout.readline()).decode())
    try:
        code = await asyncio.wait_for(process.reap(proc), 20)  # a cap: the old reap waited out the sleep
        assert code == 3
        for _ in range(200):  # SIGKILL is sent; its end is the kernel's, a moment later (capped at 10 s)
            if not alive_in_group(left):
                break
            await asyncio.sleep(0.05)
        assert not alive_in_group(left), "the process left in the group outlived the reap"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(left, signal.SIGKILL)


def alive_in_group(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
