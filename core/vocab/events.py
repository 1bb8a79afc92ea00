"""The run's event stream: the one thing both the trace and the console read.

The loop emits these objects; the trace writes each as one JSON line, the console
maps each to widgets. Nothing is shown that was not emitted, so what the operator
saw and what the trace says cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from tether.vocab.records import field_names

if TYPE_CHECKING:
    from tether.vocab.state import RunState


@dataclass(slots=True, kw_only=True)
class Event:
    kind: ClassVar[str] = "event"
    traced: ClassVar[bool] = True
    """False for events that only views want (a streamed reply's pieces): the trace keeps
    one line per turn, with its usage, not one per delta."""
    run_id: str
    seq: int = 0  # assigned by the trace when written; increases across resumes
    ts: float = 0.0

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        for name in field_names(type(self)):
            out[name] = getattr(self, name)
        return out


@dataclass(slots=True, kw_only=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    model: str
    resumed: bool
    parent_run_id: str | None = None
    pid: int = 0
    agent: str = ""  # the agent's name (a demo scenario's is the scenario)
    price: str | None = None
    """``unknown`` when nobody prices the run's model (tether.vocab.prices): said once, here; else left out."""

    def record(self) -> dict[str, Any]:
        return _without_nones(Event.record(self), ("price",))


@dataclass(slots=True, kw_only=True)
class Turn(Event):
    kind: ClassVar[str] = "turn"
    turn: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float  # running (tree) cost after this turn
    finish_reason: str
    provider_ms: float
    estimated: bool = False
    tool_calls: int = 0
    ttft_ms: float | None = None  # streamed replies: time to the first token
    tokens_per_s: float | None = None  # streamed replies: output tokens per second after the first


@dataclass(slots=True, kw_only=True)
class TextDelta(Event):
    """A piece of the model's reply as it streams in; ``text=None`` voids the pieces so far
    (the attempt failed and is being retried). Not traced: the Turn line has the reply."""

    kind: ClassVar[str] = "text_delta"
    traced: ClassVar[bool] = False
    turn: int
    text: str | None


@dataclass(slots=True, kw_only=True)
class ProviderRetry(Event):
    kind: ClassVar[str] = "provider_retry"
    attempt: int
    status: int | None
    reason: str
    wait_s: float


@dataclass(slots=True, kw_only=True)
class ToolStart(Event):
    kind: ClassVar[str] = "tool_start"
    call_id: str
    name: str
    args: str


@dataclass(slots=True, kw_only=True)
class ToolProgress(Event):
    kind: ClassVar[str] = "tool_progress"
    call_id: str
    name: str
    label: str


@dataclass(slots=True, kw_only=True)
class ToolResult(Event):
    kind: ClassVar[str] = "tool_result"
    call_id: str
    name: str
    ms: float
    ok: bool
    cached: bool = False
    error: str | None = None
    preview: str = ""


@dataclass(slots=True, kw_only=True)
class ApprovalRequired(Event):
    kind: ClassVar[str] = "approval_required"
    call_id: str
    tool: str
    args: str
    why: str
    # An ACP agent's permission request: its options (id, name, kind) and the diff it shows.
    options: list[dict[str, str]] | None = None
    diff: str | None = None
    # Set only when they say something (tether.vocab.state.NeedsApproval has each):
    needed: int | None = None
    approvers: list[str] | None = None
    deadline_at: float | None = None
    on_deadline: str | None = None
    preview: dict[str, Any] | None = None
    rule: str | None = None

    def record(self) -> dict[str, Any]:
        return _without_nones(Event.record(self), ("options", "diff", "needed", "approvers", "deadline_at",
                                                   "on_deadline", "preview", "rule"))


@dataclass(slots=True, kw_only=True)
class ApprovalDecision(Event):
    kind: ClassVar[str] = "approval_decision"
    call_id: str
    tool: str
    verdict: str
    """``approved``, ``rejected``, or ``pending`` (one of the people a call needs approved)."""
    text: str
    by: str
    args: str | None = None
    """The operator's edited arguments, when the call runs with them."""
    rule: str | None = None
    tally: str | None = None
    """``1 of 2`` for a two-person call."""

    def record(self) -> dict[str, Any]:
        return _without_nones(Event.record(self), ("args", "rule", "tally"))


@dataclass(slots=True, kw_only=True)
class ApprovalEscalated(Event):
    """A call's decision deadline passed with ``escalate``: someone else is asked (the
    notification channel), and the call waits one more deadline, which then rejects."""

    kind: ClassVar[str] = "approval_escalated"
    call_id: str
    tool: str
    waited_s: float
    deadline_at: float


@dataclass(slots=True, kw_only=True)
class RuleAdded(Event):
    """A standing rule made during a run (an ACP agent's "always" option, chosen by a person)."""

    kind: ClassVar[str] = "rule_added"
    rule: str
    effect: str
    describes: str
    by: str


def _without_nones(out: dict[str, Any], optional: tuple[str, ...]) -> dict[str, Any]:
    """Optional fields left out when unset, so the lines of plain approvals stay as they were."""
    for name in optional:
        if out.get(name) is None:
            out.pop(name, None)
    return out


@dataclass(slots=True, kw_only=True)
class RunStopped(Event):
    kind: ClassVar[str] = "run_stopped"
    status: str
    reason: str
    turns: int
    cost_usd: float
    interruption: dict[str, Any] | None = None


def run_stopped(state: RunState, reason: str) -> RunStopped:
    """How ``state`` stopped (its status and interruption, set already), for ``reason``: the
    only place a ``run_stopped`` event is made. A driver ends its run with
    :meth:`tether.run.driver.RunDriver.finish`; the approvals' ends of a run nobody drives (a
    deadline's, a Stop of a run saved waiting) and a worker that parks a run call this."""
    return RunStopped(run_id=state.run_id, status=state.status.value, reason=reason, turns=state.turns,
                      cost_usd=state.cost_usd,
                      interruption=None if state.interruption is None else state.interruption.to_dict())


@dataclass(slots=True, kw_only=True)
class TelemetryDropped(Event):
    """Spans about this run that never reached the OpenTelemetry collector (it was down or
    slow, and the bounded queue was full): the trace says so instead of the gap passing unseen."""

    kind: ClassVar[str] = "telemetry_dropped"
    spans: int


@dataclass(slots=True, kw_only=True)
class FleetBudgetLevel(Event):
    """A fleet budget (tether.approvals.budgets) over this run reached ``level`` % of its limit
    this period (its ``warn_at`` and 100): the notifications send it once per budget and period."""

    kind: ClassVar[str] = "fleet_budget"
    budget: str
    period: str
    level: int
    spent_usd: float
    usd: float
    words: str


@dataclass(slots=True, kw_only=True)
class WorkerNote(Event):
    """A queue worker's word about a run it did not drive (it cannot build the run's agent,
    so the run waits for a worker that can): a console shows why a run waits."""

    kind: ClassVar[str] = "worker_note"
    worker: str
    text: str


# ---- a run's own workspace (tether.workspaces) ---------------------------------------------

@dataclass(slots=True, kw_only=True)
class WorkspaceReady(Event):
    """The run works in a workspace of its own: made now (``made``), or found where it was
    made (a resume, a follow-up, an adoption). ``base``: the commit its changes are read
    against; ``branch``: a worktree's."""

    kind: ClassVar[str] = "workspace_ready"
    workspace_kind: str
    path: str
    base: str
    made: bool
    branch: str | None = None
    host: str = ""


@dataclass(slots=True, kw_only=True)
class WorkspaceSetup(Event):
    """One setup command of the workspace, run before the agent started: its exit code
    (None: it could not start) and its output (the end of it, when long)."""

    kind: ClassVar[str] = "workspace_setup"
    command: str
    exit_code: int | None
    output: str
    ms: float


@dataclass(slots=True, kw_only=True)
class WorkspaceDiscarded(Event):
    """The run's workspace was removed (``tether discard``), its branch with it; the transcript stays."""

    kind: ClassVar[str] = "workspace_discarded"
    path: str
    branch: str | None = None
    by: str = ""


@dataclass(slots=True, kw_only=True)
class WorkspaceChecked(Event):
    """One of the agent file's ``checks`` ran in the run's workspace before its merge was asked."""

    kind: ClassVar[str] = "workspace_checked"
    command: str
    exit_code: int | None
    output: str
    ms: float


@dataclass(slots=True, kw_only=True)
class WorkspaceMerged(Event):
    """The run's work was merged into a branch (``tether merge``), after its decision."""

    kind: ClassVar[str] = "workspace_merged"
    into: str
    commit: str
    squash: bool = False
    words: str = ""


# ---- what agents that drive themselves (ACP) report beyond Tether's own loop -------------

@dataclass(slots=True, kw_only=True)
class AgentSession(Event):
    """An ACP agent answered ``initialize`` and opened a session for the run: who it is."""

    kind: ClassVar[str] = "agent_session"
    agent_name: str
    agent_version: str
    session_id: str
    pid: int
    load_session: bool = False
    sandbox: dict[str, Any] | None = None
    """The OS sandbox it runs in: ``backend`` and the folders it may write (``writable``)."""
    fork: str = ""
    """A fork's first session: ``session/fork`` (the agent forked the origin's), ``told`` (a new one, told in words)."""
    adopted: str = ""
    """A session the run adopted (the agent's own, from ``session/list``): ``session/resume`` or ``session/load``."""


@dataclass(slots=True, kw_only=True)
class AgentConfig(Event):
    """An ACP agent's session config options as it stated them (``session/new``, the answer to
    ``session/set_config_option``, or its ``config_option_update``): each ``{id, name,
    category, value, values}``. ``tether show`` prints the last one."""

    kind: ClassVar[str] = "config_options"
    options: list[dict[str, Any]]
    source: str = ""


@dataclass(slots=True, kw_only=True)
class Thought(Event):
    """The agent's reasoning for a turn, as it said it (shown folded)."""

    kind: ClassVar[str] = "thought"
    turn: int
    text: str


@dataclass(slots=True, kw_only=True)
class Plan(Event):
    """The agent's plan as a checklist; each one replaces the last. ``entries``: content, status."""

    kind: ClassVar[str] = "plan"
    entries: list[dict[str, str]]


@dataclass(slots=True, kw_only=True)
class ShellOutputEvent(Event):
    """A piece of an ACP agent's shell call's output as it ran (``data``), or its end
    (``exited``: ``exit_code``, or the ``signal`` that ended it)."""

    kind: ClassVar[str] = "tool_output"
    call_id: str
    name: str
    data: str = ""
    exited: bool = False
    exit_code: int | None = None
    signal: str | None = None


@dataclass(slots=True, kw_only=True)
class AgentCommands(Event):
    """The agent's slash commands (ACP ``available_commands_update``); each list replaces the last.
    ``commands``: name, description and, where the agent says, hint (what its argument is)."""

    kind: ClassVar[str] = "agent_commands"
    commands: list[dict[str, str]]


@dataclass(slots=True, kw_only=True)
class FileWrite(Event):
    """A file the agent wrote through Tether (ACP ``fs/write_text_file``), or was refused."""

    kind: ClassVar[str] = "file_write"
    path: str
    size: int
    refused: str | None = None


@dataclass(slots=True, kw_only=True)
class RunWarning(Event):
    """What the operator must know that the rest of the record would hide: an ACP agent that
    wrote a file itself, outside its workspace, after Tether refused the write (``path``;
    ``call_id``: the call that reported success), or, in a sandboxed run, that the sandbox kept
    such a file out. Every view shows it: the console's transcript, ``tether show`` and the
    web page."""

    kind: ClassVar[str] = "warning"
    text: str
    call_id: str | None = None
    path: str | None = None


EventSink = Callable[[Event], None]
