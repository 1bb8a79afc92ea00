"""The run as plain, serialisable data.

Everything that decides what a run does next lives here, not in variables of the
process running it: a run killed mid-task and resumed elsewhere continues from this
object alone, and its cost is the sum of what it paid, whichever process paid it.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal

from tether.vocab.records import field_names, plain
from tether.vocab import people
from tether.vocab.price_calls import priced_call

SCHEMA_VERSION = 1

BudgetMode = Literal["soft", "strict", "turns-only"]
"""``turns-only``: an ACP agent that reports no usage; its budget cannot hold, and the operator says so."""
ToolErrorPolicy = Literal["fatal", "generic", "descriptive"]
DedupeMode = Literal["off", "read-only", "all"]


class Status(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    MAX_TURNS_EXCEEDED = "max_turns_exceeded"
    BUDGET_EXCEEDED = "budget_exceeded"
    INTERRUPTED = "interrupted"

    @property
    def resumable(self) -> bool:
        return self in (Status.MAX_TURNS_EXCEEDED, Status.BUDGET_EXCEEDED, Status.INTERRUPTED)

    @property
    def exit_code(self) -> int:
        return _EXIT_CODES[self]


_EXIT_CODES = {
    Status.COMPLETED: 0,
    Status.FAILED: 1,
    Status.MAX_TURNS_EXCEEDED: 3,
    Status.BUDGET_EXCEEDED: 4,
    Status.INTERRUPTED: 5,
    Status.RUNNING: 5,
}
OUTAGE_EXIT_CODE = 6  # interrupted by a provider outage: worth resuming later, unattended


@dataclass(slots=True)
class Pricing:
    input_per_million: float = 2.00
    output_per_million: float = 12.00
    assumed: bool = False
    """True when no price was configured for the model and these are the defaults (runs before prices)."""
    source: str = ""
    """Where the price comes from: ``config``, ``genai-prices``, ``unknown`` (tether.vocab.prices)."""
    ref: str = ""
    """genai-prices' model and provider (``provider:model``): each call is priced by it when it is made."""
    cache_read_per_million: float | None = None
    cache_write_per_million: float | None = None

    @property
    def unknown(self) -> bool:
        """No price for the model: tokens are counted, dollars are not (never a made-up 0)."""
        return self.source == "unknown"

    def cost(self, prompt_tokens: int, completion_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        if self.ref:
            got = priced_call(self.ref, prompt_tokens, completion_tokens, cache_read, cache_write)
            if got is not None:
                return got
        cached = cache_read * (self.cache_read_per_million if self.cache_read_per_million is not None
                               else self.input_per_million)
        cached += cache_write * (self.cache_write_per_million if self.cache_write_per_million is not None
                                 else self.input_per_million)
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million + cached) / 1e6


@dataclass(slots=True)
class Limits:
    max_turns: int | None = 20  # None: no turn cap (a budget should then bound the run)
    budget_usd: float | None = None
    budget_mode: BudgetMode = "soft"
    max_tokens: int = 512


@dataclass(slots=True)
class Policies:
    tool_errors: ToolErrorPolicy = "descriptive"
    triage: bool = True
    dedupe: DedupeMode = "read-only"
    auto_approve: list[str] = field(default_factory=list)
    decision_deadline_s: float | None = None
    """How long a call waits for people before :attr:`on_deadline` (None: as long as it takes)."""
    on_deadline: str = "reject"
    """``reject`` (never approve), ``stop`` the run, or ``escalate`` and wait one more deadline."""


# ---- why a run stopped without an answer ----------------------------------------
#
# One class per shape, so callers match on the type instead of reaching into a dict.
# On disk (the journal, the trace, ``--json``) each is the dict it always was: its
# ``type`` and the keys below, spelled as before (``callId``, ``toolName``).


