"""Your own agents: the library, agent files, runs that remember their agent.

The endpoints here are scripted chat-completions apps served on loopback in the test's
event loop, so a second process (``tether approve``) reaches the same model as the first.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

import tether
from tether.agents.agent import Agent, AgentError
from tether.agents.config import ConfigError, load_config
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.demo.provider.server import running_app
from tether.vocab.state import NeedsApproval, Status
from tether.store.files.layout import JOURNAL_FILE
from tether.store.files.store import RunStore
from tests.endpoints import call, completion, scripted_app
from tests.support import cli_here_async

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "helpdesk"


def helpdesk_script(turn: int, request, body: dict) -> dict:
    """Read ticket 42, close it as a duplicate (needs approval), then answer in words that
    depend on what the close call returned."""
    if turn == 0:
        return completion(tool_calls=[call("get_ticket", {"ticket_id": 42}, "read-42")])
    if turn == 1:
        return completion(tool_calls=[call("close_ticket", {"ticket_id": 42, "reason": "duplicate of #41"},
                                           "close-42")])
    last = body["messages"][-1]["content"]
    return completion(f"Done: {last}")


async def tether_cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``tether ARGS`` in a child process, awaited without blocking this loop (which serves
    the endpoint the child talks to)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tether.tui.cli", *args, cwd=cwd, env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


@pytest.fixture
def helpdesk(tmp_path: Path) -> Path:
    """A copy of the README's example (examples/helpdesk) a test may change."""
    root = tmp_path / "helpdesk"
    shutil.copytree(EXAMPLE, root)
    return root


def point_at(config: Path, url: str, *, mcp: bool = False) -> None:
    """The example's agent file, pointed at ``url`` (and without its MCP server unless asked)."""
    text = config.read_text().replace("http://127.0.0.1:8080/v1", url)
    if not mcp:
        text = text.replace('mcp = ["time"]', "")
    config.write_text(text)


# ---- the library ---------------------------------------------------------------------------

PROGRAM = """
import asyncio, sys
import tether
import helpdesk

agent = tether.Agent(
    "helpdesk", model="scripted", base_url=sys.argv[1],
    instructions="You close duplicate tickets.",
    tools=[helpdesk.get_ticket, helpdesk.close_ticket],
    stop_when=[helpdesk.too_many_errors],
)

async def main():
    async with tether.Harness(sys.argv[2]) as harness:
        outcome = await harness.start(agent, "Close ticket 42 if it is a duplicate.", run_id="lib-1")
    waiting = outcome.state.interruption
    print(outcome.status.value, waiting.tool_name if isinstance(waiting, tether.NeedsApproval) else "-")

asyncio.run(main())
"""


async def test_library_agent_stops_at_an_approval_and_a_second_process_finishes_it(helpdesk: Path):
    (helpdesk / "program.py").write_text(PROGRAM)
    runs = helpdesk / "runs"
    app = scripted_app(helpdesk_script)
    async with running_app(app) as url:
        code, out, err = await _python(helpdesk, "program.py", url, str(runs))
        assert code == 0, err
        assert out.split() == ["interrupted", "close_ticket"]
        assert json.loads((helpdesk / "tickets" / "42.json").read_text())["status"] == "open"

        code, out, err = await tether_cli("approve", "lib-1", "--runs-dir", str(runs), "--note", "it is",
                                          "--as", "dana", "--json", cwd=helpdesk)
    assert code == 0, err
    summary = json.loads(out)
    assert summary["status"] == "completed"
    assert summary["answer"] == "Done: Approved by the operator dana (it is). closed ticket 42"
    ticket = json.loads((helpdesk / "tickets" / "42.json").read_text())
    assert ticket["status"] == "closed" and ticket["closed_by"] == "lib-1:close-42"
    saved = RunStore(runs).load("lib-1")
    assert saved.agent.name == "helpdesk" and saved.agent.source == "library"
    assert saved.agent.spec["stop_when"] == ["helpdesk:too_many_errors"]
    assert set(saved.agent.tools) == {"get_ticket", "close_ticket"}


