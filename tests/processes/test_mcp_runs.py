"""MCP servers in runs: what a run does with them when it stops, when they crash or fail to
start, and when the run's own process is killed and the run resumed elsewhere."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import time
import uuid
from pathlib import Path

from tether.agents.agent import Agent
from tether.vocab.cancel import CancelSignal
from tether.vocab.events import ToolStart
from tether.harness import Harness
from tether.agents.mcp.server import MCPServer
from tether.demo.provider.server import running_app
from tether.vocab.state import Cancelled, NeedsApproval, Policies, Status
from tether.store.files.store import RunStore
from tether.demo.agents import DEMO
from tests.conftest import Recorder
from tests.endpoints import call, completion, scripted_app
from tests.support import SERVERS, processes_with, reaped

CAP_S = 60.0


def echo_server(tmp: Path, token: str, **kw) -> MCPServer:
    return MCPServer("echo", command=sys.executable, args=(str(SERVERS), "echo"),
                     env={"MCP_TEST_DIR": str(tmp), "MCP_TEST_TOKEN": token}, **kw)


async def gone(token: str) -> None:
    """Wait until no process carries ``token`` (the servers and their launchers are gone)."""
    deadline = time.monotonic() + CAP_S
    while processes_with(token):
        if time.monotonic() > deadline:
            raise AssertionError(f"processes left behind: {processes_with(token)}")
        await asyncio.sleep(0.05)


def agent(url: str, servers: list[MCPServer], **kw) -> Agent:
    return Agent("mcp-user", "scripted", base_url=url, mcp_servers=servers, **kw)


async def test_stop_cancels_the_mcp_request_and_the_result_says_so(tmp_path: Path):
    token = uuid.uuid4().hex
    marker = tmp_path / "slow.cancelled"
    endpoint = scripted_app(lambda t, r, b: completion(
        tool_calls=[call("slow", {"seconds": 60, "marker": str(marker)}, "s1")]) if t == 0 else completion("done"))
    recorder = Recorder()
    signal_ = CancelSignal()
    async with running_app(endpoint) as url:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as h:
            run = asyncio.create_task(h.start(agent(url, [echo_server(tmp_path, token)],
                                                    policies=Policies(auto_approve=["slow"])),
                                              "sleep", signal=signal_, sinks=[recorder]))
            await recorder.wait_for(lambda e: isinstance(e, ToolStart) and e.name == "slow")
            while not Path(str(marker) + ".started").exists():
                await asyncio.sleep(0.01)
            signal_.cancel("operator pressed Stop")
            out = await asyncio.wait_for(run, CAP_S)
    assert out.state.status is Status.INTERRUPTED and out.state.interruption == Cancelled("operator pressed Stop")
    result = out.state.messages[-1]["content"]
    assert "the slow call did not finish" in result
    assert "the MCP request was cancelled (notifications/cancelled sent to echo)" in result
    deadline = time.monotonic() + CAP_S
    while not marker.exists() and time.monotonic() < deadline:  # the server's tool saw the cancellation
        await asyncio.sleep(0.02)
    assert marker.read_text() == "cancelled"
    await gone(token)


async def test_a_crash_mid_call_is_worded_and_the_run_goes_on(tmp_path: Path):
    token = uuid.uuid4().hex

    def script(t, r, body):
        if t == 0:
            return completion(tool_calls=[call("crash", {}, "c1")])
        if t == 1:
            return completion(tool_calls=[call("echo", {"text": "still here"}, "e1")])
        return completion("ok: " + body["messages"][-1]["content"])

    async with running_app(scripted_app(script)) as url:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as h:
            out = await h.start(agent(url, [echo_server(tmp_path, token, trust_annotations=True)],
                                      policies=Policies(auto_approve=["crash", "echo"])), "go")
    assert out.state.status is Status.COMPLETED and out.state.answer == "ok: echo: still here"
    crashed = out.state.messages[3]["content"]
    assert crashed.startswith("Error: the MCP server 'echo' closed the connection during the call")
    assert "crash tool: about to die" in crashed  # the tail of its stderr
    await gone(token)


async def test_an_mcp_tool_error_is_data(tmp_path: Path):
    token = uuid.uuid4().hex
    endpoint = scripted_app(lambda t, r, b: completion(tool_calls=[call("fail", {"message": "no such ticket"}, "f")])
                            if t == 0 else completion("noted"))
    async with running_app(endpoint) as url:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as h:
            out = await h.start(agent(url, [echo_server(tmp_path, token, trust_annotations=True)]), "go")
    assert out.state.status is Status.COMPLETED
    text = out.state.messages[3]["content"]
    assert text.startswith("Error: ") and text.endswith("no such ticket")  # the server's own words
    await gone(token)


async def test_a_server_that_fails_to_start_fails_the_run_with_its_stderr(tmp_path: Path):
    token = uuid.uuid4().hex
    broken = MCPServer("db", command=sys.executable, args=(str(SERVERS), "fail"),
                       env={"MCP_TEST_DIR": str(tmp_path), "MCP_TEST_TOKEN": token})
    async with running_app(scripted_app(lambda t, r, b: completion("never asked"))) as url:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as h:
            out = await h.start(agent(url, [broken]), "go")
    assert out.state.status is Status.FAILED and out.state.turns == 0
    assert "MCP server 'db' failed to start" in out.state.error
    assert "fatal: the database /nowhere/db.sqlite cannot be opened" in out.state.error
    await gone(token)


async def test_names_that_collide_with_the_agents_own_tools_are_prefixed(tmp_path: Path):
    token = uuid.uuid4().hex
    seen: list[list[str]] = []

    def script(t, r, body):
        seen.append([tool["function"]["name"] for tool in body.get("tools") or ()])
        return completion("listed")

    def echo(text: str) -> str:
        """The agent's own echo."""
        return text

    async with running_app(scripted_app(script)) as url:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as h:
            await h.start(agent(url, [echo_server(tmp_path, token)], tools=[echo]), "go")
    # The model is offered the prefixed name as hosted endpoints accept it (no dot).
    assert "echo" in seen[0] and "echo__echo" in seen[0] and "echo.slow" not in seen[0] and "slow" in seen[0]
    assert "echo.echo" not in seen[0]
    await gone(token)


OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What OpenAI's chat completions accept as a function name (anything else fails the request)."""


async def test_a_prefixed_tool_is_offered_as_endpoints_accept_and_called_by_that_name(tmp_path: Path):
    token = uuid.uuid4().hex
    bodies: list[dict] = []

    def script(t, r, body):
        bodies.append(body)
        bad = [tool["function"]["name"] for tool in body.get("tools") or ()
               if not OPENAI_NAME.match(tool["function"]["name"])]
        bad += [c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or ()
                if not OPENAI_NAME.match(c["function"]["name"])]
        if bad:  # as OpenAI does: the request is refused
            return completion(f"refused: {bad}")
        if t == 0:
            return completion(tool_calls=[call("echo__echo", {"text": "via the offered name"}, "e1")])
        return completion("said: " + body["messages"][-1]["content"])

    def echo(text: str) -> str:
        """The agent's own echo."""
        return text

    recorder = Recorder()
    async with running_app(scripted_app(script)) as url:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as h:
            out = await h.start(agent(url, [echo_server(tmp_path, token)], tools=[echo],
                                      policies=Policies(auto_approve=["echo.echo"])), "go", sinks=[recorder])
            trace = list(h.store.read_trace(out.state.run_id))
    assert out.state.status is Status.COMPLETED and out.state.answer == "said: echo: via the offered name"
    assert "echo__echo" in [tool["function"]["name"] for tool in bodies[0]["tools"]]
    # The transcript, the trace and the events keep the server and the tool as they are.
    assert out.state.messages[2]["tool_calls"][0]["function"]["name"] == "echo.echo"
    assert [r["name"] for r in trace if r.get("kind") == "tool_start"] == ["echo.echo"]
    assert [e.name for e in recorder.events if isinstance(e, ToolStart)] == ["echo.echo"]
    assert [r["name"] for r in out.tool_runs] == ["echo.echo"]
    await gone(token)


