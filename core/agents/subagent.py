"""Subagents as tools: ``research`` runs a whole child run behind the tool interface.

The child has its own id, transcript, saved state and limits; it shares the parent's
cancellation signal (one Stop cancels the tree) and its spend is added to the
parent's cost. The parent reads a summary, not everything the child read.
"""

from __future__ import annotations

from typing import Any

from tether.vocab.cancel import RunCancelled
from tether.vocab.state import Cancelled, RunState, Status
from tether.agents.tools.base import Tool, ToolContext
from tether.agents.tool_errors import ToolError

CHILD_MAX_TURNS = 6
CHILD_BUDGET_USD = 0.05


class ResearchTool(Tool):
    name = "research"
    ref = "tether:research"
    description = (
        "Delegate a question about the workspace to a research subagent, which reads files "
        "on its own and returns a short summary."
    )
    parameters = {
        "type": "object",
        "properties": {"question": {"type": "string", "description": "What to find out."}},
        "required": ["question"],
        "additionalProperties": False,
    }
    read_only = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        spawn = ctx.spawn
        if spawn is None:
            raise ToolError("subagents are not available in this run")
        child: RunState = await spawn(args["question"])
        ctx.child_cost_usd = child.cost_usd
        ctx.child_run_id = child.run_id
        if isinstance(child.interruption, Cancelled):
            ctx.partial = f"subagent {child.run_id} stopped after {child.turns} turns"
            raise RunCancelled(child.interruption.reason)
        if child.status is Status.COMPLETED:
            return child.answer or ""
        return (f"The research subagent {child.run_id} stopped without an answer "
                f"({child.status.value} after {child.turns} turns"
                + (f": {child.error}" if child.error else "") + ").")


def child_limits_budget(parent: RunState) -> float:
    """The child's budget: its default, never more than the parent has left."""
    budget = CHILD_BUDGET_USD
    if parent.limits.budget_usd is not None:
        budget = min(budget, max(0.0, parent.limits.budget_usd - parent.cost_usd))
    return budget