@dataclass(frozen=True, slots=True)
class NeedsApproval:
    """A call that needs the operator's approval, with everything needed to decide it."""

    type: ClassVar[str] = "approval"
    call_id: str
    tool_name: str
    args: str
    why: str = ""
    asked_at: float | None = None
    """When the call first asked (kept across re-asks: a deadline counts from it)."""
    needed: int = 1
    """How many different people must approve (two for a two-person tool or rule)."""
    approvers: tuple[str, ...] = ()
    """Who has approved so far, when more than one person must."""
    deadline_at: float | None = None
    """When the wait ends without a decision, and then :attr:`on_deadline` happens."""
    on_deadline: str = "reject"
    escalated: bool = False
    """The deadline passed once and someone else was asked: the next one rejects."""
    preview: dict[str, Any] | None = None
    """What the call would change (:class:`tether.approvals.Preview` as a dict), or None."""
    rule: str | None = None
    """The ``ask`` rule that holds the call for people, when one does."""
    _: KW_ONLY  # the later fields by name only: one added before another cannot take its place
    accounts: tuple[str, ...] = ()
    """The account that authenticated each of :attr:`approvers` (:mod:`tether.vocab.people`)."""
    schema: dict[str, Any] | None = None
    """The JSON schema of the tool's arguments, as a program reported it (``run.approval(…,
    schema=)``): what an operator's edited arguments are checked against. None for Tether's
    own calls (the agent's tools have it) and for a program that did not report one."""
    options: tuple[dict[str, str], ...] = ()
    """An ACP agent's permission options (``id``, ``name``, ``kind``): what ``tether approve
    --option ID`` may answer with."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "callId": self.call_id, "toolName": self.tool_name,
                               "args": self.args, "why": self.why}
        # Written only when set, so a plain approval reads as it always did.
        if self.asked_at is not None:
            out["askedAt"] = self.asked_at
        if self.needed != 1:
            out["needed"] = self.needed
        if self.approvers:
            out["approvers"] = list(self.approvers)
        if self.deadline_at is not None:
            out["deadlineAt"] = self.deadline_at
            out["onDeadline"] = self.on_deadline
        if self.escalated:
            out["escalated"] = True
        if self.preview is not None:
            out["preview"] = self.preview
        if self.rule is not None:
            out["rule"] = self.rule
        if self.accounts:
            out["accounts"] = list(self.accounts)
        if self.schema is not None:
            out["schema"] = self.schema
        if self.options:
            out["options"] = [dict(o) for o in self.options]
        return out

    @property
    def tally(self) -> str:
        """``1 of 2`` while a two-person call has some of its approvals; else empty."""
        return f"{len(self.approvers)} of {self.needed}" if self.needed > 1 else ""

    @property
    def progress(self) -> str:
        """``1 of 2 approved (ana)`` for a call that needs several people; else empty."""
        return people.progress(self.needed, self.approvers, self.accounts) if self.needed > 1 else ""


@dataclass(frozen=True, slots=True)
class MaxTurns:
    """The turn cap was reached; resuming with a higher cap goes on."""

    type: ClassVar[str] = "max_turns"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type}


@dataclass(frozen=True, slots=True)
class MaxBudget:
    """The budget was reached (or, in strict mode, the next turn could pass it)."""

    type: ClassVar[str] = "max_budget"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type}


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The run's Stop signal fired: an operator, a deadline, or the process shutting down."""

    type: ClassVar[str] = "cancelled"
    reason: str
    by: str | None = None  # who pressed Stop (user@host, or --as NAME), when someone did

    def to_dict(self) -> dict[str, Any]:
        out = {"type": self.type, "reason": self.reason}
        if self.by:
            out["by"] = self.by
        return out


@dataclass(frozen=True, slots=True)
class ProviderOutage:
    """The endpoint kept failing in ways that asking again may fix (429, 5xx, timeouts,
    refused or dropped connections) until the retries ran out. Nothing is wrong with the
    run: ``tether resume`` goes on once the endpoint is back."""

    type: ClassVar[str] = "provider_outage"
    reason: str
    status: int | None = None
    attempts: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "reason": self.reason, "status": self.status, "attempts": self.attempts,
                "seconds": self.seconds}


@dataclass(frozen=True, slots=True)
class StopConditionMet:
    """One of the run's stop conditions said stop, and why."""

    type: ClassVar[str] = "stop_condition"
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "reason": self.reason}


