"""Tether as an ACP agent (issue 29, item 5), driven by the ``acp`` package's client side as the
editor, with a file store in a temp folder and the demo's scripted agents (no network).
``tether acp`` is spawned over stdio as an editor starts it where the process is the point (a
prompt's whole path, the end of stdin); elsewhere the same server (``tether.acp.server.serve``)
serves the editor in this process, over a socket pair. Each test waits for what the editor is
sent, never for time; each checks that the server ends by itself when its input closes and
leaves no process behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import schema

from tether.acp.server import STDIO_LIMIT, serve
from tether.acp.serving.approvals import REJECTED_IN_EDITOR, PermissionAsks
from tether.acp.serving.session import CANCEL_REASON, GONE_REASON
from tether.store.control import ControlReply
from tether.vocab.events import ApprovalRequired
from tether.demo.provider import scenarios
from tether.demo.provider.server import running_provider
from tether.vocab.state import Cancelled, NeedsApproval, Status
from tether.store.files.store import RunStore
from tests.acp.conftest import FAKE_AGENT
from tests.acp.fake_agent import WRITE_NAME, WRITE_TEXT
from tests.acp.procs import alive_in
from tests.support import cli_here_async
from tether.demo.agents import DEMO
from tether.tui.cli.parser import build_parser

CAP_S = 60.0  # a generous cap on every wait: it fails the test, it never paces it
EDITOR = "test-editor"

Answer = Callable[[schema.ToolCallUpdate, list[schema.PermissionOption]], Awaitable[schema.RequestPermissionResponse]]


class Editor:
    """The editor's side (``acp.Client``): keeps every update it is sent, and answers each
    permission request with ``answer``."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.updates: list[Any] = []
        self.asked: list[schema.ToolCallUpdate] = []
        self.options: list[list[schema.PermissionOption]] = []
        self.answer = answer
        self._changed = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self._changed.set()

    async def request_permission(self, session_id: str, tool_call: schema.ToolCallUpdate,
                                 options: list[schema.PermissionOption], **kwargs: Any) -> schema.RequestPermissionResponse:
        self.asked.append(tool_call)
        self.options.append(options)
        self._changed.set()
        assert self.answer is not None, "this test's editor was not to be asked"
        return await self.answer(tool_call, options)

    async def until(self, predicate: Callable[[], bool], what: str) -> None:
        async def scan() -> None:
            while not predicate():
                self._changed.clear()
                await self._changed.wait()
        try:
            await asyncio.wait_for(scan(), CAP_S)
        except TimeoutError:
            raise AssertionError(f"the editor never saw {what}") from None

    def text(self) -> str:
        """The agent's words, as the editor shows them."""
        return "".join(u.content.text for u in self.updates if isinstance(u, schema.AgentMessageChunk))

    def of(self, kind: type) -> list[Any]:
        return [u for u in self.updates if isinstance(u, kind)]

    def saw(self, words: str) -> bool:
        return words in self.text()


def choose(option_id: str) -> Answer:
    async def answer(tool_call: schema.ToolCallUpdate,
                     options: list[schema.PermissionOption]) -> schema.RequestPermissionResponse:
        return schema.RequestPermissionResponse(outcome=schema.AllowedOutcome(outcome="selected", option_id=option_id))
    return answer


