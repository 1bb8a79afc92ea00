"""Agents written with other frameworks, run under Tether's supervision (docs/integrations.md).

Each adapter is a module of its own, imported only when asked for: ``import tether`` never
imports a framework. :mod:`tether.integrations.openai_agents` runs an OpenAI Agents SDK agent,
:mod:`tether.integrations.pydantic_ai` a pydantic-ai one; both report into a run opened with
:meth:`tether.Harness.track`, and take and return the two small objects defined here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.vocab.events import EventSink
from tether.vocab.state import Limits, Policies, Pricing, Status


@dataclass(frozen=True, slots=True)
class Supervision:
    """How Tether holds the run: its name (default: the agent's), its id, the limits checked
    at each model call's usage, the prices that usage is worth, the decision deadlines, and
    event sinks of the program's own."""

    name: str | None = None
    run_id: str | None = None
    limits: Limits | None = None
    pricing: Pricing | None = None
    policies: Policies | None = None
    sinks: Sequence[EventSink] = ()
    workspace: str | Path | None = None
    """The folder the agent works on; with ``isolation`` (``"worktree"``, ``"copy"``) the run
    gets a workspace of its own made from it. The adapter hands it to the agent's tools (as
    ``deps`` / ``context`` when the program gives none; docs/integrations.md)."""
    isolation: str | None = None


@dataclass(frozen=True, slots=True)
class Supervised:
    """How a supervised run ended: one of the five exits, in words, with the framework's
    own output and result object when it completed."""

    run_id: str
    status: Status
    reason: str
    output: Any = None
    result: Any = field(default=None, repr=False)
