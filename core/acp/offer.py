"""What an ACP agent offers a run before the run exists: its own earlier sessions in the run's
workspace (``session/list``), how a picked one goes on, and its session modes and models.

New run (the console) and ``tether agents sessions NAME`` ask it (:func:`agent_offer`): one
start of the agent, ``initialize``, ``session/list`` in the workspace where the agent advertises
``sessionCapabilities.list``, and (for New run's mode and model choices) a ``session/new`` in an
empty temporary folder, so that the workspace's own list of sessions is not changed by asking.
A session picked from the list is adopted by the run (:func:`tether.acp.sessions.adopt`):
``session/resume`` where the agent advertises it, else ``session/load``.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tether.acp.config import model_option
from tether.acp.errors import AcpError
from tether.acp.run import session_for
from tether.agents.agent import Agent

__all__ = ["AgentOffer", "agent_offer", "adopts_by"]


@dataclass(frozen=True)
class AgentOffer:
    """An ACP agent's answer to New run's questions."""

    agent: str
    """Its name and version, as ``initialize`` said (``fake-agent 1.0.0``)."""
    workspace: str
    lists: bool = False
    """Whether it advertises ``sessionCapabilities.list``."""
    sessions: tuple[dict[str, Any], ...] = ()
    """Its sessions in the workspace, as it lists them: ``{sessionId, cwd, title, updatedAt}``."""
    adopts: str = ""
    """How a listed session goes on: ``session/resume``, ``session/load``, or "" (it cannot)."""
    modes: tuple[dict[str, str], ...] = ()
    """Its session modes, each ``{id, name}``."""
    mode: str | None = None
    """The mode a new session starts in."""
    models: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """Its model option's values, each ``(value, name)``; empty where it lists no model option."""
    model: str | None = None
    """The model a new session starts with."""
    problem: str | None = None
    """Why its modes and models are not known (its ``session/new`` failed), in words."""


def adopts_by(capabilities: dict[str, Any], load_session: bool) -> str:
    """How an agent goes on in an earlier session: ``session/resume``, else ``session/load``, else ""."""
    caps = capabilities.get("sessionCapabilities") or {}
    if isinstance(caps, dict) and caps.get("resume") is not None:
        return "session/resume"
    return "session/load" if load_session else ""


async def agent_offer(agent: Agent, *, choices: bool = True) -> AgentOffer:
    """Start ``agent`` (its command, environment and sandbox as a run of it gets them, in its
    workspace), ``initialize`` it, list its sessions where it can, and with ``choices`` ask a
    new session's modes and models; then end it. AgentStartError (an AcpError) in words for an
    agent that does not start; AgentError for an agent file entry that cannot be run."""
    session = await asyncio.to_thread(session_for, agent)  # off the loop: its sandbox's folders are made
    try:
        info = await session.start()
        listed = await session.list_sessions() if session.session_capability("list") else []
        offer = AgentOffer(f"{info.name} {info.version}", str(session.workspace), session.session_capability("list"),
                           tuple(listed), adopts_by(info.capabilities, info.load_session))
        if not choices:
            return offer
        folder = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="tether-offer-"))
        try:
            modes, mode, options = await session.session_choices(folder)
        except AcpError as exc:
            return replace(offer, problem=f"its session/new failed: {exc}")
        finally:
            await asyncio.to_thread(shutil.rmtree, folder, True)
        option = model_option(options)
        models: tuple[tuple[str, str], ...] = ()
        if option is not None:
            labels = list(option.get("labels") or ())
            values = [str(v) for v in option.get("values") or ()]
            models = tuple((v, labels[i] if i < len(labels) else v) for i, v in enumerate(values))
        return replace(offer, modes=tuple(modes), mode=mode, models=models,
                     model=None if option is None or option.get("value") is None else str(option["value"]))
    finally:
        await session.close()



def session_words(listed: dict[str, Any], workspace: str | None = None) -> str:
    """One listed session in a line, as the agent gives it: its title (else "untitled"), when it
    was last updated, and its folder where it is not ``workspace``."""
    words = [str(listed.get("title") or "untitled")]
    if listed.get("updatedAt"):
        words.append(f"updated {listed['updatedAt']}")
    if listed.get("cwd") and listed.get("cwd") != workspace:
        words.append(f"in {listed['cwd']}")
    return " · ".join(words)