class Place:
    """The test's folder, its store and Tether's home, set in this process's environment too
    (the server served here and the CLI run here read them)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.runs = tmp / "runs"
        self.home = tmp / "home"
        self.stderr = tmp / "server.stderr"

    @property
    def store(self) -> RunStore:
        return RunStore(self.runs)

    @property
    def workspace(self) -> Path:
        return self.home / "workspace"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("TETHER_CONFIG", "TETHER_STORE")}
        env["TETHER_HOME"] = str(self.home)
        return env

    async def tether(self, *args: str) -> tuple[int, str, str]:
        """The CLI beside the server, as a second terminal would run it: by the CLI's main in
        this process (tests/support.py, cli_here), without a start-up, in the environment and
        folder the fixture gave this process (not swapped in: a server served here reads them)."""
        done = await asyncio.wait_for(cli_here_async(*args, "--store", str(self.runs)), CAP_S)
        return done.returncode, done.stdout, done.stderr

    @contextlib.asynccontextmanager
    async def served(self, editor: Editor, *options: str, real: bool = False) -> AsyncIterator[Any]:
        """Tether's ACP server with its client connection, initialized as ``test-editor``:
        ``tether acp`` as an editor starts it (``real``), else :func:`tether.acp.server.serve`
        in this process. On the way out its input is closed: it must end by itself (the
        process with exit code 0), and leave no process in the test's folder."""
        server = self._spawned(options) if real else self._in_process(options)
        async with server as (to_server, from_server, ended):
            async with self._connected(editor, to_server, from_server, ended) as conn:
                yield conn

    @contextlib.asynccontextmanager
    async def _connected(self, editor: Editor, to_server: asyncio.StreamWriter, from_server: asyncio.StreamReader,
                         ended: Callable[[], Awaitable[None]]) -> AsyncIterator[Any]:
        conn = acp.connect_to_agent(editor, to_server, from_server)
        try:
            init = await asyncio.wait_for(conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION, client_capabilities=schema.ClientCapabilities(),
                client_info=schema.Implementation(name=EDITOR, version="1")), CAP_S)
            assert init.agent_info is not None and init.agent_info.name == "tether"
            assert init.agent_capabilities is not None and init.agent_capabilities.load_session
            yield conn
            if to_server.can_write_eof():
                to_server.write_eof()  # a socket: the server reads its end, and may still write
            else:
                to_server.close()
            await ended()
            assert alive_in(self.tmp) == {}
        finally:
            await conn.close()

    @contextlib.asynccontextmanager
    async def _spawned(self, options: tuple[str, ...]) -> AsyncIterator[Any]:
        with self.stderr.open("ab") as stderr:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tether.tui.cli", "acp", "--store", str(self.runs), *options,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
                cwd=self.tmp, env=self.env(), limit=50 * 1024 * 1024)
        assert proc.stdin is not None and proc.stdout is not None

        async def ended() -> None:
            code = await asyncio.wait_for(proc.wait(), CAP_S)
            assert code == 0, self.stderr.read_text()

        try:
            yield proc.stdin, proc.stdout, ended
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    @contextlib.asynccontextmanager
    async def _in_process(self, options: tuple[str, ...]) -> AsyncIterator[Any]:
        args = build_parser().parse_args(["acp", "--store", str(self.runs), *options])
        ours, theirs = socket.socketpair()
        from_server, to_server = await asyncio.open_connection(sock=ours, limit=50 * 1024 * 1024)
        server_in, server_out = await asyncio.open_connection(sock=theirs, limit=STDIO_LIMIT)
        serving = asyncio.create_task(serve(args.config, args.store, workspace=args.workspace, stdin=server_in,
                                            stdout=server_out, agent_sets=[DEMO]), name="tether acp here")

        async def ended() -> None:
            await asyncio.wait_for(asyncio.shield(serving), CAP_S)

        try:
            yield to_server, from_server, ended
        finally:
            if not serving.done():
                serving.cancel()
                with contextlib.suppress(BaseException):
                    await serving
            server_out.close()
            to_server.close()


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Place:
    place = Place(tmp_path)
    for name in ("TETHER_CONFIG", "TETHER_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TETHER_HOME", str(place.home))
    monkeypatch.chdir(tmp_path)  # where an editor starts it: ./tether.toml is looked for here
    return place


async def _session(conn: Any, place: Place, agent: str | None = None) -> str:
    opened = await conn.new_session(cwd=str(place.tmp), mcp_servers=[])
    if agent is not None:
        await conn.set_session_mode(session_id=opened.session_id, mode_id=agent)
    return opened.session_id


async def _prompt(conn: Any, session_id: str, text: str) -> str:
    response = await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=[acp.text_block(text)]), CAP_S)
    return str(response.stop_reason)


async def test_a_prompt_streams_text_tool_calls_and_usage_and_ends_end_turn(place: Place):
    editor = Editor()
    async with place.served(editor, real=True) as conn:
        opened = await conn.new_session(cwd=str(place.tmp), mcp_servers=[])
        assert opened.modes is not None and opened.modes.current_mode_id == "plan"
        assert {"plan", "destructive", "slow"} <= {m.id for m in opened.modes.available_modes}
        assert opened.config_options is not None and opened.config_options[0].id == "agent"
        run_id = opened.session_id
        assert await _prompt(conn, run_id, "Which file mentions a timeout?") == "end_turn"

    assert editor.saw(scenarios.PLAN_ANSWER)
    started = {u.tool_call_id: u for u in editor.of(schema.ToolCallStart)}
    assert [u.title.split()[0] for u in started.values()] == ["list_files", "read_file"]
    assert [u.raw_input for u in started.values()] == [{}, {"path": "errors.log"}]
    finished = [u for u in editor.of(schema.ToolCallProgress) if u.status == "completed"]
    assert [u.tool_call_id for u in finished] == list(started)
    assert "worker 7 timed out" in finished[-1].content[0].content.text
    usage = editor.of(schema.UsageUpdate)
    assert len(usage) == 3 and usage[-1].cost is not None and usage[-1].cost.currency == "USD"
    assert 0 < usage[0].cost.amount < usage[-1].cost.amount

    state = place.store.load(run_id)
    assert state.status is Status.COMPLETED and state.task == "Which file mentions a timeout?"
    code, out, err = await place.tether("show", run_id)
    assert code == 0, err
    assert scenarios.PLAN_ANSWER in out


