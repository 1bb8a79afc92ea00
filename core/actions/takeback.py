"""Taking a run back, the same from the CLI (``tether rewind``, ``tether fork``) and the
console's timeline: a rewind puts the run's workspace and transcript back to a checkpoint,
undoably (:mod:`tether.workspaces.rewinding`); a fork makes a new run from a checkpoint,
the original only read (:mod:`tether.workspaces.forking`). A refusal is a
:class:`~tether.vocab.state.StateError` in words, a git failure among them, and nothing was changed.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tether.run.controls import add_follow_up
from tether.store.protocol import Store, call
from tether.vocab import faultpoints
from tether.vocab.state import Pricing, RunState, StateError, new_run_id
from tether.workspaces.forking import fork as forked
from tether.workspaces.git import GitError
from tether.workspaces.rewinding import rewind_run

if TYPE_CHECKING:
    from tether.agents.agent import Agent


async def rewind(store: Store, run_id: str, *, to: int | None, by: str) -> tuple[RunState, list[str]]:
    """Rewind the run to checkpoint ``to`` (None: undo its last rewind); the run as it then is,
    and what was done, in words."""
    try:
        return await rewind_run(store, run_id, to=to, by=by)
    except GitError as exc:
        raise StateError(f"run {run_id}: {exc}") from None


async def fork(store: Store, run_id: str, at: int, workspaces_dir: Path, *, new_id: str | None = None,
               agent: Agent | None = None, message: str | None = None) -> tuple[RunState, RunState]:
    """A new run from checkpoint ``at`` of ``run_id``, saved on the store: the new run and the
    original. ``agent``: another agent (or model) goes on from the same prefix, of the same
    kind (ACP or Tether's); ``message``: a follow-up the new run starts with, when resumed.
    An ACP agent's run forks the agent's own session too, where the agent can."""
    origin = await call(store, store.load, run_id)
    prefix = (origin.agent.name if origin.agent else origin.model).replace("/", "_")[:24]
    new_id = new_id or new_run_id(prefix)
    if await call(store, store.exists, new_id):
        raise StateError(f"run {new_id} exists already: tether fork --run-id takes a new id; nothing was made")
    if agent is not None and agent.acp is not None and not origin.of_acp_agent:
        raise StateError(f"--agent {agent.name} speaks ACP: a fork of a Tether run goes on with a Tether agent")
    if agent is not None and agent.acp is None and origin.of_acp_agent:
        raise StateError(f"--agent {agent.name} is a Tether agent: a fork of an ACP agent's run goes on with an "
                         "ACP agent (its transcript is the agent's own)")
    try:
        sessions = [r.get("session_id") for r in await call(store, lambda: list(store.read_trace(run_id)))
                    if r.get("kind") == "agent_session"] if origin.of_acp_agent and agent is None else []
        state = await forked(origin, at, new_id, workspaces_dir,
                             session=str(sessions[-1]) if sessions and sessions[-1] else None)
    except GitError as exc:
        raise StateError(f"run {run_id}: {exc}") from None
    if agent is not None:  # another agent, or model, goes on from the same prefix
        state.agent, state.model = agent.ref(), agent.model
        state.base_url = agent.base_url or state.base_url
        state.pricing = replace(agent.pricing) if agent.pricing else Pricing(assumed=True)
    if message:
        status, interruption = state.status, state.interruption
        add_follow_up(state, message)
        state.status, state.interruption = status, interruption  # it waits, interrupted, for its resume
    faultpoints.boundary("fork_prepared")  # a crash here: no run made (a copy's files left for the next fork)
    await call(store, store.create, state)
    return state, origin


def fork_words(state: RunState, origin: RunState) -> str:
    """How the new run goes on from the fork, in words."""
    if origin.of_acp_agent:
        told = "a new session of the agent is told in words what was done up to there"
        if (state.forked_from or {}).get("session"):
            told = "the agent forks its session (session/fork) if it advertises that, else " + told
        return told
    taken = state.forked_from["messages"] if state.forked_from else len(state.messages)
    return f"its transcript is the first {taken} messages of {origin.run_id}'s"
