"""Submitting: a run created in the PostgreSQL store and put on its agent's queue, for a
worker to take (``tether submit``, and the paused programs of :mod:`tether.integrations.on_workers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.vocab.state import RunState
from tether.workers.queue import enqueue
from tether.agents.sets import known_agents, set_of
from tether.harness import Harness, tether_home
from tether.store.spec import open_store
from dataclasses import dataclass, replace

if TYPE_CHECKING:
    from tether.agents.config import Config
    from tether.agents.sets import AgentSet

@dataclass(frozen=True)
class Submission:
    """A run to put on a queue (``tether submit``): the agent's name, its task (None: the
    agent's default), and the run's own options: its id, ``base_url`` for an agent set's
    agent, calls approved at once, the agent sets' workspace, a decision deadline policy
    (``--decision-deadline``, ``--on-deadline``), and the operator's name it records."""

    agent_name: str
    prompt: str | None = None
    run_id: str | None = None
    base_url: str | None = None
    auto_approve: list[str] | None = None
    workspace: Path | None = None
    deadline: dict[str, Any] | None = None
    operator_name: str | None = None


def submit(url: str, submission: Submission, *, config: Config | None = None,
           agent_sets: Sequence[AgentSet] = ()) -> tuple[RunState, str]:
    """Create a run of ``submission.agent_name`` (from the agent file, else one of
    ``agent_sets``: the CLI gives the demo's scenarios) in the store at ``url`` and put it on
    its agent's queue; returns the run and the queue. The agent is built here once, so that
    the run saves its reference (a worker rebuilds it)."""
    agent_name, base_url, workspace = submission.agent_name, submission.base_url, submission.workspace
    if config is not None and agent_name in config.names:
        agent = config.agent(agent_name)
        if base_url:
            raise ValueError("--base-url does not apply to --agent from the agent file: the file says where its model is")
    elif (agent_set := set_of(agent_sets, agent_name)) is not None:
        agent = agent_set.agent(agent_name, workspace or tether_home() / "workspace", base_url=base_url)
    else:
        known = ", ".join([*(config.names if config is not None else []), *known_agents(agent_sets)])
        raise ValueError(f"no agent {agent_name!r} (agents: {known})")
    store = open_store(url)
    try:
        harness = Harness(store=store, config=config, agent_sets=agent_sets, operator_name=submission.operator_name)
        policies = agent.policies
        if submission.auto_approve:
            policies = replace(policies, auto_approve=list(submission.auto_approve))
        if submission.deadline:  # --decision-deadline / --on-deadline
            policies = replace(policies, **submission.deadline)
        state = harness.create(agent, submission.prompt, run_id=submission.run_id, policies=policies)
        queue = enqueue(store, state)
    finally:
        store.close()
    return state, queue