@pytest.mark.parametrize("option, picked_by", [("allow", "mode"), ("reject", "config option")])
async def test_the_editor_answers_a_permission_request(place: Place, option: str, picked_by: str):
    editor = Editor(choose(option))
    async with place.served(editor) as conn:
        run_id = await _session(conn, place)
        if picked_by == "mode":
            await conn.set_session_mode(session_id=run_id, mode_id="destructive")
        else:
            chosen = await conn.set_config_option(config_id="agent", session_id=run_id, value="destructive")
            assert chosen.config_options[0].current_value == "destructive"
        assert await _prompt(conn, run_id, "Free some space in the workspace.") == "end_turn"

    (asked,) = editor.asked
    assert asked.raw_input == {"path": "access.log"} and asked.title.startswith("delete_file")
    assert [o.kind for o in editor.options[0]] == ["allow_once", "reject_once"]
    state = place.store.load(run_id)
    (decision,) = state.approvals.values()
    assert decision.by == EDITOR and state.status is Status.COMPLETED
    if option == "allow":
        assert decision.verdict == "approved" and editor.saw(scenarios.DESTRUCTIVE_DELETED)
        assert not (place.workspace / "access.log").exists()
    else:
        assert decision.verdict == "rejected" and editor.saw(scenarios.DESTRUCTIVE_DECLINED)
        assert (place.workspace / "access.log").exists()
        read = [m["content"] for m in state.messages if m.get("role") == "tool" and m["tool_call_id"] == asked.tool_call_id]
        assert REJECTED_IN_EDITOR in read[0]  # the words the model read
        failed = [u for u in editor.of(schema.ToolCallProgress) if u.tool_call_id == asked.tool_call_id]
        assert failed[-1].status == "failed"


async def test_a_console_decides_first_the_run_goes_on_and_the_editor_is_told(place: Place):
    asked, late = asyncio.Event(), asyncio.Event()

    async def answer_late(tool_call: schema.ToolCallUpdate,
                          options: list[schema.PermissionOption]) -> schema.RequestPermissionResponse:
        asked.set()
        await late.wait()
        return await choose("reject")(tool_call, options)

    editor = Editor(answer_late)
    async with place.served(editor) as conn:
        run_id = await _session(conn, place, "destructive")
        prompting = asyncio.create_task(_prompt(conn, run_id, "Free some space in the workspace."))
        await asyncio.wait_for(asked.wait(), CAP_S)
        assert isinstance(place.store.load(run_id).interruption, NeedsApproval)  # on the store for every console
        code, out, err = await place.tether("approve", run_id, "--as", "alice", "--note", "disk is full")
        assert code == 0, err
        assert await prompting == "end_turn"
        assert editor.saw("decided in Tether by alice: approved")
        late.set()  # the editor's answer comes after all: taken, and ignored
        await conn.set_session_mode(session_id=run_id, mode_id="destructive")  # a round trip after it
        assert not editor.saw("was not taken")

    state = place.store.load(run_id)
    assert [(d.verdict, d.by) for d in state.approvals.values()] == [("approved", "alice")]
    assert editor.saw(scenarios.DESTRUCTIVE_DELETED) and not (place.workspace / "access.log").exists()


async def test_session_cancel_is_tethers_stop(place: Place):
    editor = Editor()
    async with place.served(editor, real=True) as conn:
        run_id = await _session(conn, place, "slow")
        prompting = asyncio.create_task(_prompt(conn, run_id, "How many entries are in the archive?"))
        await editor.until(lambda: any(u.content and "scanned" in u.content[0].content.text
                                       for u in editor.of(schema.ToolCallProgress)), "scan_archive's progress")
        await conn.cancel(session_id=run_id)
        assert await prompting == "cancelled"

    state = place.store.load(run_id)
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled(CANCEL_REASON, EDITOR)
    assert "the scan_archive call did not finish" in state.messages[-1]["content"]
    assert editor.of(schema.ToolCallProgress)[-1].status == "failed"
    assert editor.saw(f"stopped by {EDITOR}: {CANCEL_REASON}")