Interruption = NeedsApproval | MaxTurns | MaxBudget | Cancelled | StopConditionMet | ProviderOutage
"""Why an ``interrupted``, ``max_turns_exceeded`` or ``budget_exceeded`` run stopped."""


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def interruption_from_dict(data: Mapping[str, Any] | None) -> Interruption | None:
    """Read the saved form back; an unknown shape is a :class:`StateError`, not a guess."""
    if data is None:
        return None
    try:
        match data.get("type"):
            case "approval":
                return NeedsApproval(str(data["callId"]), str(data["toolName"]), str(data.get("args") or "{}"),
                                     str(data.get("why") or ""), data.get("askedAt"), int(data.get("needed") or 1),
                                     tuple(data.get("approvers") or ()), data.get("deadlineAt"),
                                     str(data.get("onDeadline") or "reject"), bool(data.get("escalated")),
                                     data.get("preview"), data.get("rule"), accounts=tuple(data.get("accounts") or ()),
                                     schema=data["schema"] if isinstance(data.get("schema"), dict) else None,
                                     options=tuple({k: str(o.get(k) or "") for k in ("id", "name", "kind")}
                                                   for o in _listed(data.get("options")) if isinstance(o, dict)))
            case "max_turns":
                return MaxTurns()
            case "max_budget":
                return MaxBudget()
            case "cancelled":
                return Cancelled(str(data.get("reason") or "cancelled"), data.get("by"))
            case "stop_condition":
                return StopConditionMet(str(data.get("reason") or ""))
            case "provider_outage":
                return ProviderOutage(str(data.get("reason") or ""), data.get("status"), int(data.get("attempts") or 0),
                                      float(data.get("seconds") or 0.0))
    except (KeyError, AttributeError) as exc:
        raise StateError(f"interruption {data!r} lacks {exc}") from None
    raise StateError(f"unknown interruption {data!r}")


@dataclass(slots=True)
class AgentRef:
    """What a run remembers of its agent, so that any process can rebuild the same one.

    ``config`` is the agent file it came from (rebuilt from there by ``name``); ``spec``
    is its definition by reference (models, tool and stop-condition references, MCP
    servers without their environment values), used when there is no file. ``tools``
    maps each tool name to a hash of its schema and policy, to say what changed.
    Secrets are never part of it: an API key is named by the variable that holds it.
    """

    name: str
    source: Literal["demo", "config", "library"]
    fingerprint: str
    tools: dict[str, str] = field(default_factory=dict)
    config: str | None = None
    spec: dict[str, Any] = field(default_factory=dict)


WorkspaceKind = Literal["worktree", "copy", "none"]  # none: a session's own folder, recorded (Claude Code)
WorkspaceStage = Literal["planned", "creating", "made", "ready", "discarding", "discarded"]


@dataclass(slots=True)
class RunWorkspace:
    """The folder a run works in when its agent is isolated (:mod:`tether.workspaces`): a git
    worktree on its own branch, or a copy. The run owns it as it owns its journal, so resume,
    follow-ups, adoption and a worker find it here, whichever process made it.

    ``stage`` is where its making or removal got to, written *before* each step that touches
    the disk, so a crash at any point leaves a record the next operation finishes from:
    ``planned`` (nothing made yet), ``creating`` (made, maybe in part), ``made`` (there, its
    setup not passed yet), ``ready``, ``discarding``, ``discarded``. Every path is absolute:
    a process with another ``TETHER_HOME`` still finds it, and one on another host refuses.
    """

    kind: WorkspaceKind
    source: str
    """The agent's folder the run was made from."""
    base: str = "HEAD"
    """The ref the worktree starts from, as the agent file or the caller named it."""
    setup: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    stage: WorkspaceStage = "planned"
    path: str | None = None
    """The workspace itself: the worktree's checkout, or the copy."""
    meta: str | None = None
    """Tether's side folder for it: the private index its changes are read with, and a copy's
    base repository. Never inside the workspace, where the agent works."""
    repo: str | None = None
    """A worktree's source repository (its top folder)."""
    subdir: str = ""
    """Where the agent's folder is inside the workspace (a worktree of the repository the
    folder is part of): the file tools' root is ``path/subdir``."""
    branch: str | None = None
    base_commit: str | None = None
    host: str | None = None
    made_at: float | None = None
    setup_failed: str | None = None
    """Why the last setup failed, in words (then it runs again on the next operation)."""
    ignored: bool = False
    """Its checkpoints and rewinds take ignored files too (agent file: ``checkpoint_ignored``)."""
    changes: dict[str, Any] | None = None
    """What the run had changed when its last operation ended: ``files``, ``added``,
    ``deleted`` (lines), ``at`` (the time). A listing shows it without running git."""
    merge: dict[str, Any] | None = None
    """Its last merge (:mod:`tether.workspaces.merging`): ``call_id``, ``into``, ``squash``,
    ``tree`` (the diff's hash the decision is bound to), ``stage`` (``asked``, ``merging``,
    ``merged``, ``not merged``), the run's ``status`` and ``interruption`` before it asked, and,
    from ``merging`` on, the commits the merge writes (``target``, ``head``, ``work``,
    ``commit``), recorded before any ref moves."""

    @property
    def root(self) -> str | None:
        """The folder the agent works in: the workspace, or its part that is the agent's folder."""
        if self.path is None:
            return None
        return self.path if not self.subdir else f"{self.path.rstrip('/')}/{self.subdir}"

    def listed(self) -> dict[str, Any]:
        """What a listing of runs keeps of it (:class:`tether.store.summary.RunSummary`)."""
        return {"kind": self.kind, "stage": self.stage, "path": self.path, "branch": self.branch,
                "host": self.host, "source": self.source, "repo": self.repo, "made_at": self.made_at,
                "changes": self.changes,
                "merge": None if self.merge is None else {"stage": self.merge.get("stage"),
                                                          "into": self.merge.get("into")}}


