"""The rule editor: a standing rule made from the console (issue 25).

Opened empty from the rules screen, or from a decision dialog's "always allow…" or
"always deny…", prefilled with the waiting call: its tool, its agent, and each top-level
string argument as a ``KEY=value`` pattern to edit (``path=old.log`` into ``path=*.log``).
It makes what ``tether rules add`` makes: an allow, a deny, or an ask that holds the calls
it fits for people (how many, how long, and what a passed deadline does), for any source
of runs or one. Saving checks the rule (:func:`tether.approvals.check`, the CLI's own
check; durations read by the CLI's :func:`~tether.approvals.parse_duration`): what is
refused is said in the dialog in words, naming the field, and nothing is saved; what is
only worth a warning (a tool or agent not known yet) goes with the rule to the app, which
saves it on the store and says them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.widgets import Input, Label, Select, TextArea

from tether.approvals import Checked, Rule, RuleError, check, parse_duration, parse_where
from tether.vocab.rules import MAX_APPROVALS, ON_DEADLINE, SOURCES
from tether.tui.screens.forms import FormDialog, FormSelect
from tether.tui.state.text import clean, one_line

EFFECTS = (("allow: approve at once", "allow"), ("deny: reject at once, in words", "deny"),
           ("ask: hold for people (how many, how long)", "ask"))
ANY_SOURCE = "any"
SOURCE_WORDS = {"tether": "Tether's loop", "acp": "an ACP agent",
                "program": "a program through the run API (every framework below)"}
ON_DEADLINE_WORDS = {"reject": "then reject", "stop": "then stop the run", "escalate": "then escalate"}


@dataclass(frozen=True)
class RuleContext:
    """What the editor knows around it: who makes the rule, the tools (name to JSON schema)
    and agents known here, for the check's warnings (None: unknown, no warning), and the
    call it is made from, if any (its run and agent)."""

    by: str
    tools: Mapping[str, Mapping[str, Any] | None] | None = None
    agents: tuple[str, ...] | None = None
    run_id: str | None = None
    agent: str | None = None


def glob_escape(value: str) -> str:
    """``value`` as a pattern that fits exactly it (``*``, ``?`` and ``[`` in brackets)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in value)


def where_lines(args: str) -> list[str]:
    """Each top-level string argument of a call as ``KEY=value``: the patterns to edit."""
    try:
        parsed = json.loads(args)
    except (TypeError, ValueError):
        return []
    if not isinstance(parsed, dict):
        return []
    return [f"{key}={glob_escape(value)}" for key, value in parsed.items()
            if isinstance(value, str) and "\n" not in value and "=" not in key and not key.startswith("/")]


