"""Tether: run your agents so that every run ends in a known way, for a known reason,
at a known cost, with nothing lost, and supervise them from a terminal console.

```python
import tether

@tether.tool(read_only=True)
def get_ticket(ticket_id: int) -> str:
    "The ticket's title and body."
    ...

agent = tether.Agent("triage", model="qwen2.5-7b-instruct", base_url="http://127.0.0.1:8080/v1",
                     tools=[get_ticket], limits=tether.Limits(max_turns=10, budget_usd=0.50))
async with tether.Harness() as harness:
    outcome = await harness.start(agent, "Triage ticket 42.")
```

The names below are the public surface. They are imported when first used, so that
``import tether`` (and every ``tether`` command) does not pay for the MCP SDK or
pydantic until an agent needs them. The harness core never imports the console.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.lazy import lazy_names

__all__ = [
    # agents and running them
    "Agent", "AgentError", "Harness", "Outcome", "load_config", "ConfigError",
    # loops that are not Tether's, reporting into runs (Harness.track)
    "TrackedRun", "Approval", "RunEnded", "Stopped", "LimitReached",
    # models
    "ChatModel", "ModelReply", "ProviderError",
    # tools
    "tool", "Tool", "ToolContext", "ToolError", "PermissionDenied", "MCPServer",
    # the run contract
    "RunState", "Status", "Limits", "Policies", "Pricing", "StateError", "CancelSignal",
    "Interruption", "NeedsApproval", "MaxTurns", "MaxBudget", "Cancelled", "StopConditionMet",
    # events
    "Event", "EventSink", "RunStarted", "Turn", "ProviderRetry", "ToolStart", "ToolProgress", "ToolResult",
    "ApprovalRequired", "ApprovalDecision", "RunStopped", "TextDelta",
]

_WHERE = {
    "Agent": "tether.agents.agent", "AgentError": "tether.agents.agent",
    "Harness": "tether.harness", "Outcome": "tether.harness",
    **dict.fromkeys(["TrackedRun", "Approval", "RunEnded", "Stopped", "LimitReached"], "tether.run.tracked"),
    "load_config": "tether.agents.config", "ConfigError": "tether.agents.config",
    "tool": "tether.agents.tools.function",
    **dict.fromkeys(["ChatModel", "ModelReply", "ProviderError"], "tether.models.base"),
    "Tool": "tether.agents.tools.base", "ToolContext": "tether.agents.tools.base",
    "ToolError": "tether.agents.tool_errors", "PermissionDenied": "tether.agents.tool_errors",
    "MCPServer": "tether.agents.mcp.server",
    "CancelSignal": "tether.vocab.cancel",
    **dict.fromkeys(["RunState", "Status", "Limits", "Policies", "Pricing", "StateError", "Interruption",
                     "NeedsApproval", "MaxTurns", "MaxBudget", "Cancelled", "StopConditionMet"], "tether.vocab.state"),
    **dict.fromkeys(["Event", "EventSink", "RunStarted", "Turn", "ProviderRetry", "ToolStart", "ToolProgress",
                     "ToolResult", "ApprovalRequired", "ApprovalDecision", "RunStopped", "TextDelta"],
                    "tether.vocab.events"),

}


__getattr__, __dir__ = lazy_names(globals(), _WHERE)


if TYPE_CHECKING:
    from tether.agents.agent import Agent, AgentError
    from tether.vocab.cancel import CancelSignal
    from tether.agents.config import ConfigError, load_config
    from tether.models.base import ChatModel, ModelReply, ProviderError
    from tether.vocab.events import (
        ApprovalDecision,
        ApprovalRequired,
        Event,
        EventSink,
        ProviderRetry,
        RunStarted,
        RunStopped,
        TextDelta,
        ToolProgress,
        ToolResult,
        ToolStart,
        Turn,
    )
    from tether.harness import Harness, Outcome
    from tether.agents.mcp.server import MCPServer
    from tether.vocab.state import (
        Cancelled,
        Interruption,
        Limits,
        MaxBudget,
        MaxTurns,
        NeedsApproval,
        Policies,
        Pricing,
        RunState,
        StateError,
        Status,
        StopConditionMet,
    )
    from tether.agents.tools.base import Tool, ToolContext
    from tether.agents.tool_errors import PermissionDenied, ToolError
    from tether.agents.tools.function import tool
    from tether.run.tracked import Approval, LimitReached, RunEnded, Stopped, TrackedRun