@dataclass(slots=True)
class Decision:
    """An operator's verdict on one call, bound to its exact arguments, used once."""

    call_id: str
    verdict: Literal["approved", "rejected"]
    args_hash: str
    """The hash of the arguments the call runs with: the operator's, when edited."""
    text: str = ""  # the note (approved) or the reason (rejected)
    by: str = "operator"
    used: bool = False
    ts: float = field(default_factory=time.time)
    tool: str = ""
    args: str | None = None
    """The operator's edited arguments (JSON), or None: the call runs as the model asked."""
    asked_hash: str | None = None
    """With edited arguments: the hash of the model's, which the edit is bound to."""
    rule: str | None = None
    """The id of the standing rule that decided (``by`` then says ``rule R3``)."""
    approvers: list[str] = field(default_factory=list)
    """Who approved, in order, when more than one person must (:attr:`needed`)."""
    needed: int = 1
    asked_at: float | None = None
    """When the call asked; with :attr:`ts`, how long it waited."""
    account: str | None = None
    """The account that authenticated the decision (:mod:`tether.vocab.people`); ``by`` is the
    name it gave. None for a rule, a deadline, or a decision recorded before accounts were."""
    accounts: list[str] = field(default_factory=list)
    """The account of each of :attr:`approvers`, in the same order."""

    @property
    def complete(self) -> bool:
        """A rejection, or an approval by as many people as it needs."""
        return self.verdict == "rejected" or len(self.approvers) >= self.needed or self.needed <= 1

    @property
    def bound_hash(self) -> str:
        """The hash of the model's arguments this decision answers."""
        return self.asked_hash or self.args_hash


def args_hash(arguments: str) -> str:
    """Hash of a call's arguments, canonicalised when they are valid JSON."""
    try:
        canonical = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except (ValueError, TypeError):
        canonical = arguments
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


_FRESH_ID_TRIES = 3  # made-up ids a creator tries before it gives up


def new_run_id(prefix: str = "run") -> str:
    """An id that sorts by when the run was made. Eight hex digits of chance, so a burst of a
    thousand runs in one second (a bulk ``submit``) meets a clash about once in 10,000 bursts;
    a creator that made the id up takes another when the store says it exists."""
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"