async def test_a_cancel_while_asking_leaves_the_call_waiting_and_the_next_prompt_asks_again(place: Place):
    answers: list[str] = []

    async def cancelled_then_allow(tool_call: schema.ToolCallUpdate,
                                   options: list[schema.PermissionOption]) -> schema.RequestPermissionResponse:
        if not answers:
            answers.append("cancelled")
            await first_cancel.wait()  # an editor answers "cancelled" once it has sent session/cancel
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        answers.append("allow")
        return await choose("allow")(tool_call, options)

    first_cancel = asyncio.Event()
    editor = Editor(cancelled_then_allow)
    async with place.served(editor) as conn:
        run_id = await _session(conn, place, "destructive")
        prompting = asyncio.create_task(_prompt(conn, run_id, "Free some space in the workspace."))
        await editor.until(lambda: bool(editor.asked), "a permission request")
        await conn.cancel(session_id=run_id)
        first_cancel.set()
        assert await prompting == "cancelled"
        assert isinstance(place.store.load(run_id).interruption, NeedsApproval)  # still for the consoles
        assert await _prompt(conn, run_id, "Thanks. Anything else?") == "end_turn"

    assert answers == ["cancelled", "allow"]
    state = place.store.load(run_id)
    assert state.status is Status.COMPLETED and [d.by for d in state.approvals.values()] == [EDITOR]
    assert {"role": "user", "content": "Thanks. Anything else?"} in state.messages


async def test_session_load_replays_a_run_and_a_prompt_follows_it_up(place: Place):
    first = Editor()
    async with place.served(first) as conn:
        run_id = await _session(conn, place)
        assert await _prompt(conn, run_id, "Which file mentions a timeout?") == "end_turn"

    editor = Editor()
    async with place.served(editor) as conn:
        loaded = await conn.load_session(cwd=str(place.tmp), session_id=run_id, mcp_servers=[])
        assert loaded is not None and loaded.modes is not None and loaded.modes.current_mode_id == "plan"
        replayed = list(editor.updates)
        said = [u.content.text for u in replayed if isinstance(u, schema.UserMessageChunk)]
        assert said == ["Which file mentions a timeout?"]
        assert editor.saw(scenarios.PLAN_ANSWER)
        assert [u.raw_input for u in editor.of(schema.ToolCallStart)] == [{}, {"path": "errors.log"}]
        assert [u.status for u in editor.of(schema.ToolCallProgress)] == ["completed", "completed"]
        assert await _prompt(conn, run_id, "And which one is the oldest?") == "end_turn"
        await conn.set_session_mode(session_id=run_id, mode_id="plan")  # its own agent: fine
        with pytest.raises(acp.RequestError, match="cannot change agent"):
            await conn.set_session_mode(session_id=run_id, mode_id="slow")

    state = place.store.load(run_id)
    assert state.status is Status.COMPLETED
    users = [m["content"] for m in state.messages if m.get("role") == "user"]
    assert users == ["Which file mentions a timeout?", "And which one is the oldest?"]
    assert state.answer == scenarios.PLAN_ANSWER
    assert editor.text().count(scenarios.PLAN_ANSWER) == 2  # replayed once, answered once


async def test_the_end_of_stdin_stops_a_running_run_and_leaves_nothing(place: Place):
    editor = Editor()
    async with place.served(editor, real=True) as conn:
        run_id = await _session(conn, place, "slow")
        prompting = asyncio.create_task(_prompt(conn, run_id, "How many entries are in the archive?"))
        await editor.until(lambda: any(u.status == "in_progress" for u in editor.of(schema.ToolCallProgress)
                                       + editor.of(schema.ToolCallStart)), "scan_archive running")
        # leaving the block closes the server's stdin with the prompt still running
    with contextlib.suppress(BaseException):
        await prompting
    state = place.store.load(run_id)
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled(GONE_REASON, EDITOR)
    assert place.store.owner(run_id) is None or not place.store.owner(run_id).alive



@pytest.mark.parametrize("redirected", ["input", "output"])
def test_a_standard_stream_that_is_a_file_is_refused_in_words(place: Place, tmp_path: Path, redirected: str):
    """``tether acp`` speaks over pipes, as an editor starts it: a file for its input or output
    (``tether acp < requests.jsonl``) is refused in one line, exit 2, no traceback, nothing served."""
    file = tmp_path / "frames.jsonl"
    file.write_text("{}\n" if redirected == "input" else "")
    with open(file, "rb" if redirected == "input" else "wb") as stream:
        stdin, stdout = (stream, subprocess.PIPE) if redirected == "input" else (subprocess.DEVNULL, stream)
        done = subprocess.run([sys.executable, "-m", "tether.tui.cli", "acp", "--store", str(place.runs)],
                              stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"tether acp: error: its standard {redirected} is a regular file: tether acp speaks the Agent Client Protocol "
        f"over pipes, as an editor starts it (through a pipe: "
        f"{'cat FILE | tether acp' if redirected == 'input' else 'tether acp | tee FILE'})"]
    assert redirected == "input" or file.read_bytes() == b""  # not a byte of protocol into the file


