"""Standing rules: decisions an operator makes once, for every call they fit.

A rule says ``allow``, ``deny`` or ``ask`` for the calls of a tool (a glob over its name),
optionally only those of one agent, of one source of runs (Tether's loop, an ACP agent,
a program reporting through the run API), or whose arguments fit patterns
(``path=*.log``; a key is an argument's name or a JSON pointer, ``/options/force``). Its
scope is one run, one agent, or the whole store. It carries why, who made it and when, and
may expire. An ``ask`` rule decides nothing by itself: it marks calls that need a person,
and says how many people (two for a production deploy) and how long they have.

Which rule decides a call (:func:`decide`): of the rules that fit it, a ``deny`` beats an
``ask``, and an ``ask`` beats an ``allow``, whatever their scopes. A rule can therefore
only make a call *more* guarded than a wider rule of a weaker effect, never less: an allow
for one agent cannot undo a deny for the store. Among the rules of the winning effect, the
narrowest is the one cited (run scope over agent over store, then more argument patterns,
then a named agent or source, then a tool named without wildcards), and at a tie the newest.
:func:`explain` says all of that in words for one call.

Rules live on the store (:meth:`tether.store.protocol.Store.rules`), so every process on every
host that shares it sees one set. Nothing here reads or writes a store.
"""

from __future__ import annotations

import fnmatch
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Effect = Literal["allow", "deny", "ask"]
Source = Literal["tether", "acp", "program", "openai-agents", "pydantic-ai", "claude-code"]
OnDeadline = Literal["reject", "stop", "escalate"]

EFFECTS: tuple[Effect, ...] = ("allow", "deny", "ask")
SOURCES: tuple[Source, ...] = ("tether", "acp", "program", "openai-agents", "pydantic-ai", "claude-code")
PROGRAMS = frozenset({"program", "openai-agents", "pydantic-ai", "claude-code"})
"""The sources that report through the run API: a rule for ``program`` fits them all."""
ON_DEADLINE: tuple[OnDeadline, ...] = ("reject", "stop", "escalate")
_STRENGTH = {"deny": 2, "ask": 1, "allow": 0}
_SCOPE_RANK = {"run": 2, "agent": 1, "store": 0}
MAX_APPROVALS = 5


class RuleError(ValueError):
    """A rule that cannot be made (or found), in words that say how to fix it."""


@dataclass(frozen=True, slots=True)
class Where:
    """One argument pattern: ``key`` is an argument's name or a JSON pointer (``/a/b``),
    ``glob`` an fnmatch pattern over its value (a value that is not a string is matched as
    its JSON: ``true``, ``3``, ``["a"]``)."""

    key: str
    glob: str

    def __str__(self) -> str:
        return f"{self.key}={self.glob}"

    @property
    def pointer(self) -> tuple[str, ...]:
        if not self.key.startswith("/"):
            return (self.key,)
        return tuple(part.replace("~1", "/").replace("~0", "~") for part in self.key[1:].split("/"))

    def value_in(self, args: Mapping[str, Any]) -> str | None:
        """The argument's value as text, or None when the call has no such argument."""
        value: Any = args
        for part in self.pointer:
            if isinstance(value, Mapping) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                return None
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))

    def fits(self, args: Mapping[str, Any]) -> bool:
        value = self.value_in(args)
        return value is not None and fnmatch.fnmatchcase(value, self.glob)


def parse_where(text: str) -> Where:
    """``KEY=GLOB`` as typed after ``--where``."""
    key, sep, glob = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise RuleError(f"--where {text!r}: write KEY=GLOB, such as path=*.log or /options/force=true")
    if key.startswith("/") and "" in key[1:].split("/"):
        raise RuleError(f"--where {text!r}: the JSON pointer {key!r} has an empty step, so it can never match")
    if not glob:
        raise RuleError(f"--where {text!r}: the pattern is empty, so it can only match an empty value; "
                        "write KEY=* for any value")
    _compile(glob, f"--where {text!r}")
    return Where(key, glob)


def _compile(glob: str, what: str) -> None:
    try:
        re.compile(fnmatch.translate(glob))
    except re.error as exc:
        raise RuleError(f"{what}: the pattern {glob!r} can never match ({exc})") from None


@dataclass(frozen=True, slots=True)
class Call:
    """What a rule is matched against: one call waiting for approval."""

    tool: str
    args: Mapping[str, Any]
    agent: str
    source: Source = "tether"
    run_id: str = ""