async def test_two_tools_offered_under_one_name_fail_the_run_in_words(tmp_path: Path):
    token = uuid.uuid4().hex

    def echo(text: str) -> str:
        """The agent's own echo: the server's is then named echo.echo, offered as echo__echo."""
        return text

    def echo__echo(text: str) -> str:
        """Offered under the name the server's echo would be."""
        return text

    async with running_app(scripted_app(lambda t, r, b: completion("never asked"))) as url:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as h:
            out = await h.start(agent(url, [echo_server(tmp_path, token)], tools=[echo, echo__echo]), "go")
    assert out.state.status is Status.FAILED and out.state.turns == 0
    assert out.state.error.startswith(
        "MCP server 'echo' failed to start: its tool 'echo' (named 'echo.echo') would be offered to the model as "
        "'echo__echo', and so would the agent's own tool 'echo__echo'")
    await gone(token)


async def test_an_untrusted_servers_read_only_tool_says_why_it_needs_approval(tmp_path: Path):
    token = uuid.uuid4().hex
    endpoint = scripted_app(lambda t, r, b: completion(tool_calls=[call("fail", {"message": "x"}, "f1")]))
    async with running_app(endpoint) as url:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as h:
            out = await h.start(agent(url, [echo_server(tmp_path, token)]), "go")
    waiting = out.state.interruption
    assert out.state.status is Status.INTERRUPTED and isinstance(waiting, NeedsApproval)
    assert waiting.why == ("fail needs approval: the MCP server 'echo' is not trusted, so its tools' annotations "
                           "(read-only) are not believed; trust it with trust_annotations = true under [mcp.echo] "
                           "in the agent file to use them")
    assert "writes to the workspace" not in waiting.why
    await gone(token)


async def test_a_trusted_servers_tool_without_annotations_says_it_counts_as_destructive(tmp_path: Path):
    token = uuid.uuid4().hex
    endpoint = scripted_app(lambda t, r, b: completion(tool_calls=[call("echo", {"text": "x"}, "e1")]))
    async with running_app(endpoint) as url:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as h:
            out = await h.start(agent(url, [echo_server(tmp_path, token, trust_annotations=True)]), "go")
    waiting = out.state.interruption
    assert isinstance(waiting, NeedsApproval) and waiting.why == (
        "echo needs approval: the MCP server 'echo' gives it no annotations, so it counts as destructive "
        "(the MCP default)")
    await gone(token)


async def test_sigkill_of_the_runs_process_leaves_no_server_and_resume_finishes(tmp_path: Path):
    token = uuid.uuid4().hex
    marker = tmp_path / "slow.cancelled"
    (tmp_path / "tether.toml").write_text(f"""
[agents.sleeper]
model = "scripted"
base_url = "URL"
mcp = ["echo"]
auto_approve = ["slow"]

[mcp.echo]
command = "python"
args = ["{SERVERS}", "echo"]
env = {{ MCP_TEST_DIR = "{tmp_path}", MCP_TEST_TOKEN = "{token}" }}
""")
    endpoint = scripted_app(lambda t, r, b: completion(
        tool_calls=[call("slow", {"seconds": 1, "marker": str(marker)}, "s1")]) if t == 0 else completion("rested"))
    runs = tmp_path / "runs"
    async with running_app(endpoint) as url:
        config = tmp_path / "tether.toml"
        config.write_text(config.read_text().replace("URL", url))
        place = ["--runs-dir", str(runs), "--config", str(config)]
        run = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", "run", "--agent", "sleeper",
                                                   "--prompt", "sleep", "--run-id", "k1", *place,
                                                   stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        async with reaped(run):
            deadline = time.monotonic() + CAP_S
            while not Path(str(marker) + ".started").exists():
                assert time.monotonic() < deadline, "the slow tool never started"
                await asyncio.sleep(0.01)
            assert processes_with(token)  # the server (and its launcher) are up
            run.send_signal(signal.SIGKILL)
            await run.wait()
        await gone(token)  # the launcher saw its parent die and took the server down
        assert RunStore(runs).load("k1").status is Status.RUNNING  # orphaned, mid-call
        Path(str(marker) + ".started").unlink()
        resume = await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", "resume", "k1", *place,
                                                      stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(resume.communicate(), CAP_S)
    assert resume.returncode == 0, err.decode()
    state = RunStore(runs).load("k1")
    assert state.status is Status.COMPLETED and state.answer == "rested"
    assert state.messages[3]["content"] == "slept 1.0"
    await gone(token)
