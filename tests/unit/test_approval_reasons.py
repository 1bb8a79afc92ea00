"""Why a call waits for approval, as the people deciding read it ("<tool> needs approval:
…"): said from what made it wait (the tool's own ``needs_approval=True``, a standing rule,
an untrusted MCP server, what a trusted server's annotations say, a built-in write), and
never "it writes to the workspace" for a tool that does not (issue 37, item 22).

Each case goes through a run of Tether's loop, so what is asserted is the reason the
console, ``tether show`` and the web page show for the waiting call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tether
from tether import Agent
from tether.agents.mcp.catalog import catalog
from tether.agents.tools.base import Tool, ToolContext
from tether.agents.tools.builtin import DeleteFile, WriteFile
from tether.approvals import Rule
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.vocab.state import NeedsApproval

from tests.unit.test_mcp_names import Scripted, link, listed


@tether.tool(needs_approval=True)
def refund(order: int) -> str:
    """Refund an order.

    Args:
        order: The order's number.
    """
    return f"refunded {order}"


@tether.tool(read_only=True)
def lookup(order: int) -> str:
    """Look an order up.

    Args:
        order: The order's number.
    """
    return f"order {order}: shipped"


class Publish(Tool):
    """A tool of the user's own class: it reads nothing of the workspace and writes none of it."""

    name = "publish"
    description = "Publish the release notes."
    parameters = {"type": "object", "properties": {}}
    needs_approval = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        return "published"


async def why_it_waits(tmp_path: Path, tool: Tool, args: dict[str, Any], *, rules: tuple[Rule, ...] = ()) -> str:
    """The reason the run's call of ``tool`` waits with."""
    (tmp_path / "ws").mkdir(exist_ok=True)
    model = Scripted([(tool.name, args)], "done")
    agent = Agent(name="shop", model="m", tools=[tool], workspace=tmp_path / "ws")
    async with Harness(tmp_path / "runs", tmp_path / "ws", client=model, agent_sets=(DEMO,)) as h:
        for rule in rules:
            h.store.rule_add(rule)
        out = await h.start(agent, "go")
    waiting = out.state.interruption
    assert isinstance(waiting, NeedsApproval), out.state.status
    return waiting.why


async def test_a_function_tool_says_its_definition_asks_and_where_it_is(tmp_path: Path) -> None:
    why = await why_it_waits(tmp_path, refund, {"order": 7})
    assert why == f"refund needs approval: its definition says needs_approval=True ({__name__}:refund)"


async def test_a_tool_class_says_its_class_declares_it(tmp_path: Path) -> None:
    why = await why_it_waits(tmp_path, Publish(), {})
    assert why == f"publish needs approval: its class declares needs_approval = True ({__name__}.Publish)"


async def test_a_rule_that_asks_is_cited_for_a_tool_that_needs_no_approval(tmp_path: Path) -> None:
    ask = Rule("ask", "lookup", "orders are private", "alice")
    why = await why_it_waits(tmp_path, lookup, {"order": 7}, rules=(ask,))
    assert why.startswith("lookup needs approval: rule R1 (orders are private; alice, ") and why.endswith(") asks for it")


async def test_a_builtin_write_says_it_writes_to_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("a\n")
    assert await why_it_waits(tmp_path, DeleteFile(), {"path": "a.txt"}) == \
        "delete_file needs approval: it writes to the workspace"
    assert WriteFile().approval_reason() == "it writes to the workspace"


@pytest.mark.parametrize(("hints", "reason"), [
    ({"destructive_hint": True}, "the MCP server 'files' marks it destructive"),
    ({}, "the MCP server 'files' gives it no annotations, so it counts as destructive (the MCP default)"),
    ({"idempotent_hint": True}, "the MCP server 'files' marks it neither read-only nor not destructive (idempotent), "
                                "so it counts as destructive (the MCP default)"),
])
async def test_a_trusted_servers_tool_says_what_its_annotations_say(tmp_path: Path, hints: dict[str, Any],
                                                                    reason: str) -> None:
    (tool,) = catalog([(link("files", trusted=True), [listed("remove", **hints)])], reserved=())
    assert tool.needs_approval
    assert await why_it_waits(tmp_path, tool, {}) == f"remove needs approval: {reason}"


async def test_an_untrusted_servers_tool_says_the_server_is_not_trusted(tmp_path: Path) -> None:
    (tool,) = catalog([(link("files"), [listed("remove", destructive_hint=False)])], reserved=())
    why = await why_it_waits(tmp_path, tool, {})
    assert why.startswith("remove needs approval: the MCP server 'files' is not trusted, so its tools' "
                          "annotations (not destructive) are not believed")