class RuleEditor(FormDialog):
    """Make a standing rule; dismisses with a :class:`tether.approvals.Checked` (the rule,
    not saved yet, and its warnings), or None."""

    BINDINGS = [Binding("ctrl+s", "save", "Save", priority=True, id="rule_editor.save")]

    def __init__(self, context: RuleContext, *, effect: str = "allow", tool: str = "", args: str = "") -> None:
        super().__init__()
        self.context = context
        self.effect = effect
        self.tool = tool
        self.where = where_lines(args) if args else []

    def compose(self) -> ComposeResult:
        context = self.context
        made_from = context.run_id is not None
        title = f"Always {self.effect} {clean(self.tool)}…" if made_from else "New rule"
        scopes: list[tuple[str, str]] = []
        if context.run_id:
            scopes.append((f"this run ({one_line(context.run_id, 40)})", f"run:{context.run_id}"))
        scopes.append(("this agent (the agent named above)", "agent"))
        scopes.append(("the whole store", "store"))
        with Vertical(classes="dialog", id="rule-editor"):
            yield Label(Text(title, style="bold"), classes="dialog-title")
            with Grid(classes="form"):
                yield Label("Effect")
                yield FormSelect(EFFECTS, value=self.effect if self.effect in {e for _, e in EFFECTS} else "allow",
                                 allow_blank=False, id="effect")
                yield Label("Ask for")
                with Horizontal(id="ask-row"):
                    idle = self.effect != "ask"  # how many people and how long: for an ask only
                    yield FormSelect([(f"{n} {'person' if n == 1 else 'people'}", n)
                                      for n in range(1, MAX_APPROVALS + 1)],
                                     value=1, allow_blank=False, id="people", disabled=idle)
                    yield Input(placeholder="deadline: blank none; 10m, 2h", id="deadline", disabled=idle)
                    yield FormSelect([(ON_DEADLINE_WORDS.get(o, o), o) for o in ON_DEADLINE], value="reject",
                                     allow_blank=False, id="on-deadline", disabled=idle)
                yield Label("Tool")
                yield Input(value=self.tool, placeholder="a tool's name, or a glob: delete_file, fs.*", id="tool")
                yield Label("Agent")
                yield Input(value=context.agent or "", placeholder="blank: any agent", id="agent")
                yield Label("Source")
                yield FormSelect([("any source of runs", ANY_SOURCE)]
                                 + [(f"{s}: {SOURCE_WORDS[s]}" if s in SOURCE_WORDS else s, s) for s in SOURCES],
                                 value=ANY_SOURCE, allow_blank=False, id="source")
                yield Label("Scope")
                yield FormSelect(scopes, value="agent" if context.agent else "store", allow_blank=False, id="scope")
                yield Label("Expires in")
                yield Input(placeholder="blank: never; or 90s, 10m, 2h, 7d", id="expires")
                yield Label("Reason")
                yield Input(placeholder="why (required): what a decision by this rule shows", id="reason")
            yield Label("Arguments: one KEY=GLOB a line, every one must fit (blank: any arguments)",
                        classes="field-label")
            yield TextArea("\n".join(self.where), id="where", classes="where", soft_wrap=False)
            yield from self.form_footer("Save rule",
                                        "ctrl+s or Enter in a field saves · Tab moves · Esc cancels")

    def on_mount(self) -> None:
        self.query_one("#reason" if self.tool else "#tool", Input).focus()

    @on(Select.Changed, "#effect")
    def _effect_changed(self, event: Select.Changed) -> None:
        """How many people and how long apply to an ask only: greyed out for an allow or a
        deny (what was typed there stays, for a change of mind)."""
        for name in ("people", "deadline", "on-deadline"):
            self.query_one(f"#{name}").disabled = event.value != "ask"

    def action_save(self) -> None:
        self._submit()

    def request(self) -> Checked:
        tool, agent, reason, expires, deadline = (self.query_one(f"#{name}", Input).value.strip()
                                                  for name in ("tool", "agent", "reason", "expires", "deadline"))
        if not tool:
            raise ValueError("name the tool the rule is for (a glob: delete_file, fs.*, *)")
        if not reason:
            raise ValueError("say why in Reason: it is what every decision by this rule shows")
        scope = str(self.query_one("#scope", Select).value)
        if scope == "agent" and not agent:
            raise ValueError("the scope 'this agent' needs the agent's name in Agent (or choose the whole store)")
        effect = str(self.query_one("#effect", Select).value)
        source = str(self.query_one("#source", Select).value)
        asks = effect == "ask"
        try:
            where = tuple(parse_where(line.strip()) for line in self.query_one("#where", TextArea).text.splitlines()
                          if line.strip())
            seconds = _duration("Expires in", expires)
            rule = Rule(effect, tool, reason, self.context.by,  # type: ignore[arg-type]
                        agent=agent or None, where=where, scope=scope,
                        source=None if source == ANY_SOURCE else source,  # type: ignore[arg-type]
                        expires=None if seconds is None else time.time() + seconds,
                        approvals=int(self.query_one("#people", Select).value) if asks else 1,  # type: ignore[arg-type]
                        deadline_s=_duration("Deadline", deadline) if asks else None,
                        on_deadline=str(self.query_one("#on-deadline", Select).value) if asks else "reject")  # type: ignore[arg-type]
            return check(rule, tools=self.context.tools, agents=self.context.agents)
        except RuleError as exc:
            raise ValueError(str(exc)) from None


def _duration(field: str, text: str) -> float | None:
    """``text`` as seconds, read as ``tether rules add`` reads it (None when blank); a
    RuleError that names the field when it is not a duration."""
    if not text:
        return None
    try:
        return parse_duration(text)
    except RuleError as exc:
        raise RuleError(f"{field}: {exc}") from None
