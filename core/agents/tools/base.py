"""What a tool is and what it receives.

A tool declares its name, description, JSON schema, whether it is read-only and
whether it needs approval; the loop does the rest (approvals, dedupe, error policy).
Failures are exceptions of :mod:`tether.agents.tool_errors` so the loop can triage them: an
error the model can act on goes back into the transcript, a permanent one ends the run.

The built-in tools declare all of this on the class; tools made at run time (from a
plain function by :func:`tether.tool`, or listed by an MCP server) set the same
attributes on the instance. The loop reads only the attributes, :meth:`Tool.check_args`,
:meth:`Tool.approval_reason` and, for a call that waits for approval, :meth:`Tool.preview`.
"""

from __future__ import annotations

import functools
import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.vocab.cancel import CancelSignal

if TYPE_CHECKING:
    import jsonschema

    from tether.vocab.preview import Preview
    from tether.store.protocol import IdempotencyLedger
    from tether.vocab.state import RunState
    from tether.agents.workspace import Workspace


OFFERED_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""The function names every chat-completions endpoint accepts: OpenAI's refuse any other
(``^[a-zA-Z0-9_-]{1,64}$``), and the request fails before the model sees it."""

_NOT_OFFERABLE = re.compile(r"[^A-Za-z0-9_-]")
_DIGEST_CHARS = 8


def offered_name(name: str) -> str:
    """The name a tool is offered to the model by: ``name`` itself when it fits
    :data:`OFFERED_NAME` (every built-in and ``@tool`` name does), else ``name`` rewritten to fit.

    A dot becomes ``__`` (``time.get_current_time`` -> ``time__get_current_time``); any other
    character outside ``[A-Za-z0-9_-]`` becomes ``_`` and, since that loses what the character
    was, the name gets ``_`` and 8 hex digits of its SHA-256 (``get time`` -> ``get_time_…``);
    a name longer than 64 is cut to 55 and gets the same digest. The same name always gives
    the same offered name, in every process. Two tools could still be offered under one name
    (``a.b`` and ``a__b``): :func:`tether.agents.mcp.catalog.catalog` refuses that when the servers start.
    The tool keeps its own name everywhere else (trace, console, approvals, the transcript);
    the run loop maps between the two at the model's boundary.
    """
    if OFFERED_NAME.fullmatch(name):
        return name
    out = _NOT_OFFERABLE.sub("_", name.replace(".", "__"))
    lossy = _NOT_OFFERABLE.search(name.replace(".", "")) is not None
    if lossy or not out or len(out) > 64:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
        out = f"{out[:64 - _DIGEST_CHARS - 1]}_{digest}"
    return out


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
    approvals: int = 1
    """How many different people approve each call (two for a payment), when it needs approval."""
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

    def approval_reason(self) -> str:
        """Why a call of this tool waits for the operator's approval, in words that follow
        "<name> needs approval: ". Said from what the tool declared, never guessed from what
        it might do: a tool class that sets ``needs_approval = True`` says so and where it is
        (a built-in write, a function tool and an MCP server's tool say it their own way)."""
        cls = type(self)
        return f"its class declares needs_approval = True ({cls.__module__}.{cls.__qualname__})"

    def preview(self, args: dict[str, Any], workspace: "Workspace | None"
                ) -> "Preview | str | None | Awaitable[Preview | str | None]":
        """What a call with ``args`` would change, shown to the people deciding it: a
        :class:`~tether.vocab.preview.Preview`, or text (a unified diff is shown as a
        diff, other text as a summary), or None for nothing to show. The default declares
        no preview.

        Override it (sync or ``async def``) in a tool that changes something a person should
        see before approving. It must only *read*: it runs before anyone approved. A sync
        preview runs in a worker thread; either kind is cut short after a few seconds, and
        what it raises is shown as a failed preview rather than blocking the decision
        (:func:`tether.agents.tools.preview.preview_call`). Raise
        :class:`~tether.agents.tool_errors.ToolError` with the tool's own words (a refused
        path) to have exactly those words shown."""
        return None

    def check_args(self, args: dict[str, Any]) -> str | None:
        """Why ``args`` cannot be passed to :meth:`run`, in words for the model, or None.
        Called by the loop before the call; a problem is a tool error as data."""
        problem = schema_problem(self.validator(), args)
        return None if problem is None else f"invalid arguments for {self.name}: {problem}."

    def validator(self) -> jsonschema.Draft202012Validator:
        """The checker of this tool's arguments: built once per tool class for the built-ins
        (their schema is the class's), once per instance for tools made at run time."""
        if "parameters" in type(self).__dict__:
            return _validator(type(self))
        cached = self.__dict__.get("_validator")
        if cached is None:
            cached = self.__dict__["_validator"] = _checker(self.parameters)
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


def schema_problem(validator: jsonschema.protocols.Validator, args: dict[str, Any]) -> str | None:
    """The first way ``args`` break the schema ``validator`` holds (where, then what), or
    None: what a tool's own check and an operator's edited arguments both say."""
    problems = sorted(validator.iter_errors(args), key=lambda e: [str(p) for p in e.path])
    if not problems:
        return None
    where = "/".join(str(p) for p in problems[0].path) or "arguments"
    return f"{where}: {problems[0].message}"


@functools.cache
def _validator(tool_class: type[Tool]) -> jsonschema.Draft202012Validator:
    # Building a validator costs far more than a check, and every run of every tool needs one.
    return _checker(tool_class.parameters)


def _checker(parameters: dict[str, Any]) -> jsonschema.Draft202012Validator:
    # lazy: jsonschema loads at the first check, not at start-up (tests/processes/test_cold_start.py: stop and runs load none)
    import jsonschema

    return jsonschema.Draft202012Validator(parameters)
