"""The adapters hand the run's workspace to the agent's tools (``Supervision(workspace=,
isolation=)``): pydantic-ai as ``deps``, the OpenAI Agents SDK as ``context``. The tool writes
in the run's own worktree; the run's diff shows it; the repository is untouched. Against the
scripted provider's ``ticket`` scenario (the model calls ``close_ticket``)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from agents import Agent as SdkAgent, OpenAIChatCompletionsModel, RunConfig, RunContextWrapper, function_tool
from openai import AsyncOpenAI
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.integrations import Supervision, openai_agents, pydantic_ai
from tether.vocab.state import Status
from tether.workspaces.changes import changes
from tests.integrations.programs import Recording
from tests.support import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "tickets.txt").write_text("42 open\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    return repo


@dataclass
class Desk:
    """A program's own context for its tools, with a slot for the workspace."""

    user: str
    workspace: Path | None = None


def closed_in(folder: Path, ticket: int, reason: str) -> str:
    (folder / "tickets.txt").write_text(f"{ticket} closed: {reason}\n")
    return f"Ticket {ticket} closed: {reason}."


async def checked(harness: Harness, run_id: str, repo: Path, tmp_path: Path) -> None:
    state = harness.store.load(run_id)
    assert state.status is Status.COMPLETED, state.error
    ws = state.run_workspace
    assert ws is not None and ws.path == str((tmp_path / "workspaces").resolve() / run_id)
    assert [(f.path, f.status) for f in (await changes(ws)).files] == [("tickets.txt", "changed")]
    assert (repo / "tickets.txt").read_text() == "42 open\n" and git(repo, "status", "--porcelain") == ""


async def test_pydantic_ai_tools_get_the_runs_workspace_as_deps(tmp_path: Path, repo: Path,
                                                                provider: Recording) -> None:

    model = OpenAIChatModel("ticket", provider=OpenAIProvider(base_url=provider.url, api_key="unused"))
    agent = Agent(model, deps_type=Path, name="support-bot")

    @agent.tool
    def close_ticket(ctx: RunContext[Path], ticket: int, reason: str) -> str:
        """Close a support ticket."""
        return closed_in(ctx.deps, ticket, reason)

    async with Harness(tmp_path / "runs", agent_sets=(DEMO,), workspaces_dir=tmp_path / "workspaces") as harness:
        done = await pydantic_ai.run(harness, agent, "Close ticket 42: a duplicate of 17.",
                                     supervision=Supervision(workspace=repo, isolation="worktree"))
        await checked(harness, done.run_id, repo, tmp_path)


async def test_openai_agents_tools_get_the_runs_workspace_in_their_context(tmp_path: Path, repo: Path,
                                                                           provider: Recording) -> None:

    @function_tool
    def close_ticket(ctx: RunContextWrapper[Desk], ticket: int, reason: str) -> str:
        """Close a support ticket."""
        assert ctx.context.user == "dana"
        assert ctx.context.workspace is not None
        return closed_in(ctx.context.workspace, ticket, reason)

    client = AsyncOpenAI(base_url=provider.url, api_key="unused")
    agent = SdkAgent(name="support-bot", instructions="Close duplicates.", tools=[close_ticket],
                  model=OpenAIChatCompletionsModel(model="ticket", openai_client=client))
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,), workspaces_dir=tmp_path / "workspaces") as harness:
        done = await openai_agents.run(harness, agent, "Close ticket 42: a duplicate of 17.", context=Desk("dana"),
                                       supervision=Supervision(workspace=repo, isolation="worktree"),
                                       run_config=RunConfig(tracing_disabled=True))
        await checked(harness, done.run_id, repo, tmp_path)
