"""The demo: the scripted provider's scenarios as one set of agents, :data:`DEMO`.

Each scenario is an agent whose model is the scenario's name, at the embedded scripted
provider, with the sample workspace and the demo's tools (the file tools, a research
subagent, and ``scan_archive``, a deliberately slow stand-in that exists only here).
It is what ``make run`` and the lab use when nothing else is configured: the CLI gives the
harness this set (:class:`tether.agents.sets.AgentSet`), as a program may give it its own;
the harness knows nothing special about it, and the sample files are laid out for it alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import httpx

from tether.agents.agent import DEFAULT_INSTRUCTIONS, Agent
from tether.vocab.state import Pricing
from tether.vocab.cancel import RunCancelled
from tether.demo.provider import SCENARIOS
from tether.agents.tools.base import Tool, ToolContext
from tether.agents.sample import ensure_sample
from tether.agents.agent import as_tool
from tether.demo.provider import FaultPlan, create_app
from tether.store.private import default_home
from tether.models.client import ModelClient

if TYPE_CHECKING:
    from tether.models.base import ChatModel
    from tether.models.tokens import TokenCounter
    from tether.vocab.state import RunState

EMBEDDED_BASE_URL = "http://tether.embedded/v1"
"""The address the in-process scripted provider answers at (no socket: an ASGI transport)."""

SCENARIO_TASKS = {
    "plan": "Which file mentions a timeout?",
    "runaway": "Keep an eye on the workspace.",
    "recover": "What does timeout.log say?",
    "destructive": "Free some space in the workspace.",
    "repeat": "What does notes.txt say?",
    "repeat_baseline": "What does notes.txt say?",
    "repeat_write": "Delete access.log.",
    "forbidden": "What is in secrets.env?",
    "slow": "How many entries are in the archive?",
    "research": "Which file mentions a timeout?",
}
TOOLS = ("tether:list_files", "tether:read_file", "tether:delete_file", "tether.demo:scan_archive",
         "tether:research")


_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


class ScanArchive(Tool):
    """Deliberately slow, to show progress and cancellation.

    It sleeps in batches (not one timer per entry) on the run's signal, so a Stop wakes
    it at once; before re-raising it sets ``ctx.partial`` to saying how far it got.
    """

    name = "scan_archive"
    ref = "tether.demo:scan_archive"
    description = "Scan the log archive for old archives. Slow: takes a few seconds."
    parameters = _NO_ARGS
    total_entries: ClassVar[int] = 1200
    seconds: ClassVar[float] = 3.0
    report_every: ClassVar[int] = 200
    batch: ClassVar[int] = 10

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        total = self.total_entries
        per_entry = self.seconds / total
        scanned = 0
        try:
            while scanned < total:
                step = min(self.batch, total - scanned)
                await ctx.signal.sleep(step * per_entry)
                before, scanned = scanned, scanned + step
                every = self.report_every
                for mark in range(before // every + 1, scanned // every + 1):  # each report point passed
                    ctx.progress(f"scanned {mark * every} of {total} entries")
        except RunCancelled:
            ctx.partial = f"{scanned} of {total} entries scanned"
            raise
        return f"scanned {total} of {total} entries; 3 archives older than 30 days"


scan_archive = ScanArchive()


def tools() -> list[Tool]:
    """The demo's tools, as every demo agent is offered them."""
    return [as_tool(ref) for ref in TOOLS]


FOR_PROGRAMS = frozenset({"ticket"})
"""Scripts for programs on other frameworks (their own tools, not the demo's): no demo agent."""


def scenarios() -> dict[str, str]:
    """Scenario name -> what it shows, without the internal ``*_child`` scripts and the
    scripts of other frameworks' programs."""
    return {name: s.description for name, s in SCENARIOS.items() if is_scenario(name)}


def is_scenario(name: str) -> bool:
    return name in SCENARIOS and not name.endswith("_child") and name not in FOR_PROGRAMS


def default_workspace() -> Path:
    return default_home() / "workspace"


def agent(scenario: str, workspace: Path | str | None = None, *, base_url: str | None = None) -> Agent:
    """The demo agent for ``scenario``: the sample workspace (laid out if the folder is
    missing or empty), at the embedded provider unless ``base_url`` serves it elsewhere."""
    if not is_scenario(scenario):
        raise ValueError(f"unknown scenario {scenario!r}; the scripted provider knows: "
                         + ", ".join(scenarios()))
    root = ensure_sample(Path(workspace) if workspace is not None else default_workspace()).root
    return Agent(
        name=scenario,
        model=scenario,
        base_url=base_url,
        instructions=DEFAULT_INSTRUCTIONS,
        tools=list(TOOLS),
        workspace=root,
        prompt=SCENARIO_TASKS.get(scenario),
        pricing=Pricing(),  # the documented demo price, not an assumption
        source="demo",
    )


class DemoAgents:
    """The scenarios as an agent set (:class:`tether.agents.sets.AgentSet`), at the scripted
    provider in this process unless the harness names an endpoint."""

    source = "demo"

    def agents(self) -> dict[str, str]:
        return scenarios()

    def task(self, name: str) -> str | None:
        return SCENARIO_TASKS.get(name)

    def tools(self) -> list[Tool]:
        return tools()

    def agent(self, name: str, workspace: Path | None = None, *, base_url: str | None = None) -> Agent:
        return agent(name, workspace, base_url=base_url)

    def rebuild(self, state: RunState) -> Agent | None:
        ref = state.agent
        if ref is None or ref.source != self.source:
            return None
        if state.workspace:
            ensure_sample(Path(state.workspace))  # the demo's folder, laid out again if it was emptied
        return Agent.from_spec(ref.name, ref.spec, source=ref.source)

    def model(self, counter: TokenCounter, *, latency_ms: float = 0.0, fail: str | None = None) -> ChatModel:
        # lazy: httpx loads only for a model client (tests/processes/test_cold_start.py: stop and runs load none)

        app = create_app(latency_ms=latency_ms, faults=FaultPlan.parse(fail) if fail else None, counter=counter)
        return ModelClient(EMBEDDED_BASE_URL, transport=httpx.ASGITransport(app=app), counter=counter)

    def child_model(self, model: str) -> str | None:
        # A scripted scenario X runs its subagents on X_child; a real model on itself.
        child = f"{model}_child"
        return child if child in SCENARIOS else None


DEMO = DemoAgents()
"""The demo's agent set, as the CLI gives it to the harness."""
