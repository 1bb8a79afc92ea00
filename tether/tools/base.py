"""What a tool is, what it receives, and how it fails.

A tool declares its name, description, JSON schema, whether it is read-only and
whether it needs approval; the loop does the rest (approvals, dedupe, error policy).
Failures are exceptions of the classes below so the loop can triage them: an error
the model can act on goes back into the transcript, a permanent one ends the run.

The built-in tools declare all of this on the class; tools made at run time (from a
plain function by :func:`tether.tool`, or listed by an MCP server) set the same
attributes on the instance. The loop reads only the attributes and :meth:`Tool.check_args`.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import jsonschema

from tether.cancel import CancelSignal

if TYPE_CHECKING:
    from tether.runstore import IdempotencyLedger
    from tether.state import RunState
    from tether.workspace import Workspace


class ToolError(Exception):
    """A tool failed in a way the model may be able to act on."""

    permanent: ClassVar[bool] = False


class PathRefused(ToolError):
    """A path that would leave the workspace (or is malformed) was refused."""


class NotFound(ToolError):
    pass


class InvalidArguments(ToolError):
    pass


class PermissionDenied(ToolError):
    """No message can fix this: retrying only burns turns."""

    permanent = True


@dataclass(slots=True)
class ToolContext:
    """What a tool gets besides its arguments: the run's signal, a progress callback,
    the workspace, and the ledger that makes writes idempotent.

    A tool writes back through the typed fields below: the loop reads them after the call.
    """

    run_id: str
    call_id: str
    signal: CancelSignal
    progress: Callable[[str], None]
    workspace: "Workspace | None"  # None: the agent has no folder (it lists no file tools)
    ledger: "IdempotencyLedger"
    spawn: "Callable[[str], Awaitable[RunState]] | None" = None
    """Runs a subagent on a question and returns its finished run (the research tool);
    None where this run cannot have subagents."""
    partial: str | None = None
    """Set by a tool cut off by the signal, before it re-raises ``RunCancelled``: how far it
    got ("400 of 1200 entries scanned"). The cancelled call's result says it."""
    child_run_id: str | None = None
    """Set by a tool that ran a subagent: the child run, listed among the run's children."""
    child_cost_usd: float = 0.0
    """Set by a tool that ran a subagent: what the child spent, added to the run's cost."""

    @property
    def idempotency_key(self) -> str:
        return f"{self.run_id}:{self.call_id}"


class Tool(ABC):
    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool = True
    needs_approval: bool = False
    idempotent: bool = False
    """Recorded (from an MCP server's ``idempotentHint``, or the decorator's option); calling it
    twice with one input has no more effect than once."""
    source: str = "tether"
    """Where the tool comes from, as ``tether agents`` shows it: ``tether``, a module, ``mcp:time``."""
    ref: str | None = None
    """How a run saves this tool so another process can rebuild it (``module:function``), or None
    when it is rebuilt another way (an MCP server lists it again)."""

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        """Do the work and return the text the model reads."""

    def check_args(self, args: dict[str, Any]) -> str | None:
        """Why ``args`` cannot be passed to :meth:`run`, in words for the model, or None.
        Called by the loop before the call; a problem is a tool error as data."""
        problems = sorted(self.validator().iter_errors(args), key=lambda e: list(e.path))
        if not problems:
            return None
        where = "/".join(str(p) for p in problems[0].path) or "arguments"
        return f"invalid arguments for {self.name}: {where}: {problems[0].message}."

    def validator(self) -> jsonschema.Draft202012Validator:
        """The checker of this tool's arguments: built once per tool class for the built-ins
        (their schema is the class's), once per instance for tools made at run time."""
        if "parameters" in type(self).__dict__:
            return _validator(type(self))
        cached = self.__dict__.get("_validator")
        if cached is None:
            cached = self.__dict__["_validator"] = jsonschema.Draft202012Validator(self.parameters)
        return cached

    def schema(self) -> dict[str, Any]:
        """The chat-completions tool definition."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@functools.cache
def _validator(tool_class: type[Tool]) -> jsonschema.Draft202012Validator:
    # Building a validator costs far more than a check, and every run of every tool needs one.
    return jsonschema.Draft202012Validator(tool_class.parameters)
