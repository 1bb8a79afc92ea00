"""MCP tool names at the model's boundary, and why an untrusted server's tool waits for approval.

The model is offered every tool under a name hosted endpoints accept (OpenAI's chat completions
refuse a function name outside ``^[a-zA-Z0-9_-]{1,64}$``); everything else (the transcript, the
trace, approvals) keeps the tool's own name, ``time.get_current_time``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mcp_types import Tool as ListedTool
from mcp_types import ToolAnnotations

from tether import Agent
from tether.harness import Harness
from tether.agents.mcp.catalog import catalog
from tether.agents.mcp.link import _Link
from tether.agents.mcp.server import MCPServer, MCPStartError
from tether.vocab.state import NeedsApproval, Status
from tether.agents.tools.base import OFFERED_NAME, Tool, ToolContext, offered_name
from tether.agents.tools.builtin import DeleteFile
from tether.demo.agents import DEMO
from tests.support import Scripted

OPENAI = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def listed(name: str, **hints: Any) -> ListedTool:
    return ListedTool(name=name, input_schema={"type": "object"},
                      annotations=ToolAnnotations(**hints) if hints else None)


def link(name: str, *, trusted: bool = False) -> _Link:
    return _Link(MCPServer(name, command="unused", trust_annotations=trusted), None)


# ---- the offered name ------------------------------------------------------------------

def test_offered_names_fit_the_rule_and_keep_what_already_fits():
    assert offered_name("get_current_time") == "get_current_time"
    assert offered_name("read-file_2") == "read-file_2"
    assert offered_name("time.get_current_time") == "time__get_current_time"
    odd = ["time.get_current_time", "get time", "天気", "天気予報", "café.ü", "emoji 🙂", "", ".", "a" * 64 + "b",
           "x" * 80, "x" * 80 + "y", "my.server." + "t" * 70, "tab\there", "slash/colon:semi;"]
    offered = [offered_name(n) for n in odd]
    assert all(OPENAI.match(o) and OFFERED_NAME.fullmatch(o) for o in offered), offered
    assert len(set(offered)) == len(odd)  # a digest keeps apart what the rewriting would merge
    assert offered == [offered_name(n) for n in odd]  # the same every time (and in every process)
    long = offered_name("x" * 80)
    assert len(long) == 64 and long.startswith("x" * 55 + "_") and re.fullmatch(r"[0-9a-f]{8}", long[56:])
    assert offered_name("get time").startswith("get_time_")


async def test_every_offered_name_of_a_server_with_odd_names_fits():
    dotted = link("my.server")
    other = link("o" * 64)
    tools = catalog([
        (dotted, [listed(n) for n in ("get time", "天気", "a.b", "ok", "x" * 80, "x" * 80 + "y", "emoji 🙂")]),
        (other, [listed("ok"), listed("t" * 64)]),
    ], reserved={"read_file", "list_files", "x" * 80})
    names = [t.name for t in tools]
    assert "my.server.ok" in names and f"{'o' * 64}.ok" in names  # both servers list "ok": prefixed
    assert f"my.server.{'x' * 80}" in names  # the agent's own tool has that name
    assert all(OPENAI.match(offered_name(t.name)) for t in tools), [offered_name(t.name) for t in tools]
    assert len({offered_name(t.name) for t in tools} | {"read_file", "list_files", offered_name("x" * 80)}) \
        == len(tools) + 3


async def test_two_tools_offered_under_one_name_are_refused_in_words():
    with pytest.raises(MCPStartError) as caught:
        catalog([(link("a"), [listed("x.y")]), (link("b"), [listed("x__y")])], reserved=())
    words = str(caught.value)
    assert words.startswith("MCP server 'b' failed to start: its tool 'x__y' would be offered to the model "
                            "as 'x__y', and so would the tool 'x.y' of the MCP server 'a'")
    assert "rename this server or the other tool" in words and "(command: unused)" in words
    assert caught.value.server == "b"

    with pytest.raises(MCPStartError, match=r"MCP server 'files' failed to start: its tool 'notes\.add' would be "
                                            r"offered to the model as 'notes__add', and so would the agent's own "
                                            r"tool 'notes__add'"):
        catalog([(link("files"), [listed("notes.add")])], reserved={"notes__add"})

    with pytest.raises(MCPStartError, match=r"its tool 'echo' \(named 'a\.echo'\) would be offered to the model "
                                            r"as 'a__echo', and so would the agent's own tool 'a__echo'"):
        catalog([(link("a"), [listed("echo")])], reserved={"echo", "a__echo"})


# ---- the run loop maps the names at the model's boundary ----------------------------------

class Clock(Tool):
    name = "time.get_current_time"
    description = "The time."
    parameters = {"type": "object", "properties": {"timezone": {"type": "string"}}}
    source = "mcp:time"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        return f"12:00 {args.get('timezone', 'UTC')}"


class Note(Tool):
    name = "files.write note"
    description = "Write a note."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}}
    read_only = False
    needs_approval = True
    source = "mcp:files"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        return "written"


def call_names(messages: list[dict]) -> list[str]:
    return [c["function"]["name"] for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or ()]


async def test_a_call_of_the_offered_name_reaches_the_tool_and_the_trace_shows_its_own(tmp_path: Path):
    model = Scripted([("time__get_current_time", {"timezone": "UTC"})], "It is noon.")
    async with Harness(tmp_path / "runs", tmp_path / "ws", client=model, agent_sets=(DEMO,)) as h:
        out = await h.start(Agent(name="clock", model="m", tools=[Clock(), Note()]), "time?")
        trace = list(h.store.read_trace(out.state.run_id))
    assert out.state.status is Status.COMPLETED and out.state.answer == "It is noon."
    offered, _ = model.requests[0]
    assert "time__get_current_time" in offered and all(OPENAI.match(n) for n in offered), offered
    assert offered_name("files.write note") in offered
    # What the model is sent back names the call as it was offered; the transcript, its own.
    assert call_names(model.requests[1][1]) == ["time__get_current_time"]
    assert call_names(out.state.messages) == ["time.get_current_time"]
    assert out.state.messages[-2]["content"] == "12:00 UTC"
    assert [r["name"] for r in out.tool_runs] == ["time.get_current_time"]
    starts = [r for r in trace if r.get("kind") in ("tool_start", "tool_result")]
    assert [r["name"] for r in starts] == ["time.get_current_time"] * 2


async def test_a_call_by_the_tools_own_name_still_resolves(tmp_path: Path):
    """An old run's transcript names its calls ``server.tool``: those resolve, and are sent to
    the model under the offered name."""
    model = Scripted([("time.get_current_time", {})], [("time__get_current_time", {"timezone": "CET"})], "done")
    async with Harness(tmp_path / "runs", tmp_path / "ws", client=model, agent_sets=(DEMO,)) as h:
        out = await h.start(Agent(name="clock", model="m", tools=[Clock()]), "time?")
    assert out.state.status is Status.COMPLETED
    assert [m["content"] for m in out.state.messages if m["role"] == "tool"] == ["12:00 UTC", "12:00 CET"]
    assert call_names(out.state.messages) == ["time.get_current_time"] * 2
    assert call_names(model.requests[2][1]) == ["time__get_current_time"] * 2


async def test_an_unknown_tool_lists_the_offered_names(tmp_path: Path):
    model = Scripted([("time_get_current_time", {})], "sorry")
    async with Harness(tmp_path / "runs", tmp_path / "ws", client=model, agent_sets=(DEMO,)) as h:
        out = await h.start(Agent(name="clock", model="m", tools=[Clock()]), "time?")
    error = [m["content"] for m in out.state.messages if m["role"] == "tool"][0]
    assert error == "Error: unknown tool 'time_get_current_time'. Available tools: time__get_current_time."


async def test_an_approval_of_an_offered_name_is_bound_to_the_tool_and_its_arguments(tmp_path: Path):
    wire = offered_name("files.write note")
    model = Scripted([(wire, {"text": "hi"})], "noted")
    events: list[Any] = []
    async with Harness(tmp_path / "runs", tmp_path / "ws", client=model, sinks=[events.append], agent_sets=(DEMO,)) as h:
        out = await h.start(Agent(name="notes", model="m", tools=[Note()]), "note it")
        waiting = out.state.interruption
        assert out.state.status is Status.INTERRUPTED and isinstance(waiting, NeedsApproval)
        assert waiting.tool_name == "files.write note"
        assert waiting.why == (f"files.write note needs approval: its class declares needs_approval = True "
                               f"({__name__}.Note)")
        out = await h.approve(out.state.run_id, "fine")
    assert out.state.status is Status.COMPLETED
    assert out.state.messages[-2]["content"] == "Approved by the operator (fine). written"
    assert call_names(model.requests[1][1]) == [wire]
    decided = [e for e in events if e.kind == "approval_decision"]
    assert [e.tool for e in decided] == ["files.write note"]


# ---- why an MCP tool waits for approval -------------------------------------------------

async def test_an_untrusted_servers_tool_says_its_annotations_are_not_believed():
    (tool,) = catalog([(link("files"), [listed("list_files", read_only_hint=True)])], reserved=())
    assert tool.needs_approval and not tool.read_only
    assert tool.approval_reason() == (
        "the MCP server 'files' is not trusted, so its tools' annotations (read-only) are not believed; "
        "trust it with trust_annotations = true under [mcp.files] in the agent file to use them")
    (quiet,) = catalog([(link("my.files"), [listed("write")])], reserved=())
    assert quiet.approval_reason() == ("the MCP server 'my.files' is not trusted, so each of its tools counts as "
                                       "one that writes; this tool gives no annotations, so trusting it would not "
                                       "help")
    (kind,) = catalog([(link("f"), [listed("tidy", destructive_hint=False, idempotent_hint=True)])], reserved=())
    assert "annotations (not destructive, idempotent) are not believed" in kind.approval_reason()


async def test_a_trusted_servers_write_says_what_it_marks_and_a_builtin_write_says_it_writes():
    (tool,) = catalog([(link("files", trusted=True), [listed("remove", destructive_hint=True)])], reserved=())
    assert tool.needs_approval and tool.approval_reason() == "the MCP server 'files' marks it destructive"
    assert DeleteFile().approval_reason() == "it writes to the workspace"


async def test_the_runs_approval_reasons_untrusted_server_and_builtin(tmp_path: Path):
    (tool,) = catalog([(link("files"), [listed("list_notes", read_only_hint=True)])], reserved=())
    model = Scripted([("list_notes", {}), ("delete_file", {"path": "a.txt"})], "ok")
    (tmp_path / "ws").mkdir()
    agent = Agent(name="files", model="m", tools=[tool, DeleteFile()], workspace=tmp_path / "ws")
    async with Harness(tmp_path / "runs", tmp_path / "ws", client=model, agent_sets=(DEMO,)) as h:
        out = await h.start(agent, "list")
        waiting = out.state.interruption
        assert isinstance(waiting, NeedsApproval) and waiting.why == (
            "list_notes needs approval: the MCP server 'files' is not trusted, so its tools' annotations (read-only) "
            "are not believed; trust it with trust_annotations = true under [mcp.files] in the agent file to use "
            "them")
        out = await h.reject(out.state.run_id, "not now")
    waiting = out.state.interruption
    assert isinstance(waiting, NeedsApproval) and waiting.why == "delete_file needs approval: it writes to the workspace"
