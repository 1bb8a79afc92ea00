"""What the console offers to run: the agents of the agent file, a model at ``--base-url``,
or the agents of the sets it was given (the demo scenarios, which the CLI gives), as the New
run dialog lists them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rich.text import Text

from tether.agents.config import Config, ConfigError
from tether.agents.sets import AgentSet
from tether.harness import ADHOC_AGENT
from tether.tui.state.text import clean
from tether.vocab.state import Limits, Policies

ChoiceKind = Literal["agent", "demo", "model"]


@dataclass(frozen=True)
class AgentChoice:
    """One entry of the New run dialog's list: an agent of the agent file (``agent``), a
    demo scenario (``demo``), or, with ``--base-url``, the model typed in the dialog at
    that endpoint (``model``). ``problem`` says why it cannot be started (an agent that
    cannot be built), in words shown when it is chosen."""

    kind: ChoiceKind
    name: str
    summary: str = ""
    detail: str = ""
    model: str = ""
    prompt: str | None = None
    limits: Limits = field(default_factory=Limits)
    policies: Policies = field(default_factory=Policies)
    problem: str | None = None
    isolation: str = "none"
    """The agent's own (its ``isolation``): where each of its runs works."""
    acp: bool = False
    """An ACP agent: New run asks it for its sessions, modes and models."""
    acp_mode: str | None = None
    """Its agent file's ``mode``, if any."""
    acp_model: str | None = None
    """Its agent file's ``model``, if any."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)

    def label(self) -> Text:
        """Its line in the list: the name in bold, then what it is (a model: just that)."""
        out = Text("" if self.kind == "model" else f"{clean(self.name)}  ", style="bold")
        out.append(clean(self.summary), style="dim" if self.problem is None else "red")
        return out


def _where(base_url: str | None) -> str:
    return base_url or "the scripted provider"


def agent_choices(config: Config | None, agent_sets: Sequence[AgentSet] = (), *, base_url: str | None = None,
                  workspace: Path | None = None) -> list[AgentChoice]:
    """What the New run dialog offers: the agents of the agent file (built now, so one that
    cannot be is listed with the reason), then, with ``base_url``, a model at that endpoint,
    else the agents of ``agent_sets`` (listed as their ``source`` says: ``demo``), not made
    until one is started."""
    choices: list[AgentChoice] = []
    for name in config.names if config is not None else ():
        try:
            agent = config.agent(name)  # type: ignore[union-attr]
        except ConfigError as exc:
            choices.append(AgentChoice("agent", name, "cannot be built (choose it to see why)",
                                       problem=f"agent {name} cannot be started: {exc}"))
            continue
        task = f" · its task: {agent.prompt}" if agent.prompt else " · no task of its own"
        if agent.acp is not None:  # its own process brings its model and tools
            command = " ".join([Path(agent.acp.argv[0]).name, *agent.acp.argv[1:]])
            where = agent.workspace if agent.workspace is not None else Path.cwd()
            choices.append(AgentChoice(
                "agent", name, f"ACP agent: {command}",
                detail=f"{name} ({config.path.name}): an ACP agent, with its own model and tools: {command} "  # type: ignore[union-attr]
                       f"· in {where}{task}",
                model=agent.model, prompt=agent.prompt, limits=agent.limits, policies=agent.policies, acp=True,
                acp_mode=agent.acp.mode, acp_model=agent.acp.model))
            continue
        tools = ", ".join(t.name for t in agent.tool_list) or "no tools"
        if agent.mcp_servers:
            tools += "; MCP: " + ", ".join(s.name for s in agent.mcp_servers)
        choices.append(AgentChoice(
            "agent", name, f"{agent.model} at {_where(agent.base_url)}",
            detail=f"{name} ({config.path.name}): {agent.model} at {_where(agent.base_url)} "  # type: ignore[union-attr]
                   f"· tools: {tools}{task}",
            model=agent.model, prompt=agent.prompt, limits=agent.limits, policies=agent.policies,
            isolation=agent.isolation.kind))
    if base_url:
        where = workspace if workspace is not None else Path.cwd()
        choices.append(AgentChoice(
            "model", ADHOC_AGENT, f"a model at {base_url} (type its name below)",
            detail=f"the model you name, at {base_url}, with list_files, read_file and delete_file on {where}"))
        return choices
    offered: set[str] = set()
    for agent_set in agent_sets:
        for name, description in agent_set.agents().items():
            if name in offered:  # the first set naming it wins, as for the harness (set_of)
                continue
            offered.add(name)
            task = agent_set.task(name)
            choices.append(AgentChoice(
                "demo", name, f"{agent_set.source} · {description}",
                detail=f"{agent_set.source} scenario {name}: {description}" + (f" · its task: {task}" if task else ""),
                model=name, prompt=task))
    return choices