async def _python(cwd: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, *args, cwd=cwd, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


# ---- agent files ---------------------------------------------------------------------------

async def test_agent_file_run_approve_from_another_process(helpdesk: Path):
    runs = helpdesk / "runs"
    async with running_app(scripted_app(helpdesk_script)) as url:
        point_at(helpdesk / "tether.toml", url)
        code, out, err = await tether_cli("run", "--agent", "helpdesk", "--prompt", "Close 42 if duplicate.",
                                          "--run-id", "f-1", "--runs-dir", str(runs), "--json", cwd=helpdesk)
        assert code == 5, err  # interrupted: waiting for approval
        first = json.loads(out)
        assert first["interruption"]["toolName"] == "close_ticket"
        code, out, err = await tether_cli("approve", "f-1", "--runs-dir", str(runs), "--json", cwd=helpdesk)
    assert code == 0, err
    assert json.loads(out)["status"] == "completed"
    state = RunStore(runs).load("f-1")
    assert state.agent.source == "config" and state.agent.config == str((helpdesk / "tether.toml").resolve())
    # The agent file's price for its model, not the assumed default.
    assert (state.pricing.input_per_million, state.pricing.output_per_million) == (0.20, 0.60)
    assert state.limits.max_turns == 12 and state.limits.budget_usd == 0.05


async def test_a_changed_tool_refuses_the_approval_in_words_and_consumes_nothing(helpdesk: Path):
    runs = helpdesk / "runs"
    async with running_app(scripted_app(helpdesk_script)) as url:
        point_at(helpdesk / "tether.toml", url)
        code, _, err = await tether_cli("run", "--agent", "helpdesk", "--prompt", "Close 42.", "--run-id", "c-1",
                                        "--runs-dir", str(runs), cwd=helpdesk)
        assert code == 5, err
        journal = runs / "c-1" / JOURNAL_FILE
        before = journal.read_bytes()
        module = helpdesk / "helpdesk.py"
        module.write_text(module.read_text().replace("def close_ticket(ticket_id: int, reason: str,",
                                                     "def close_ticket(ticket_id: int, reason: str, notify: bool,"))
        code, out, err = await tether_cli("approve", "c-1", "--runs-dir", str(runs), cwd=helpdesk)
        assert code == 2
        assert "tool close_ticket changed" in err and "Nothing was changed" in err
        assert journal.read_bytes() == before  # the approval is still pending, unused
        state = RunStore(runs).load("c-1")
        assert isinstance(state.interruption, NeedsApproval) and not state.approvals

        # A tool that is gone is named too.
        module.write_text(module.read_text().replace("@tether.tool(read_only=True)\ndef get_ticket",
                                                     "def get_ticket"))
        (helpdesk / "tether.toml").write_text((helpdesk / "tether.toml").read_text()
                                              .replace('"helpdesk:get_ticket", ', ""))
        code, out, err = await tether_cli("reject", "c-1", "--runs-dir", str(runs), cwd=helpdesk)
    assert code == 2 and "tool get_ticket is gone" in err
    assert journal.read_bytes() == before


@pytest.mark.parametrize(("change", "words"), [
    (lambda t: t.replace("max_turns = 12", "max_turn = 12"),
     "unknown key 'agents.helpdesk.max_turn': did you mean 'max_turns'?"),
    (lambda t: t.replace('"helpdesk:get_ticket"', '"helpdesc:get_ticket"'),
     "agents.helpdesk.tools: no module named 'helpdesc'"),
    (lambda t: t.replace('"helpdesk:get_ticket"', '"helpdesk:TICKETS"'),
     "agents.helpdesk.tools: 'helpdesk:TICKETS' is not a tool: expected a function"),
    (lambda t: t.replace('"helpdesk:get_ticket"', '"helpdesk:each_ticket"'),
     "agents.helpdesk.tools: 'helpdesk:each_ticket' is not a valid tool: each_ticket yields values"),
    (lambda t: t.replace('mcp = ["time"]', 'mcp = ["clock"]'),
     "agents.helpdesk.mcp: no MCP server 'clock': declare [mcp.clock]"),
    (lambda t: t.replace("max_turns = 12", 'max_turns = "twelve"'), "agents.helpdesk.max_turns: input should be"),
    (lambda t: t.replace('workspace = "./tickets"', 'workspace = "./tikets"'),
     "agents.helpdesk.workspace:"),
    (lambda t: t + "\n[agents.broken\n", "not valid TOML"),
    (lambda t: t.replace('base_url = "http://127.0.0.1:8080/v1"', 'base_url = "ftp://x"'),
     "agents.helpdesk.base_url: must be an http:// or https:// URL"),
    (lambda t: t.replace("budget_usd = 0.05", "budget_usd = nan"),
     "agents.helpdesk.budget_usd: input should be a finite number"),
    (lambda t: t.replace("budget_usd = 0.05", "budget_usd = inf"),
     "agents.helpdesk.budget_usd: input should be a finite number"),
])
async def test_config_errors_are_one_line_exit_2_before_any_run(helpdesk: Path, change, words, monkeypatch):
    config = helpdesk / "tether.toml"
    config.write_text(change(config.read_text()))
    with (helpdesk / "helpdesk.py").open("a") as module:  # a function that cannot be a tool
        module.write("\n\ndef each_ticket():\n    yield from open_tickets()\n")
    runs = helpdesk / "runs"
    argv = ("run", "--agent", "helpdesk", "--prompt", "x", "--runs-dir", str(runs))
    if words == "not valid TOML":  # one in a real process: the exit code and the one line a shell gets
        code, out, err = await tether_cli(*argv, cwd=helpdesk)
    else:  # the rest by the CLI's main here, with this copy's helpdesk module, not one imported before
        monkeypatch.setattr(sys, "path", list(sys.path))
        for name in [n for n in sys.modules if n.partition(".")[0] == "helpdesk"]:
            monkeypatch.delitem(sys.modules, name)
        done = await cli_here_async(*argv, cwd=helpdesk)
        code, err = done.returncode, done.stderr
        for name in [n for n in sys.modules if n.partition(".")[0] == "helpdesk"]:
            del sys.modules[name]
    assert code == 2
    assert words in err, err
    assert str(config) in err
    assert len(err.strip().splitlines()) == 1
    assert not runs.exists() or not any(runs.iterdir())


async def test_tether_agents_lists_tools_with_their_source_and_policy(helpdesk: Path):
    code, out, err = await tether_cli("agents", "--json", cwd=helpdesk)
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)}
    mine = rows["helpdesk"]
    assert mine["model"] == "qwen2.5-7b-instruct" and mine["base_url"] == "http://127.0.0.1:8080/v1"
    tools = {t["name"]: t for t in mine["tools"]}
    assert tools["get_ticket"]["source"] == "helpdesk" and tools["get_ticket"]["read_only"]
    assert tools["close_ticket"]["needs_approval"] and tools["close_ticket"]["idempotent"]
    assert tools["list_files"]["source"] == "tether"
    # The MCP server was started to list its tools; trusted annotations: a read-only clock.
    assert tools["get_current_time"]["source"] == "mcp:time" and not tools["get_current_time"]["needs_approval"]
    assert rows["plan"]["set"] == "demo"
    code, out, _ = await tether_cli("agents", cwd=helpdesk)
    assert "close_ticket" in out and "needs approval" in out and "mcp:time" in out