@dataclass(frozen=True, slots=True)
class Rule:
    """One standing rule. ``id`` is given by the store (``R1``, ``R2``…)."""

    effect: Effect
    tool: str
    reason: str
    by: str
    id: str = ""
    agent: str | None = None
    where: tuple[Where, ...] = ()
    source: Source | None = None
    scope: str = "store"
    """``store``, ``agent`` (the named agent's runs) or ``run:ID``."""
    created: float = field(default_factory=time.time)
    expires: float | None = None
    approvals: int = 1
    """How many different people an ``ask`` rule's calls need."""
    deadline_s: float | None = None
    """How long an ``ask`` rule's calls wait for people, then :attr:`on_deadline`."""
    on_deadline: OnDeadline = "reject"

    # ---- matching ---------------------------------------------------------------
    @property
    def run_id(self) -> str | None:
        return self.scope[4:] if self.scope.startswith("run:") else None

    def expired(self, now: float | None = None) -> bool:
        return self.expires is not None and self.expires <= (time.time() if now is None else now)

    def misses(self, call: Call) -> str | None:
        """Why this rule does not fit ``call``, or None when it does."""
        if not fnmatch.fnmatchcase(call.tool, self.tool):
            return f"the tool {call.tool} is not {self.tool}"
        if self.agent is not None and call.agent != self.agent:
            return f"the agent is {call.agent}, not {self.agent}"
        if self.source is not None and call.source != self.source \
                and not (self.source == "program" and call.source in PROGRAMS):
            return f"the run's source is {call.source}, not {self.source}"
        if self.run_id is not None and call.run_id != self.run_id:
            return f"it applies to run {self.run_id} only"
        for where in self.where:
            value = where.value_in(call.args)
            if value is None:
                return f"the call has no argument {where.key}"
            if not fnmatch.fnmatchcase(value, where.glob):
                return f"{where.key} is {value!r}, which does not fit {where.glob!r}"
        return None

    @property
    def narrowness(self) -> tuple[int, ...]:
        scope = "run" if self.run_id else self.scope
        return (_SCOPE_RANK.get(scope, 0), len(self.where), self.agent is not None, self.source is not None,
                not any(c in self.tool for c in "*?["))

    # ---- words ---------------------------------------------------------------------
    def note(self) -> str:
        """A decision's words when this rule makes it: ``delete scratch logs; alice, 2026-12-03``."""
        return f"{self.reason}; {self.by}, {time.strftime('%Y-%m-%d', time.localtime(self.created))}"

    def cited(self) -> str:
        """How a decision names the rule: ``rule R3 (delete scratch logs; alice, 2026-12-03)``."""
        return f"rule {self.id} ({self.note()})"

    def describe(self) -> str:
        """The rule as one line of ``tether rules``: what it fits and what it does."""
        fits = [self.tool]
        if self.where:
            fits.append("where " + ", ".join(map(str, self.where)))
        if self.agent:
            fits.append(f"agent {self.agent}")
        if self.source:
            fits.append(f"source {self.source}")
        what = self.effect
        if self.effect == "ask":
            what = f"ask {self.approvals} {'person' if self.approvals == 1 else 'people'}"
            if self.deadline_s:
                what += f", {self.on_deadline} after {format_duration(self.deadline_s)}"
        return f"{what} {' '.join(fits)}"

    # ---- on the store --------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["where"] = [str(w) for w in self.where]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Rule":
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        values["where"] = tuple(parse_where(w) for w in data.get("where") or ())
        return cls(**values)


# ---- making a rule: bad input is refused in words -------------------------------------

@dataclass(frozen=True, slots=True)
class Checked:
    """A rule ready to add, with what is worth a warning (a tool or agent not known yet:
    tools can appear later, so that is not refused)."""

    rule: Rule
    warnings: tuple[str, ...] = ()


def check(rule: Rule, *, tools: Mapping[str, Mapping[str, Any] | None] | None = None,
          agents: Iterable[str] | None = None, now: float | None = None) -> Checked:
    """Refuse a rule that is malformed, can never match or has expired; warn about a tool or
    agent that nobody knows yet. ``tools`` maps the tools known here to their JSON schemas
    (None: unknown schema); ``agents``, the agents' names."""
    now = time.time() if now is None else now
    if rule.effect not in EFFECTS:
        raise RuleError(f"a rule allows, denies or asks; not {rule.effect!r}")
    if not rule.tool.strip():
        raise RuleError("name the tool the rule is for (a glob: delete_file, fs.*, *)")
    _compile(rule.tool, "the tool")
    if not rule.reason.strip():
        raise RuleError("say why, with --reason TEXT: the reason is what a decision by this rule shows")
    if rule.source is not None and rule.source not in SOURCES:
        raise RuleError(f"--source is one of {', '.join(SOURCES)}; not {rule.source!r}")
    if rule.scope == "agent" and not rule.agent:
        raise RuleError("--scope agent needs --agent NAME: the agent whose runs the rule is for")
    if rule.scope not in ("store", "agent") and not (rule.scope.startswith("run:") and len(rule.scope) > 4):
        raise RuleError(f"--scope is run:ID, agent or store; not {rule.scope!r}")
    if rule.expires is not None and rule.expires <= now:
        raise RuleError("the expiry is in the past: the rule would never apply")
    if not 1 <= rule.approvals <= MAX_APPROVALS:
        raise RuleError(f"--approvals is a number of people from 1 to {MAX_APPROVALS}; not {rule.approvals}")
    if rule.effect != "ask" and (rule.approvals != 1 or rule.deadline_s is not None):
        raise RuleError("--approvals and --deadline are for --ask rules: an allow or a deny decides at once")
    if rule.deadline_s is not None and not rule.deadline_s > 0:
        raise RuleError("--deadline is a duration, such as 10m or 2h")
    if rule.on_deadline not in ON_DEADLINE:
        raise RuleError(f"--on-deadline is one of {', '.join(ON_DEADLINE)}; not {rule.on_deadline!r}")
    for where in rule.where:
        _compile(where.glob, f"--where {where}")
    warnings: list[str] = []
    if tools is not None:
        named = [name for name in tools if fnmatch.fnmatchcase(name, rule.tool)]
        if not named:
            warnings.append(f"no tool known here is named {rule.tool!r} (known: {', '.join(sorted(tools)) or 'none'});"
                            " the rule applies if one appears later")
        for where in rule.where:
            schemas = [tools[name] for name in named if tools[name] is not None]
            if schemas and all(_never_has(schema, where) for schema in schemas):  # type: ignore[arg-type]
                arguments = sorted({k for s in schemas for k in (s or {}).get("properties", {})})  # type: ignore[union-attr]
                raise RuleError(f"--where {where}: {rule.tool} has no argument {where.key!r} (its arguments: "
                                f"{', '.join(arguments) or 'none'}), so the rule can never match")
    if agents is not None and rule.agent is not None and rule.agent not in set(agents):
        warnings.append(f"no agent named {rule.agent!r} is known here; the rule applies if one appears later")
    return Checked(rule, tuple(warnings))


