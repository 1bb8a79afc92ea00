"""MCP servers as tool catalogs: tether.agents.mcp and its launcher, against real processes.

The servers are the reference time server (installed from the registry) and the small
servers of tests/mcp_servers.py. Every server started here carries a token of its test in
its environment, so a test can find every process it left behind (server, launcher,
grandchildren) by scanning /proc.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest

from tether.vocab.cancel import CancelSignal, RunCancelled
from tether.agents.mcp.catalog import catalog, mcp_tools
from tether.agents.mcp.link import _closed, _Link, stderr_tail
from tether.agents.mcp.server import MCPServer, MCPStartError
from tether.agents.mcp.tool import MCPTool, policy, result_text, usable_schema
from tether.agents.tools.base import ToolContext
from tether.agents.tool_errors import ToolError
from tests.support import SERVERS, processes_with, reaped


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the launcher uses Linux prctl")


# ---- helpers -----------------------------------------------------------------------------

@pytest.fixture
def token() -> str:
    return uuid.uuid4().hex


def ctx(signal_: CancelSignal | None = None, call_id: str = "c1") -> ToolContext:
    return ToolContext(run_id="run-1", call_id=call_id, signal=signal_ or CancelSignal(), progress=lambda _: None,
                       workspace=None, ledger=None)  # type: ignore[arg-type]


def make_server(name: str, kind: str, tmp_path: Path, token: str, **kw) -> MCPServer:
    return MCPServer(name, command=sys.executable, args=(str(SERVERS), kind),
                     env={"MCP_TEST_DIR": str(tmp_path), "MCP_TEST_TOKEN": token}, **kw)


def time_server(name: str = "time", *, trusted: bool, token: str = "") -> MCPServer:
    return MCPServer(name, command=sys.executable, args=("-m", "mcp_server_time"), trust_annotations=trusted,
                     env={"MCP_TEST_TOKEN": token} if token else {})


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] != b"Z"


async def until(predicate, timeout: float = 15.0, what: str = "condition"):
    """Poll ``predicate`` until it is true (bounded: fails the test at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


async def assert_no_processes(token: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    left = processes_with(token)
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        left = processes_with(token)
    assert not left, f"processes left behind: {left}"


def pid_files(folder: Path, kind: str) -> list[int]:
    return sorted(int(p.read_text()) for p in folder.glob(f"{kind}-*.pid"))


def by_name(tools) -> dict[str, MCPTool]:
    return {t.name: t for t in tools}


# ---- 1. the reference time server ------------------------------------------------------

async def test_time_server_trusted(tmp_path: Path, token: str):
    async with mcp_tools([time_server(trusted=True, token=token)], stderr_dir=tmp_path) as tools:
        tools = by_name(tools)
        assert set(tools) == {"get_current_time", "convert_time"}
        now = tools["get_current_time"]
        assert isinstance(now, MCPTool)
        assert (now.read_only, now.needs_approval, now.idempotent) == (True, False, True)
        assert now.source == "mcp:time" and now.ref is None
        assert now.parameters["required"] == ["timezone"] and now.schema_problem is None
        assert "timezone" in (now.check_args({}) or "")
        assert now.check_args({"timezone": "UTC"}) is None
        text = await now.run({"timezone": "UTC"}, ctx())
        answer = json.loads(text)
        assert answer["timezone"] == "UTC"
        assert datetime.fromisoformat(answer["datetime"]).utcoffset().total_seconds() == 0
        # the server's own words for a bad timezone, as a tool error
        with pytest.raises(ToolError, match="Invalid timezone"):
            await now.run({"timezone": "Nowhere/Atlantis"}, ctx())
        # a tool the server does not know: it refuses the call (a protocol error), in words
        ghost = copy.copy(now)
        ghost.remote_name = "no_such_tool"
        with pytest.raises(ToolError, match="refused the call: Unknown tool: no_such_tool"):
            await ghost.run({}, ctx())
    assert (tmp_path / "mcp-time.stderr.log").exists()
    await assert_no_processes(token)


async def test_time_server_untrusted_needs_approval(token: str):
    async with mcp_tools([time_server(trusted=False, token=token)]) as tools:
        assert {t.name for t in tools} == {"get_current_time", "convert_time"}
        for tool in tools:
            assert (tool.read_only, tool.needs_approval, tool.idempotent) == (False, True, False)
        assert "datetime" in await by_name(tools)["get_current_time"].run({"timezone": "UTC"}, ctx())
    await assert_no_processes(token)


# ---- 2. errors as data -----------------------------------------------------------------

async def test_tool_errors_and_arguments(tmp_path: Path, token: str):
    async with mcp_tools([make_server("echo", "echo", tmp_path, token)]) as tools:
        tools = by_name(tools)
        echo, fail = tools["echo"], tools["fail"]
        assert await echo.run({"text": "hello"}, ctx()) == "echo: hello"
        with pytest.raises(ToolError, match="no such ticket") as caught:
            await fail.run({"message": "no such ticket"}, ctx())
        assert not caught.value.permanent
        # invalid arguments: refused in words before the call...
        assert echo.check_args({"text": 5}) == "invalid arguments for echo: text: 5 is not of type 'string'."
        assert "text" in (echo.check_args({}) or "")
        # ...and by the server, in its words, if sent anyway
        with pytest.raises(ToolError, match="validation error"):
            await echo.run({"text": 5}, ctx())
        # unknown arguments: the schema allows them and the server ignores them
        assert echo.check_args({"text": "x", "bogus": 1}) is None
        assert await echo.run({"text": "x", "bogus": 1}, ctx()) == "echo: x"
        # other content blocks in words, structured content as JSON, the idempotency key in _meta
        assert await tools["picture"].run({}, ctx()) == "a caption\n[image/png, 20 bytes]"
        assert json.loads(await tools["numbers"].run({}, ctx())) == {"one": 1, "two": 2}
        assert await tools["meta_key"].run({}, ctx(call_id="c7")) == "run-1:c7"
        # untrusted: every tool needs approval, whatever its annotations say
        assert all(t.needs_approval and not t.read_only for t in tools.values())
    await assert_no_processes(token)


async def test_trusted_annotations_of_a_test_server(tmp_path: Path, token: str):
    async with mcp_tools([make_server("echo", "echo", tmp_path, token, trust_annotations=True)]) as tools:
        tools = by_name(tools)
        # no annotations: the spec's defaults (destructive), so approval
        assert (tools["echo"].read_only, tools["echo"].needs_approval, tools["echo"].idempotent) == (False, True, False)
        # readOnlyHint
        assert (tools["fail"].read_only, tools["fail"].needs_approval) == (True, False)
        # destructiveHint false, idempotentHint true
        assert (tools["crash"].read_only, tools["crash"].needs_approval, tools["crash"].idempotent) == \
            (False, False, True)


# ---- 3. a server that dies mid-call ----------------------------------------------------

async def test_crash_mid_call_then_restart(tmp_path: Path, token: str):
    async with mcp_tools([make_server("echo", "echo", tmp_path, token)], stderr_dir=tmp_path) as tools:
        tools = by_name(tools)
        first = pid_files(tmp_path, "echo")
        assert len(first) == 1
        with pytest.raises(ToolError) as caught:
            await asyncio.wait_for(tools["crash"].run({}, ctx()), 30)
        words = str(caught.value)
        assert words.startswith("the MCP server 'echo' closed the connection during the call (it may have crashed); "
                                "its stderr ends:")
        assert "crash tool: about to die" in words
        assert not alive(first[0])
        # the next call starts the server again
        assert await tools["echo"].run({"text": "again"}, ctx()) == "echo: again"
        second = pid_files(tmp_path, "echo")
        assert len(second) == 2 and alive((set(second) - set(first)).pop())
        # a server that dies while idle is restarted by the next call, which then works
        os.kill((set(second) - set(first)).pop(), signal.SIGKILL)
        await until(lambda: len(processes_with(token)) == 0, what="the killed server and its launcher to end")
        # Idle: its client has seen the connection close (on a loaded host that comes a moment after
        # the process is gone; a call sent before it would be one the server died during).
        link = tools["echo"]._link
        await until(lambda: link.client is None or _closed(link.client), what="the client to see the server gone")
        assert await tools["echo"].run({"text": "third"}, ctx()) == "echo: third"
        assert len(pid_files(tmp_path, "echo")) == 3
    await assert_no_processes(token)


# ---- 4, 5. start-up failures -----------------------------------------------------------

async def test_server_that_never_answers_initialize(tmp_path: Path, token: str):
    server = make_server("mute", "hang", tmp_path, token, startup_timeout_s=2)
    with pytest.raises(MCPStartError) as caught:
        async with mcp_tools([server]):
            pytest.fail("the block must not run")
    words = str(caught.value)
    assert words.startswith("MCP server 'mute' failed to start: it did not answer the MCP handshake within 2 s "
                            f"(command: {sys.executable} {SERVERS} hang). Its stderr ends:\n")
    assert words.endswith("hang server: listening but never answering")
    assert caught.value.server == "mute"
    await assert_no_processes(token)


async def test_server_that_exits_at_once(tmp_path: Path, token: str):
    with pytest.raises(MCPStartError) as caught:
        async with mcp_tools([make_server("db", "fail", tmp_path, token)], stderr_dir=tmp_path):
            pytest.fail("the block must not run")
    words = str(caught.value)
    assert words.startswith("MCP server 'db' failed to start: it exited with code 2 before the MCP handshake "
                            "finished (command: ")
    assert "fatal: the database /nowhere/db.sqlite cannot be opened" in words
    assert "fatal: the database" in caught.value.stderr_tail
    assert "fatal: the database" in (tmp_path / "mcp-db.stderr.log").read_text()
    await assert_no_processes(token)


async def test_bad_command_and_one_good_server(tmp_path: Path, token: str):
    good = make_server("echo", "echo", tmp_path, token)
    bad = MCPServer("ghost", command=str(tmp_path / "no-such-server"), args=("--x",))
    with pytest.raises(MCPStartError) as caught:
        async with mcp_tools([good, bad]):
            pytest.fail("the block must not run")
    words = str(caught.value)
    assert words.startswith("MCP server 'ghost' failed to start: its command could not be run: ")
    assert "No such file or directory" in words and f"(command: {tmp_path}/no-such-server --x)" in words
    await assert_no_processes(token)  # the good one was stopped too


async def test_server_that_writes_noise_on_stdout(tmp_path: Path):
    server = MCPServer("noisy", command="sh", args=("-c", "echo 'Starting server v1.0'; exit 1"))
    with pytest.raises(MCPStartError) as caught:
        async with mcp_tools([server]):
            pytest.fail("the block must not run")
    assert str(caught.value).startswith(
        "MCP server 'noisy' failed to start: it exited with code 1 before the MCP handshake finished; "
        "it wrote to stdout what is not an MCP message: 'Starting server v1.0' (command: sh -c ")


# ---- 6. Stop during a call -------------------------------------------------------------

async def test_stop_cancels_the_request(tmp_path: Path, token: str):
    marker = tmp_path / "slow.cancelled"
    async with mcp_tools([make_server("echo", "echo", tmp_path, token)]) as tools:
        tools = by_name(tools)
        stop = CancelSignal()
        call_ctx = ctx(stop)
        call = asyncio.ensure_future(tools["slow"].run({"seconds": 60, "marker": str(marker)}, call_ctx))
        await until(lambda: Path(str(marker) + ".started").exists() or call.done(), what="the slow tool to start")
        fired = time.monotonic()
        stop.cancel("operator pressed Stop")
        with pytest.raises(RunCancelled, match="operator pressed Stop"):
            await call
        assert time.monotonic() - fired < 5.0
        assert call_ctx.partial == "the MCP request was cancelled (notifications/cancelled sent to echo)"
        # the server saw the cancellation: its tool's CancelledError handler wrote the marker
        await until(marker.exists, what="the server to see notifications/cancelled")
        # the same session is still usable (no restart)
        assert await tools["echo"].run({"text": "still here"}, ctx()) == "echo: still here"
        assert len(pid_files(tmp_path, "echo")) == 1
        # a signal that fired before the call: nothing is sent
        early = CancelSignal()
        early.cancel("too late")
        early_ctx = ctx(early)
        with pytest.raises(RunCancelled):
            await tools["echo"].run({"text": "never"}, early_ctx)
        assert early_ctx.partial is None
    await assert_no_processes(token)


async def test_stop_and_cancel_at_once(tmp_path: Path, token: str):
    """A Stop and a cancellation of the caller together: the request is cancelled once and the
    session survives (a second cancel must not reach the SDK)."""
    marker = tmp_path / "slow.cancelled"
    async with mcp_tools([make_server("echo", "echo", tmp_path, token)]) as tools:
        tools = by_name(tools)
        stop = CancelSignal()
        call = asyncio.ensure_future(tools["slow"].run({"seconds": 60, "marker": str(marker)}, ctx(stop)))
        await until(lambda: Path(str(marker) + ".started").exists() or call.done(), what="the slow tool to start")
        stop.cancel("Stop")
        call.cancel()
        call.cancel()
        with pytest.raises((RunCancelled, asyncio.CancelledError)):
            await asyncio.wait_for(call, 10)
        await until(marker.exists, what="the server to see notifications/cancelled")
        assert await tools["echo"].run({"text": "alive"}, ctx()) == "echo: alive"
        assert len(pid_files(tmp_path, "echo")) == 1
    await assert_no_processes(token)


# ---- 7. names ----------------------------------------------------------------------------

async def test_name_collisions(tmp_path: Path, token: str):
    a = make_server("a", "echo", tmp_path, token)
    b = make_server("b", "echo", tmp_path, token)
    async with mcp_tools([a, b]) as tools:
        names = [t.name for t in tools]
        assert "a.echo" in names and "b.echo" in names and "echo" not in names
        assert len(names) == len(set(names)) == 16
        tools = by_name(tools)
        assert tools["a.echo"].remote_name == "echo" and tools["a.echo"].source == "mcp:a"
        assert await tools["b.echo"].run({"text": "via b"}, ctx()) == "echo: via b"
        assert tools["a.echo"].schema()["function"]["name"] == "a.echo"
    await assert_no_processes(token)


async def test_reserved_names_are_prefixed(tmp_path: Path, token: str):
    async with mcp_tools([make_server("x", "echo", tmp_path, token)], reserved={"echo", "read_file"}) as tools:
        names = {t.name for t in tools}
        assert "x.echo" in names and "echo" not in names
        assert "fail" in names and "x.fail" not in names  # only the colliding one


async def test_catalog_naming_edge_cases():
    from mcp_types import Tool as ListedTool

    def listed(name: str) -> ListedTool:
        return ListedTool(name=name, input_schema={"type": "object"})

    a, b = _Link(MCPServer("a", command="x"), None), _Link(MCPServer("b", command="x"), None)
    tools = catalog([(a, [listed("run"), listed("run"), listed("only_a")]), (b, [listed("run")])],
                    reserved={"only_a", "a.only_a"})
    assert [t.name for t in tools] == ["a.run", "a.only_a_2", "b.run"]


# ---- 8. streamable HTTP ------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
async def http_server(tmp_path: Path) -> AsyncIterator[str]:
    port = free_port()
    log = open(tmp_path / "http-server.log", "wb")
    proc = subprocess.Popen([sys.executable, str(SERVERS), "http", str(port)], stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL)

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            assert proc.poll() is None, (tmp_path / "http-server.log").read_text()
            return False

    try:
        await until(listening, timeout=30, what="the HTTP MCP server to listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            await asyncio.to_thread(proc.wait, 10)
        except subprocess.TimeoutExpired:
            proc.kill()
            await asyncio.to_thread(proc.wait)
        log.close()


async def test_streamable_http(http_server: str):
    server = MCPServer("web", url=http_server, trust_annotations=True)
    async with mcp_tools([server]) as tools:
        tools = by_name(tools)
        assert "echo" in tools and tools["echo"].source == "mcp:web"
        assert await tools["echo"].run({"text": "over http"}, ctx()) == "echo: over http"
        with pytest.raises(ToolError, match="nope"):
            await tools["fail"].run({"message": "nope"}, ctx())
        assert await tools["meta_key"].run({}, ctx(call_id="h1")) == "run-1:h1"


async def test_streamable_http_nothing_listening():
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(MCPStartError) as caught:
        async with mcp_tools([MCPServer("web", url=url, startup_timeout_s=5)]):
            pytest.fail("the block must not run")
    assert str(caught.value).startswith("MCP server 'web' failed to start: it could not be reached: ")
    assert str(caught.value).endswith(f"(url: {url}).")


# ---- 9. no process outlives the block ----------------------------------------------------

async def test_no_orphans_after_normal_exit(tmp_path: Path, token: str):
    servers = [make_server("g", "grandchild", tmp_path, token), make_server("s", "stubborn", tmp_path, token)]
    async with mcp_tools(servers) as tools:
        tools = by_name(tools)
        grandchild = int((tmp_path / "grandchild.pid").read_text())
        assert alive(grandchild)
        spawned = int(await tools["g.spawn_child"].run({}, ctx()))
        assert alive(spawned)
        # launcher, server and its children for g; launcher and server for s
        assert len(processes_with(token)) == 6
    # at once, not eventually: leaving the block waits until every launcher has ended, and a
    # launcher ends only after it has reaped everything its server started
    assert processes_with(token) == {}
    assert not alive(grandchild) and not alive(spawned)


async def test_no_orphans_after_an_exception(tmp_path: Path, token: str):
    servers = [make_server("g", "grandchild", tmp_path, token), make_server("s", "stubborn", tmp_path, token)]
    with pytest.raises(KeyError):
        async with mcp_tools(servers):
            raise KeyError("the run failed")
    assert processes_with(token) == {}


async def test_no_orphans_after_cancellation_even_twice(tmp_path: Path, token: str):
    servers = [make_server("g", "grandchild", tmp_path, token), make_server("s", "stubborn", tmp_path, token)]
    ready = asyncio.Event()

    async def hold() -> None:
        async with mcp_tools(servers):
            ready.set()
            await asyncio.sleep(3600)

    task = asyncio.create_task(hold())
    await asyncio.wait_for(ready.wait(), 60)
    task.cancel()
    await asyncio.sleep(0.2)  # the stop is under way (the stubborn server takes seconds to go)
    task.cancel()  # a second Stop must not break through the clean-up
    with pytest.raises(asyncio.CancelledError):
        await task
    assert processes_with(token) == {}  # the block waited for the servers to go, despite the second cancel


async def test_cancelled_while_starting(tmp_path: Path, token: str):
    task = asyncio.create_task(
        mcp_tools([make_server("mute", "hang", tmp_path, token, startup_timeout_s=60)]).__aenter__())
    await until(lambda: pid_files(tmp_path, "hang"), what="the server to be spawned")
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 20
    await assert_no_processes(token)


HOLDER = """
import asyncio, json, sys
from tether.agents.mcp.catalog import mcp_tools
from tether.agents.mcp.server import MCPServer

async def main():
    servers = [MCPServer(**spec) for spec in json.loads(sys.argv[1])]
    async with mcp_tools(servers):
        print("ready", flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_sigkilled_holder_leaves_no_server(tmp_path: Path, token: str):
    specs = [{"name": s.name, "command": s.command, "args": list(s.args), "env": dict(s.env)}
             for s in (make_server("g", "grandchild", tmp_path, token), make_server("s", "stubborn", tmp_path, token))]
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holder = await asyncio.create_subprocess_exec(sys.executable, str(script), json.dumps(specs),
                                                  stdout=asyncio.subprocess.PIPE, cwd=tmp_path)
    async with reaped(holder):
        line = await asyncio.wait_for(holder.stdout.readline(), 60)
        assert line.strip() == b"ready"
        assert len(processes_with(token)) == 5  # two launchers, two servers, one grandchild
        holder.kill()
        await holder.wait()
        await assert_no_processes(token)


# ---- the launcher by itself --------------------------------------------------------------

async def test_launcher_exit_code_and_grandchild(tmp_path: Path):
    pidfile = tmp_path / "gc.pid"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tether.agents.mcp_launcher", "--", "sh", "-c", f"sleep 300 & echo $! > {pidfile}; exit 5",
        stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 5
    assert b"exited with code 5" in err
    assert not alive(int(pidfile.read_text()))


async def test_launcher_usage():
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.agents.mcp_launcher", "--",
                                                stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 2 and b"usage" in err
    # a parent that is already gone (here: named wrongly) ends the launcher before it starts anything
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.agents.mcp_launcher", "--parent", "1", "--",
                                                "sleep", "300", stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1 and b"has already ended" in err


# ---- pieces --------------------------------------------------------------------------------

def test_server_validation():
    assert MCPServer("t", command="x", args=["a", "b"]).args == ("a", "b")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one of a command"):
        MCPServer("t")
    with pytest.raises(ValueError, match="exactly one of a command"):
        MCPServer("t", command="x", url="http://h/mcp")
    with pytest.raises(ValueError, match="name must be"):
        MCPServer("has space", command="x")
    with pytest.raises(ValueError, match="url must start with http"):
        MCPServer("t", url="ftp://h")
    with pytest.raises(ValueError, match="args must be a list of strings"):
        MCPServer("t", command="x", args="-m server")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="startup_timeout_s must be a positive"):
        MCPServer("t", command="x", startup_timeout_s=0)
    with pytest.raises(ValueError, match="env must map"):
        MCPServer("t", command="x", env={"A": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="env and cwd apply only"):
        MCPServer("t", url="http://h/mcp", env={"A": "1"})
    assert MCPServer("t", url="https://example.org/mcp").describe() == "url: https://example.org/mcp"


async def test_duplicate_server_names():
    with pytest.raises(ValueError, match="two MCP servers are named 'a'"):
        async with mcp_tools([MCPServer("a", command="x"), MCPServer("a", command="y")]):
            pass
    async with mcp_tools([]) as tools:
        assert tools == []


def test_policy_table():
    from mcp_types import ToolAnnotations as A

    assert policy(A(read_only_hint=True), trusted=False) == (False, True, False)
    assert policy(None, trusted=True) == (False, True, False)
    assert policy(A(), trusted=True) == (False, True, False)
    assert policy(A(read_only_hint=True), trusted=True) == (True, False, True)
    assert policy(A(destructive_hint=False), trusted=True) == (False, False, False)
    assert policy(A(destructive_hint=True, idempotent_hint=True), trusted=True) == (False, True, True)


def test_unusable_schemas():
    assert usable_schema({"type": "object", "properties": {"a": {"type": "string"}}})[1] is None
    for bad, why in [([], "not a JSON object"), ({"type": "string"}, "root is not"),
                     ({"type": "object", "properties": {"a": {"type": 5}}}, "not a valid JSON schema")]:
        schema, problem = usable_schema(bad)
        assert schema == {"type": "object", "additionalProperties": True}
        assert why in (problem or "")


async def test_tool_with_unusable_schema_says_so():
    from mcp_types import Tool as ListedTool

    link = _Link(MCPServer("odd", command="x"), None)
    tool = MCPTool(link, ListedTool(name="odd", description="Odd.",
                                    input_schema={"type": "object", "properties": {"a": {"type": 5}}}), "odd")
    assert tool.parameters == {"type": "object", "additionalProperties": True}
    assert "Its input schema could not be used" in tool.description
    assert tool.check_args({"anything": [1, 2]}) is None
    ref = MCPTool(link, ListedTool(name="ref", input_schema={
        "type": "object", "properties": {"a": {"$ref": "https://example.invalid/schema.json"}}}), "ref")
    assert ref.check_args({"a": 1}) is None  # an unresolvable $ref: left to the server, never a crash


def test_result_text():
    from mcp_types import (
        AudioContent,
        BlobResourceContents,
        CallToolResult,
        EmbeddedResource,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    result = CallToolResult(content=[
        TextContent(text="first"),
        AudioContent(data="AAAA", mime_type="audio/wav"),
        ResourceLink(uri="file:///a.txt", name="a.txt"),
        EmbeddedResource(resource=TextResourceContents(uri="file:///b.txt", text="bee")),
        EmbeddedResource(resource=BlobResourceContents(uri="file:///c.bin", blob="AAAA", mime_type="x/y")),
    ], structured_content={"ignored": True})
    assert result_text(result) == ("first\n[audio/wav, 3 bytes]\n[resource link file:///a.txt (a.txt)]\n"
                                   "[resource file:///b.txt]\nbee\n[resource file:///c.bin, x/y, 3 bytes]")
    assert result_text(CallToolResult(content=[], structured_content={"n": 1})) == '{"n": 1}'
    assert result_text(CallToolResult(content=[])) == ""


def test_stderr_tail(tmp_path: Path):
    log = tmp_path / "err.log"
    log.write_text("old run\n" + "".join(f"line {i}\n" for i in range(30)))
    tail = stderr_tail(log, offset=len("old run\n"))
    assert tail.splitlines() == [f"line {i}" for i in range(10, 30)]
    assert stderr_tail(tmp_path / "missing.log") == ""

