"""What the console offers to run: the agents of the agent file, a model at ``--base-url``,
or the demo scenarios, as the New run dialog lists them and ``tether console`` checks them."""

from __future__ import annotations

from pathlib import Path

from tether.agents.config import Config, ConfigError
from tether.demo import agents as demo
from tether.harness import ADHOC_AGENT
from tether.tui.components.dialogs import AgentChoice


def scenario_choices() -> dict[str, str]:
    """Scenario name -> description, without the internal ``*_child`` scripts."""
    return demo.scenarios()


def _where(base_url: str | None) -> str:
    return base_url or "the scripted provider"


def agent_choices(config: Config | None, *, base_url: str | None = None,
                  workspace: Path | None = None) -> list[AgentChoice]:
    """What the New run dialog offers: the agents of the agent file (built now, so one that
    cannot be is listed with the reason), then, with ``base_url``, a model at that endpoint,
    else the demo scenarios."""
    choices: list[AgentChoice] = []
    for name in config.names if config is not None else ():
        try:
            agent = config.agent(name)  # type: ignore[union-attr]
        except ConfigError as exc:
            choices.append(AgentChoice("agent", name, "cannot be built (choose it to see why)",
                                       problem=f"agent {name} cannot be started: {exc}"))
            continue
        if agent.acp is not None:  # its own process brings its model and tools
            command = " ".join([Path(agent.acp.argv[0]).name, *agent.acp.argv[1:]])
            where = agent.workspace if agent.workspace is not None else Path.cwd()
            task = f" · its task: {agent.prompt}" if agent.prompt else " · no task of its own"
            choices.append(AgentChoice(
                "agent", name, f"ACP agent: {command}",
                detail=f"{name} ({config.path.name}): an ACP agent, with its own model and tools: {command} "  # type: ignore[union-attr]
                       f"· in {where}{task}",
                model=agent.model, prompt=agent.prompt, limits=agent.limits, policies=agent.policies))
            continue
        tools = ", ".join(t.name for t in agent.tool_list) or "no tools"
        if agent.mcp_servers:
            tools += "; MCP: " + ", ".join(s.name for s in agent.mcp_servers)
        task = f" · its task: {agent.prompt}" if agent.prompt else " · no task of its own"
        choices.append(AgentChoice(
            "agent", name, f"{agent.model} at {_where(agent.base_url)}",
            detail=f"{name} ({config.path.name}): {agent.model} at {_where(agent.base_url)} "  # type: ignore[union-attr]
                   f"· tools: {tools}{task}",
            model=agent.model, prompt=agent.prompt, limits=agent.limits, policies=agent.policies))
    if base_url:
        where = workspace if workspace is not None else Path.cwd()
        choices.append(AgentChoice(
            "model", ADHOC_AGENT, f"a model at {base_url} (type its name below)",
            detail=f"the model you name, at {base_url}, with list_files, read_file and delete_file on {where}"))
        return choices
    for name, description in scenario_choices().items():
        task = demo.SCENARIO_TASKS.get(name)
        choices.append(AgentChoice(
            "demo", name, f"demo · {description}",
            detail=f"demo scenario {name}: {description}" + (f" · its task: {task}" if task else ""),
            model=name, prompt=task))
    return choices