@dataclass(slots=True)
class RunState:
    run_id: str
    model: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0  # tree cost: this run's turns plus its children's
    child_cost_usd: float = 0.0
    # What this run has charged to the fleet budgets' counters so far (tether.approvals.budgets):
    # a check charges its own cost beyond this, whichever process makes it.
    fleet_charged_usd: float = 0.0
    per_turn_prompt_tokens: list[int] = field(default_factory=list)
    estimated_turns: list[int] = field(default_factory=list)
    # The largest ratio seen of the prompt tokens the endpoint reported to Tether's own count
    # of the same request: strict budgets scale their reserve by it (None: nothing seen yet).
    usage_ratio: float | None = None
    status: Status = Status.RUNNING
    interruption: Interruption | None = None
    error: str | None = None
    approvals: dict[str, Decision] = field(default_factory=dict)
    parent_run_id: str | None = None
    children: list[str] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    pricing: Pricing = field(default_factory=Pricing)
    policies: Policies = field(default_factory=Policies)
    base_url: str | None = None  # None: the embedded scripted provider
    workspace: str | None = None
    run_workspace: RunWorkspace | None = None
    """The run's own workspace (its agent is isolated), or None: it works in :attr:`workspace`."""
    control_seen: int = 0  # requests of the run's control channel it has handled (tether.store.control)
    # Write calls whose side effect may have started: call id -> idempotency key.
    intents: dict[str, str] = field(default_factory=dict)
    tool_runs: int = 0
    # Tool calls whose result is not a success (an error, a declined or a cancelled call):
    # the result is in the transcript as words for the model, and dedupe never reuses it.
    failed_calls: list[str] = field(default_factory=list)
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    agent: AgentRef | None = None  # None: a run made before agents, rebuilt as the demo or ad hoc
    rewinds: list[dict[str, Any]] = field(default_factory=list)  # tether.workspaces.rewinding
    forked_from: dict[str, Any] | None = None  # {"run_id", "step", "commit", "messages"}: tether fork
    operator: str | None = None
    """Who started the run: the account of the process that made it (:mod:`tether.vocab.people`),
    written by the store's ``create``; None for a run made before it was recorded."""
    operator_name: str | None = None
    """The name its starter gave (``--as NAME``; by default user@host), kept beside the account."""
    version: int = SCHEMA_VERSION

    # ---- derived views -------------------------------------------------
    @property
    def answer(self) -> str | None:
        if self.status is not Status.COMPLETED:
            return None
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                return message.get("content")
        return None

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this run: its status's, and 6 for a provider outage."""
        if self.status is Status.INTERRUPTED and isinstance(self.interruption, ProviderOutage):
            return OUTAGE_EXIT_CODE
        return self.status.exit_code

    @property
    def own_cost_usd(self) -> float:
        return self.cost_usd - self.child_cost_usd

    @property
    def of_acp_agent(self) -> bool:
        """A run of an agent that speaks ACP (its agent's spec has ``acp``): the agent's own
        process drives its turns, and it goes on only with a follow-up in its session."""
        return self.agent is not None and bool((self.agent.spec or {}).get("acp"))

    @property
    def task(self) -> str:
        for message in self.messages:
            if message.get("role") == "user":
                return str(message.get("content") or "")
        return ""

    # ---- serialisation -------------------------------------------------
    def header(self, since: Mapping[str, int] | None = None) -> dict[str, Any]:
        """Everything but the transcript. ``since`` gives, for list fields that only grow, the
        index from which to include them (the store writes only what a step added)."""
        out: dict[str, Any] = {}
        for name in field_names(RunState):
            if name == "messages":
                continue
            value = getattr(self, name)
            if since and name in since:
                out[name] = value[since[name]:]
                continue
            if name == "approvals":
                value = {k: plain(v) for k, v in value.items()}
            elif name == "interruption":
                value = None if value is None else value.to_dict()
            elif isinstance(value, (Limits, Pricing, Policies, AgentRef, RunWorkspace)):
                value = plain(value)
            elif isinstance(value, Status):
                value = value.value
            elif isinstance(value, list):
                value = list(value)
            elif isinstance(value, dict):
                value = dict(value)
            out[name] = value
        return out

    def to_dict(self) -> dict[str, Any]:
        return {**self.header(), "messages": self.messages}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunState":
        version = data.get("version")
        if version != SCHEMA_VERSION:
            raise StateError(f"unknown state version {version!r} (this Tether reads version {SCHEMA_VERSION})")
        known = set(field_names(cls))
        kwargs = {k: v for k, v in data.items() if k in known}
        try:
            _check_scalars(kwargs)
            kwargs["status"] = Status(kwargs.get("status", "running"))
            kwargs["limits"] = Limits(**kwargs.get("limits", {}))
            kwargs["pricing"] = Pricing(**kwargs.get("pricing", {}))
            # ``silent_rejections``: a lab-only switch that runs of earlier versions saved.
            kwargs["policies"] = Policies(**{k: v for k, v in kwargs.get("policies", {}).items()
                                             if k != "silent_rejections"})
            kwargs["approvals"] = {k: Decision(**v) for k, v in kwargs.get("approvals", {}).items()}
            kwargs["interruption"] = interruption_from_dict(kwargs.get("interruption"))
            if "failed_calls" not in data:  # saved before results carried ``ok``
                kwargs["failed_calls"] = _failed_by_wording(kwargs.get("messages", []))
            if kwargs.get("agent") is not None:
                kwargs["agent"] = AgentRef(**kwargs["agent"])
            if kwargs.get("run_workspace") is not None:
                kwargs["run_workspace"] = RunWorkspace(**kwargs["run_workspace"])
            messages = kwargs.get("messages", [])
            if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
                raise TypeError("the transcript must be a list of message objects")
            return cls(**kwargs)
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
            # A field of the wrong shape (a list where an object belongs, a number too big for
            # a float): a tampered or foreign journal, refused in words like any other.
            raise StateError(f"state does not match the schema: {exc}") from exc