def _never_has(schema: Mapping[str, Any], where: Where) -> bool:
    """True when a tool with ``schema`` can never be called with the argument ``where`` names."""
    first = where.pointer[0]
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or first in properties:
        return False
    return schema.get("additionalProperties") is False or "additionalProperties" not in schema


# ---- deciding a call ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Verdict:
    """What the standing rules say of one call: the rule that decides it (an allow or a
    deny decides; an ask says how it must be decided), and every rule that fit."""

    rule: Rule
    fitting: tuple[Rule, ...]

    @property
    def effect(self) -> Effect:
        return self.rule.effect

    def words(self) -> str:
        """What a decision by this rule says: ``approved by rule R3 (…)``."""
        verb = {"allow": "approved", "deny": "rejected", "ask": "held for people"}[self.rule.effect]
        return f"{verb} by {self.rule.cited()}"


def decide(rules: Sequence[Rule], call: Call, *, now: float | None = None) -> Verdict | None:
    """The rule that decides ``call``, or None when no rule fits it (a person decides)."""
    now = time.time() if now is None else now
    fitting = [r for r in rules if not r.expired(now) and r.misses(call) is None]
    if not fitting:
        return None
    best = max(fitting, key=lambda r: (_STRENGTH[r.effect], r.narrowness, r.created, r.id))
    return Verdict(best, tuple(fitting))


def explain(rules: Sequence[Rule], call: Call, *, now: float | None = None) -> list[str]:
    """Why each rule did or did not decide ``call``, one line a rule, the deciding one first."""
    now = time.time() if now is None else now
    verdict = decide(rules, call, now=now)
    lines: list[str] = []
    if verdict is None:
        lines.append(f"no rule fits {call.tool} for agent {call.agent}: a person decides")
    else:
        lines.append(f"{verdict.rule.id} decides: {verdict.rule.effect} ({verdict.rule.describe()}; "
                     f"{verdict.rule.reason}; {verdict.rule.by})")
        for other in verdict.fitting:
            if other is verdict.rule:
                continue
            if _STRENGTH[other.effect] < _STRENGTH[verdict.rule.effect]:
                why = f"{verdict.rule.effect} beats {other.effect}"
            else:
                why = f"{verdict.rule.id} is narrower" if other.narrowness < verdict.rule.narrowness else \
                    f"{verdict.rule.id} is newer"
            lines.append(f"{other.id} fits too, but {why}")
    for rule in rules:
        if verdict is not None and rule in verdict.fitting:
            continue
        why = "it expired " + _date(rule.expires) if rule.expired(now) else rule.misses(call)
        lines.append(f"{rule.id} does not fit: {why}")
    return lines


def _date(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


# ---- durations: 90s, 10m, 2h, 7d, 1h30m ----------------------------------------------

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """Seconds in ``text``: ``90s``, ``10m``, ``2h``, ``7d``, ``1h30m`` (a bare number is
    seconds). Refused in words when it is not one, or not above zero."""
    cleaned = text.strip().lower()
    try:
        seconds = float(cleaned)
    except ValueError:
        parts = _DURATION.findall(cleaned)
        if not parts or _DURATION.sub("", cleaned).strip():
            raise RuleError(f"{text!r} is not a duration: write 90s, 10m, 2h, 7d or 1h30m") from None
        seconds = sum(float(n) * _UNIT_S[unit] for n, unit in parts)
    if not (seconds > 0 and seconds < float("inf")):
        raise RuleError(f"{text!r} is not a duration above zero")
    return seconds


def format_duration(seconds: float) -> str:
    """``600`` -> ``10 min``, ``300.2`` -> ``5 min``: how deadlines are worded (one decimal at most)."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{_short(seconds / size)} {unit}"
    return f"{_short(seconds)} s"


def _short(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")