# ---- agents in code ----------------------------------------------------------------------------

def test_agent_mistakes_are_refused_in_words(tmp_path: Path):
    with pytest.raises(AgentError, match="uses read_file but has no workspace"):
        Agent("a", "m", tools=["tether:read_file"])
    with pytest.raises(AgentError, match="two tools named 'read_file'"):
        Agent("a", "m", tools=["tether:read_file", "tether:read_file"], workspace=tmp_path)
    with pytest.raises(AgentError, match="tether has no built-in tool 'scan_archive'"):
        Agent("a", "m", tools=["tether:scan_archive"])
    with pytest.raises(AgentError, match="is not a tool"):
        Agent("a", "m", tools=[42])  # type: ignore[list-item]
    with pytest.raises(AgentError, match="not a reference"):
        Agent("a", "m", tools=["get_ticket"])


async def test_a_lambda_stop_condition_works_here_and_is_refused_in_words_elsewhere(tmp_path: Path):
    endpoint = scripted_app(lambda t, r, b: completion(tool_calls=[call("list_files", {}, f"c{t}")]))
    async with running_app(endpoint) as url:
        agent = Agent("looper", "scripted", base_url=url, tools=["tether:list_files"], workspace=tmp_path,
                      stop_when=[lambda s: "two turns" if s.turns >= 2 else None])
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
            out = await harness.start(agent, "go")
            assert out.status is Status.INTERRUPTED and out.state.turns == 2
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as elsewhere:
            with pytest.raises(tether.StateError, match="cannot be rebuilt.*stop condition"):
                await elsewhere.resume(out.state.run_id)


def test_the_public_surface():
    for name in tether.__all__:
        assert getattr(tether, name) is not None
    assert {"Agent", "Harness", "tool", "ToolContext", "MCPServer", "Status", "Limits", "Policies", "Pricing",
            "RunState", "NeedsApproval", "MaxTurns", "MaxBudget", "Cancelled", "RunStopped"} <= set(tether.__all__)


def test_the_demo_is_one_agent_set_and_an_empty_folder_stays_empty(tmp_path: Path):
    mine = tmp_path / "mine"
    mine.mkdir()
    agent = Agent("reader", "m", base_url="http://127.0.0.1:9/v1", tools=["tether:read_file"], workspace=mine)
    Harness(tmp_path / "runs", tmp_path / "demo-ws", agent_sets=(DEMO,)).create(agent, "read")
    assert not any(mine.iterdir())
    assert not (tmp_path / "demo-ws").exists()  # the sample is laid out for the demo alone
    assert "scan_archive" not in [t.name for t in agent.tool_list]
    h = Harness(tmp_path / "runs", tmp_path / "demo-ws", agent_sets=(DEMO,))
    assert "scan_archive" in [t.name for t in h.agent_named("slow").tool_list]
    assert (tmp_path / "demo-ws" / "errors.log").exists()


def test_load_config_reads_the_example(helpdesk: Path):
    config = load_config(helpdesk / "tether.toml")
    agent = config.agent("helpdesk")
    assert [t.name for t in agent.tool_list] == ["get_ticket", "close_ticket", "list_files"]
    assert agent.workspace == (helpdesk / "tickets").resolve()
    assert agent.mcp_servers[0].command == sys.executable  # "python" is the Python running Tether
    with pytest.raises(ConfigError, match="no agent 'nobody'"):
        config.agent("nobody")


def test_one_import_name_outside_the_checkout(tmp_path: Path):
    """Installed, Tether is ``tether`` and nothing else: no ``core`` or ``tui`` at the top."""
    import subprocess

    def python(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                              env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})

    assert python("import tether.tui.app, tether.harness").returncode == 0
    for name in ("core", "tui"):
        result = python(f"import {name}")
        assert result.returncode == 1 and f"No module named '{name}'" in result.stderr
