"""A set of named agents a harness is given, and how the harness asks its sets.

The harness knows agents three ways: the one it was handed, an agent file's, and the agents
of the sets it was given (:class:`AgentSet`). A set is a few named agents made on demand
(the demo's scripted scenarios are one: :data:`tether.demo.agents.DEMO`), with what the
harness cannot know of them itself: the model endpoint its agents talk to when they name
none, which model a subagent of theirs uses, and how a run saved with one of them is
rebuilt (a run made before agents existed names only its model). The harness imports no
set: whoever builds it (the CLI, a test, the lab) passes the sets it wants.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tether.agents.agent import Agent
    from tether.agents.tools.base import Tool
    from tether.models.base import ChatModel
    from tether.models.tokens import TokenCounter
    from tether.vocab.state import RunState


class AgentSet(Protocol):
    """Named agents, made on demand for a workspace, and what the harness asks of them."""

    source: str
    """What a run made with one of these agents saves as its agent's source (``demo``)."""

    def agents(self) -> dict[str, str]:
        """Agent name -> what it does, in the order they are offered."""
        ...

    def task(self, name: str) -> str | None:
        """The agent ``name``'s own task, None when it has none: what a console offers to run
        before the agent is made (making it may lay out its workspace)."""
        ...

    def tools(self) -> list[Tool]:
        """Every tool the set's agents are offered (what a standing rule may name)."""
        ...

    def agent(self, name: str, workspace: Path | None = None, *, base_url: str | None = None) -> Agent:
        """The agent ``name`` on ``workspace`` (the set's own folder when None), at ``base_url``
        when given; ValueError in words for a name the set does not have."""
        ...

    def rebuild(self, state: RunState) -> Agent | None:
        """The agent of a run saved with one of these agents (``state.agent`` saved with
        :attr:`source`), or None when it was made with another. (A run made before agents
        existed names only its model: the harness finds its set by that name.)"""
        ...

    def model(self, counter: TokenCounter, *, latency_ms: float = 0.0, fail: str | None = None) -> ChatModel | None:
        """The endpoint the set's agents talk to when they name none (an in-process scripted
        provider), or None when they always name theirs. ``latency_ms`` and ``fail`` shape it."""
        ...

    def child_model(self, model: str) -> str | None:
        """The model a subagent of an agent on ``model`` runs on, when it is not ``model`` itself."""
        ...


def known_agents(sets: Sequence[AgentSet]) -> dict[str, str]:
    """Every agent of ``sets``: name -> what it does (the first set naming one wins)."""
    out: dict[str, str] = {}
    for agent_set in sets:
        for name, words in agent_set.agents().items():
            out.setdefault(name, words)
    return out


def set_of(sets: Sequence[AgentSet], name: str) -> AgentSet | None:
    """The first of ``sets`` that has an agent ``name``."""
    return next((s for s in sets if name in s.agents()), None)
