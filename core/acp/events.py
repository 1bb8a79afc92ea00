"""What an ACP session reports, as small typed events of Tether's own.

The ``acp`` package's pydantic models follow the protocol's schema, which grows every release
and carries agent-specific ``_meta``. The harness, the store and the console should not follow
it: they see these frozen dataclasses, built in one place (``translate``), so a schema change
or an agent's quirk (qwen's usage in ``_meta``) is absorbed there. Every event is plain data:
it can be journaled, compared in tests and shown without touching the agent again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tether.acp.escapes import RefusedWrite
from tether.acp.permissions import PermissionRequest
from tether.acp.touches import Diff, Location

UsageSource = Literal["usage_update", "meta", "prompt_response"]


@dataclass(frozen=True)
class TextChunk:
    """A piece of the agent's message to the user: streams into the transcript."""

    text: str
    message_id: str | None = None


@dataclass(frozen=True)
class ThoughtChunk:
    """A piece of the agent's reasoning: shown folded."""

    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    """``tool_call``: a tool call the agent begins (often still ``pending``, arguments to come)."""

    tool_call_id: str
    title: str
    kind: str | None = None
    status: str | None = None
    locations: tuple[Location, ...] = ()
    diffs: tuple[Diff, ...] = ()
    text: str = ""  # text content blocks, joined
    raw_input: Any = None
    tool_name: str | None = None  # the agent's own tool name, where it says (qwen: _meta.toolName)


@dataclass(frozen=True)
class ToolCallUpdated:
    """``tool_call_update``: only the fields the agent sent are set (None: unchanged)."""

    tool_call_id: str
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    locations: tuple[Location, ...] | None = None
    diffs: tuple[Diff, ...] = ()
    text: str = ""
    raw_input: Any = None
    raw_output: Any = None


@dataclass(frozen=True)
class PlanItem:
    content: str
    priority: str
    status: str


@dataclass(frozen=True)
class PlanUpdated:
    """The agent's whole plan (each ``plan`` update replaces the last): shown as a checklist."""

    entries: tuple[PlanItem, ...]


@dataclass(frozen=True)
class UsageReported:
    """Tokens and cost as the agent reports them, from one of three places.

    - ``usage_update`` (OpenCode): context ``used``/``size``, and ``cost`` that adds up over the
      session (a running total, not a delta);
    - ``meta`` (Qwen Code): ``_meta.usage`` on an empty message chunk, one per model call;
    - ``prompt_response``: the ``usage`` of the turn's response.
    """

    source: UsageSource
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    context_used: int | None = None
    context_size: int | None = None
    cost_amount: float | None = None
    cost_currency: str | None = None


@dataclass(frozen=True)
class PermissionAsked:
    """``session/request_permission``: the agent waits until ``request`` is decided."""

    request: PermissionRequest


@dataclass(frozen=True)
class PermissionSettled:
    """How a permission request ended: an option id, or ``None`` for cancelled."""

    tool_call_id: str
    option_id: str | None
    by_cancel: bool = False  # answered cancelled by the session's cancel/close, not a decider


@dataclass(frozen=True)
class FileRead:
    path: str
    size: int


@dataclass(frozen=True)
class FileWritten:
    """``fs/write_text_file`` served: the file at ``path`` now holds ``size`` bytes (UTF-8)."""

    path: str
    size: int


@dataclass(frozen=True)
class FileRefused:
    """An fs request the client refused (outside the workspace, unreadable): the agent got
    ``reason``. A write refused as outside the workspace carries the file as it was then
    (``outside``), so that a write the agent makes itself afterwards can be told."""

    operation: Literal["read", "write"]
    path: str
    reason: str
    outside: RefusedWrite | None = None


@dataclass(frozen=True)
class ShellOutput:
    """A shell call's output, live (``_meta.terminal_output`` of its update, the extension the
    client advertises), and its end (``_meta.terminal_exit``): exit code, or the signal."""

    tool_call_id: str
    data: str = ""
    exited: bool = False
    exit_code: int | None = None
    signal: str | None = None


@dataclass(frozen=True)
class SlashCommand:
    """One of the agent's slash commands: sent as ``/name args`` in a prompt."""

    name: str
    description: str
    hint: str | None = None  # what its argument is, where the agent says (``input.hint``)


@dataclass(frozen=True)
class CommandsAvailable:
    """``available_commands_update``: the agent's slash commands now (each replaces the last)."""

    commands: tuple[SlashCommand, ...]


@dataclass(frozen=True)
class OtherUpdate:
    """A session update with no event of its own (modes, session info…)."""

    kind: str


@dataclass(frozen=True)
class ConfigOptions:
    """The session's config options as the agent states them (``session/new``, the answer to
    ``session/set_config_option``, a ``config_option_update``): each ``{id, name, category,
    value, values}``."""

    options: tuple[dict[str, Any], ...]
    source: str


@dataclass(frozen=True)
class BadFrame:
    """A line on the agent's stdout that is not a JSON-RPC message; ``sample`` is its start."""

    count: int  # bad frames so far in this session
    sample: str


@dataclass(frozen=True)
class TurnEnded:
    """The prompt's response: ``stop_reason`` as the agent said, or ``cancelled`` when Tether
    had to kill an agent that did not answer its cancel (``killed``)."""

    stop_reason: str
    killed: bool = False


@dataclass(frozen=True)
class AgentExited:
    """The agent process ended: exit status (negative: killed by that signal, as asyncio
    reports it), the tail of its stderr, and whether Tether ended it (close, or a kill after
    an unanswered cancel) or it ended by itself."""

    returncode: int | None
    stderr_tail: str
    expected: bool


AcpEvent = (
    TextChunk | ThoughtChunk | ToolCallStarted | ToolCallUpdated | PlanUpdated | UsageReported | CommandsAvailable
    | ShellOutput    | PermissionAsked | PermissionSettled | FileRead | FileWritten | FileRefused | OtherUpdate | BadFrame
    | TurnEnded | AgentExited
)


@dataclass(frozen=True)
class AgentInfo:
    """What ``initialize`` said: for ``tether agents`` and the run's record (no secrets in it)."""

    name: str
    version: str
    title: str | None
    protocol_version: int
    auth_methods: tuple[str, ...]  # their ids
    load_session: bool
    capabilities: dict[str, Any] = field(default_factory=dict)  # agentCapabilities, as JSON