_COUNTS = ("turns", "prompt_tokens", "completion_tokens", "control_seen", "tool_runs")
_TIMES = ("created_at", "updated_at")
_TEXTS = ("operator", "operator_name")


def _check_scalars(kwargs: dict[str, Any]) -> None:
    """The id, counts and times a listing stores in columns (SQLite's 64-bit integers and
    reals): of their types and in range, or a TypeError (a tampered or foreign journal)."""
    run_id = kwargs.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise TypeError(f"run_id must be text, not {type(run_id).__name__}")
    for name in _COUNTS:
        value = kwargs.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int) or not -2**63 <= value < 2**63:
            raise TypeError(f"{name} must be a whole number of at most 64 bits")
    for name in _TEXTS:
        if kwargs.get(name) is not None and not isinstance(kwargs[name], str):
            raise TypeError(f"{name} must be text, not {type(kwargs[name]).__name__}")
    for name in _TIMES:
        if name in kwargs:
            value = kwargs[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a time in seconds, not {type(value).__name__}")
            try:
                kwargs[name] = float(value)
            except OverflowError:
                raise TypeError(f"{name} is past the range of a time in seconds") from None


def _failed_by_wording(messages: list[dict[str, Any]]) -> list[str]:
    """The failed calls of a run saved before they were recorded, told by how the loop
    worded them then (errors, cancellations, declines)."""
    return [str(m.get("tool_call_id")) for m in messages if m.get("role") == "tool"
            and str(m.get("content") or "").startswith(("Error", "cancelled", "The operator"))]


class StateError(Exception):
    """A saved run that cannot be used as it is (corrupt, unknown version, locked)."""


class RunExists(StateError):
    """A new run's id is taken on the store."""


def create_new(create: Callable[[RunState], None], state: RunState, *, made_up: str | None) -> None:
    """``create(state)`` (a store's ``create``). ``made_up``: the prefix ``state``'s id was made
    up with (None: the user gave it). A made-up id the store already has is replaced by
    another, a few times; a given one that exists is refused with :class:`RunExists`."""
    for attempt in range(1, _FRESH_ID_TRIES + 1):
        try:
            create(state)
            return
        except RunExists:
            if made_up is None or attempt == _FRESH_ID_TRIES:
                raise
            state.run_id = new_run_id(made_up)  # a made-up id clashed: another


# ---- transcript queries, shared by the loop, the CLI and the console --------

def pending_calls(state: RunState) -> list[dict[str, Any]]:
    """Tool calls of the last assistant message that have no tool result yet."""
    answered: set[str] = set()
    for message in reversed(state.messages):
        role = message.get("role")
        if role == "tool":
            answered.add(message.get("tool_call_id", ""))
        elif role == "assistant":
            return [c for c in message.get("tool_calls") or () if c.get("id") not in answered]
        else:
            return []
    return []