async def test_the_agent_files_agents_are_the_modes_and_their_replies_stream(place: Place):
    (place.tmp / "ws").mkdir()
    (place.tmp / "ws" / "errors.log").write_text("worker 7 timed out after 30000 ms\n")
    editor = Editor()
    async with running_provider() as url:
        config = place.tmp / "agents.toml"
        config.write_text(f"""
[agents.finder]
model = "plan"
base_url = "{url}"
tools = ["tether:list_files", "tether:read_file"]
workspace = "./ws"

[agents.cleaner]
model = "destructive"
base_url = "{url}"
tools = ["tether:list_files", "tether:delete_file"]
workspace = "./ws"
""")
        async with place.served(editor, "--config", str(config)) as conn:
            opened = await conn.new_session(cwd=str(place.tmp), mcp_servers=[])
            assert opened.modes is not None and opened.modes.current_mode_id == "finder"
            assert [m.id for m in opened.modes.available_modes] == ["finder", "cleaner"]
            with pytest.raises(acp.RequestError, match="no agent 'plan' here"):
                await conn.set_session_mode(session_id=opened.session_id, mode_id="plan")
            assert await _prompt(conn, opened.session_id, "Which file mentions a timeout?") == "end_turn"

    pieces = [u.content.text for u in editor.of(schema.AgentMessageChunk)]
    assert len(pieces) > 1 and "".join(pieces) == scenarios.PLAN_ANSWER  # streamed, as the endpoint sent it
    state = place.store.load(opened.session_id)
    assert state.status is Status.COMPLETED and state.agent is not None and state.agent.name == "finder"


async def test_an_acp_agent_of_the_agent_file_runs_behind_tether(place: Place):
    """Editor, then Tether, then an ACP agent (the fake one): its thoughts, plan, text and
    permission request reach the editor through Tether's run, and the editor's answer reaches it."""
    (place.tmp / "ws").mkdir()
    config = place.tmp / "agents.toml"
    config.write_text(f"""
[agents.writer]
acp = ["{sys.executable}", "{FAKE_AGENT}", "normal"]
workspace = "./ws"
""")
    editor = Editor(choose("allow"))
    async with place.served(editor, "--config", str(config)) as conn:
        run_id = await _session(conn, place)
        assert await _prompt(conn, run_id, "write the file") == "end_turn"

    assert (place.tmp / "ws" / WRITE_NAME).read_text() == WRITE_TEXT
    assert editor.of(schema.AgentThoughtChunk) and editor.of(schema.AgentPlanUpdate)
    assert editor.saw("I will write out.txt.") and editor.saw("Done.")
    (asked,) = editor.asked
    assert asked.tool_call_id == "call_1"
    assert [u.cost.amount for u in editor.of(schema.UsageUpdate) if u.cost] == [0.0125]
    state = place.store.load(run_id)
    assert state.status is Status.COMPLETED and [d.by for d in state.approvals.values()] == [EDITOR]


async def test_the_editor_told_when_its_answer_loses_the_race():
    """The editor answers first, but the harness says a console got there: the editor is told
    in words (in-process: which side wins a real race cannot be arranged without timing)."""
    said: list[str] = []

    class Answering:
        async def request_permission(self, **_: Any) -> schema.RequestPermissionResponse:
            return schema.RequestPermissionResponse(outcome=schema.AllowedOutcome(outcome="selected", option_id="allow"))

    async def decide(call_id: str, verdict: str, text: str) -> ControlReply:
        return ControlReply(False, "already decided: rejected by bob; there is one decision per call")

    async def say(words: str) -> None:
        said.append(words)

    asks = PermissionAsks(Answering(), "s1", decide, say)
    asks.asked(ApprovalRequired(run_id="s1", call_id="c1", tool="delete_file", args='{"path": "a"}', why="writes"))
    (asking,) = [t for t in asyncio.all_tasks() if t.get_name() == "acp permission c1"]
    await asyncio.wait_for(asking, CAP_S)
    assert said == ["the editor's answer on delete_file (c1) was not taken: already decided: rejected by bob; "
                    "there is one decision per call"]
