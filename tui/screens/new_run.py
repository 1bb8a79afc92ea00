"""The New run dialog (``n``): an agent of the agent file or a demo scenario (or, with
``--base-url``, a model at that endpoint), its task, limits and policies, its isolation; for an
ACP agent, a session of its own to go on from, its mode and its model (asked of the agent
while the dialog is up). It dismisses with a :class:`NewRunRequest`, or None (Esc)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Input, Label, Select, Static

from tether.vocab.state import Limits, Policies
from tether.tui.screens.forms import FormDialog, FormSelect, parse_int, parse_money
from tether.tui.state.choices import AgentChoice
from tether.tui.state.text import clean, one_line


@dataclass
class NewRunRequest:
    """What the New run dialog asks for. ``model`` is a demo scenario or, with the console's
    ``--base-url``, a model at that endpoint; ``agent`` names an agent of the agent file
    instead (``model`` is then only its model, for show). ``prompt`` None is the agent's
    own task; ``limits``/``policies`` None are the agent's own."""

    model: str
    prompt: str | None = None
    limits: Limits | None = None
    policies: Policies | None = None
    agent: str | None = None
    isolation: str | None = None
    """``none``, ``worktree`` or ``copy`` (``run --isolate``); None: the agent's own."""
    session: str | None = None
    """An ACP agent's own earlier session the run goes on in (``Harness.create(adopt=…)``); None: a new one."""
    mode: str | None = None
    """An ACP agent's session mode for this run instead of its file's; None: the file's."""
    acp_model: str | None = None
    """An ACP agent's model for this run instead of its file's; None: the file's."""



OfferAsk = Callable[[str], Awaitable[Any]]
"""What New run asks of an ACP agent of the agent file, by its name: its
:class:`~tether.acp.offer.AgentOffer` (sessions, modes, models), asked off the dialog's loop."""

NEW_SESSION = "(new)"
AGENTS_OWN = ""
_ACP_ROWS = ("session", "mode", "acp-model")  # shown for an ACP agent
_LOOP_ROWS = ("tool-errors", "dedupe")  # Tether's own loop's policies: not for an ACP agent


def _matching(wanted: str | None, values: Sequence[tuple[str, str]]) -> str | None:
    """The value of ``values`` (each ``(value, name)``) the agent file's ``wanted`` model is:
    the same value, one with a provider's prefix, or the one of that name."""
    if not wanted:
        return None
    for value, name in values:
        if wanted in (value, name) or value.endswith("/" + wanted):
            return value
    return None


ISOLATIONS = [("none: in the agent's own folder", "none"), ("worktree: a git worktree of its own", "worktree"),
              ("copy: a copy of the agent's folder", "copy")]
"""Where a run works (``run --isolate``; docs/workspaces.md), as the New run dialog offers it."""


def _fields(choice: AgentChoice) -> dict[str, str]:
    """The limits and policies fields as a choice's own settings fill them."""
    limits, policies = choice.limits, choice.policies
    return {
        "#max-turns": "" if limits.max_turns is None else str(limits.max_turns),
        "#budget": "" if limits.budget_usd is None else f"{limits.budget_usd:g}",
        "#budget-mode": limits.budget_mode,
        "#tool-errors": policies.tool_errors,
        "#dedupe": policies.dedupe,
        "#isolation": choice.isolation,
    }


class NewRunDialog(FormDialog):
    """Choose an agent (the agent file's, then the demo scenarios; with ``--base-url``, a
    model at that endpoint), type its task (blank: the agent's own), set its limits and
    policies (filled with the chosen agent's own; a field the operator changed stays as
    typed when another agent is chosen)."""

    def __init__(self, choices: Sequence[AgentChoice], *, base_url: str | None = None,
                 default_model: str | None = None, initial: tuple[str, str] | str | None = None,
                 offer: OfferAsk | None = None) -> None:
        super().__init__()
        if not choices:
            raise ValueError("the New run dialog needs at least one agent to offer")
        self.offer_of = offer
        self.offers: dict[str, Any] = {}
        """What each ACP agent offered, asked once while the dialog is open."""
        self._defaults: tuple[str, str] = (AGENTS_OWN, AGENTS_OWN)  # the mode and model a run gets unchanged
        self.choices = {choice.key: choice for choice in choices}
        self.base_url = base_url
        self.default_model = default_model
        self.initial = self._initial_key(initial)
        self.preselected = initial is not None and self.initial is not None
        self._applied = self.choices[self.initial or next(iter(self.choices))]

    def _initial_key(self, initial: tuple[str, str] | str | None) -> tuple[str, str] | None:
        if isinstance(initial, tuple):
            return initial if initial in self.choices else None
        if isinstance(initial, str):  # a name: the agent file's agent first, then a demo scenario
            for kind in ("agent", "demo"):
                if (kind, initial) in self.choices:
                    return (kind, initial)
            return None
        models = [key for key in self.choices if key[0] == "model"]
        return models[0] if models else None  # with --base-url, the model at it, as before

    @property
    def choice(self) -> AgentChoice:
        """The agent chosen now."""
        value = self.query_one("#agent", Select).value
        return self.choices.get(value, self._applied)  # type: ignore[arg-type]

    def compose(self) -> ComposeResult:
        first = self._applied
        filled = _fields(first)
        with Vertical(classes="dialog", id="new-run"):
            yield Label(Text("New run", style="bold"), classes="dialog-title")
            with Grid(classes="form"):
                yield Label("Agent")
                yield FormSelect([(choice.label(), key) for key, choice in self.choices.items()],
                                 value=first.key, allow_blank=False, id="agent")
                if self.base_url:
                    yield Label("Model")
                    yield Input(value=self.default_model or "", placeholder=f"a model at {self.base_url}",
                                id="model", disabled=first.kind != "model")
                yield Label("Session", id="session-label")
                yield FormSelect([("a new session", NEW_SESSION)], value=NEW_SESSION, allow_blank=False, id="session")
                yield Label("Mode", id="mode-label")
                yield FormSelect([("the agent's own", AGENTS_OWN)], value=AGENTS_OWN, allow_blank=False, id="mode")
                yield Label("Agent's model", id="acp-model-label")
                yield FormSelect([("the agent's own", AGENTS_OWN)], value=AGENTS_OWN, allow_blank=False,
                                 id="acp-model")
                yield Label("Task")
                yield Input(placeholder=self._task_placeholder(first), id="prompt")
                yield Label("Max turns")
                yield Input(value=filled["#max-turns"], placeholder="blank: no cap", id="max-turns")
                yield Label("Budget (USD)")
                yield Input(value=filled["#budget"], placeholder="blank: no budget, e.g. 0.01", id="budget")
                yield Label("Budget mode")
                yield FormSelect([("soft: check before each turn", "soft"),
                                  ("strict: reserve the next turn's worst case", "strict")],
                                 value=filled["#budget-mode"], allow_blank=False, id="budget-mode")
                yield Label("Tool errors", id="tool-errors-label")
                yield FormSelect([("descriptive: the error's own words", "descriptive"),
                                  ("generic: just \"Error\"", "generic"),
                                  ("fatal: the run fails", "fatal")],
                                 value=filled["#tool-errors"], allow_blank=False, id="tool-errors")
                yield Label("Dedupe", id="dedupe-label")
                yield FormSelect([("read-only tools", "read-only"), ("all tools", "all"), ("off", "off")],
                                 value=filled["#dedupe"], allow_blank=False, id="dedupe")
                yield Label("Isolation")
                yield FormSelect(ISOLATIONS, value=filled["#isolation"], allow_blank=False, id="isolation")
            yield Static(self._detail(first), id="agent-detail")
            yield Static("", id="offer-note")
            yield from self.form_footer("Start", "Enter in a field starts the run · Space opens a list · "
                                                 "Esc cancels")

    @staticmethod
    def _task_placeholder(choice: AgentChoice) -> str:
        if choice.prompt:
            return f"blank: {one_line(choice.prompt, 60)}"
        return "what the agent should do (it has no task of its own)"

    @staticmethod
    def _detail(choice: AgentChoice) -> Text:
        if choice.problem:
            return Text(one_line(choice.problem, 400), style="red")
        return Text(clean(choice.detail), style="dim")

    def on_mount(self) -> None:
        if self.preselected or len(self.choices) == 1:  # the agent is known: straight to its task
            target = "#model" if self._applied.kind == "model" and not self.default_model else "#prompt"
            self.query_one(target, Input).focus()
        else:
            self.query_one("#agent", Select).focus()
        self._acp_rows(self._applied)

    # ---- an ACP agent's sessions, modes and models ----------------------------------

    def _acp_rows(self, choice: AgentChoice) -> None:
        """Show the rows that apply to ``choice`` (an ACP agent's, or Tether's own loop's), and
        ask an ACP agent what it offers, off the dialog's loop."""
        for row in _ACP_ROWS:
            self.query_one(f"#{row}-label").display = self.query_one(f"#{row}").display = choice.acp
        for row in _LOOP_ROWS:
            self.query_one(f"#{row}-label").display = self.query_one(f"#{row}").display = not choice.acp
        self._fill(choice, None)
        if not choice.acp or self.offer_of is None:
            self._note(None)
            return
        if choice.name in self.offers:
            self._fill(choice, self.offers[choice.name])
            return
        self._note(Text(f"asking {choice.name} for its sessions, modes and models…", style="dim"))
        self.run_worker(self._ask(choice), group="offer", exclusive=True, exit_on_error=False)

    async def _ask(self, choice: AgentChoice) -> None:
        assert self.offer_of is not None
        try:
            offer = await self.offer_of(choice.name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an agent is another program: whatever it does, the dialog stays
            if self._applied.key == choice.key:
                self._note(Text(f"{choice.name} could not be asked: {one_line(exc, 300)}", style="red"))
            return
        self.offers[choice.name] = offer
        if self._applied.key == choice.key:
            self._fill(choice, offer)

    def _fill(self, choice: AgentChoice, offer: Any) -> None:
        """The Session, Mode and model lists as ``offer`` (None: not known yet) gives them, set
        to a new session and the agent file's mode and model (else the agent's own)."""
        sessions: list[tuple[str | Text, str]] = [("a new session", NEW_SESSION)]
        modes: list[tuple[str | Text, str]] = [("the agent's own", AGENTS_OWN)]
        models: list[tuple[str | Text, str]] = [("the agent's own", AGENTS_OWN)]
        mode = model = AGENTS_OWN
        if offer is not None:
            # lazy: the acp package, loaded only once an ACP agent's offer is in (the run's action asked it)
            from tether.acp.offer import session_words

            if offer.adopts:
                sessions += [(Text(clean(f"{s['sessionId']} · {session_words(s, offer.workspace)}")),
                              str(s["sessionId"])) for s in offer.sessions if s.get("sessionId")]
            if offer.modes:
                modes = [(clean(f"{m['name']} ({m['id']})"), str(m["id"])) for m in offer.modes]
                ids = [m["id"] for m in offer.modes]
                mode = choice.acp_mode if choice.acp_mode in ids else (offer.mode or ids[0])
            if offer.models:
                models = [(clean(name if name == value else f"{name} ({value})"), value)
                          for value, name in offer.models]
                model = _matching(choice.acp_model, offer.models) or offer.model or offer.models[0][0]
            self._note(Text(self._offer_words(offer), style="dim"))
        self._defaults = (mode, model)
        for selector, options, value in (("#session", sessions, NEW_SESSION), ("#mode", modes, mode),
                                         ("#acp-model", models, model)):
            widget = self.query_one(selector, Select)
            widget.set_options(options)
            widget.value = value
        self._session_picked()

    def _note(self, text: Text | None) -> None:
        """The line under the agent's detail that says what it offers (none: no line)."""
        note = self.query_one("#offer-note", Static)
        note.update(text or "")
        note.display = text is not None

    @staticmethod
    def _offer_words(offer: Any) -> str:
        if not offer.lists:
            listed = "it does not list its sessions (session/list)"
        elif not offer.adopts:
            listed = f"{len(offer.sessions)} earlier session(s), which it can go on in by neither resume nor load"
        else:
            listed = (f"{len(offer.sessions)} earlier session(s) in {offer.workspace}: one picked goes on by "
                      f"{offer.adopts}")
        return f"{offer.agent}: {listed}" + (f"; {offer.problem}" if offer.problem else "")

    @on(Select.Changed, "#session")
    def _session_picked(self) -> None:
        """A session picked keeps the mode and model it had, and works in the agent's own folder
        (the session's): those lists are for a new session."""
        new = self.query_one("#session", Select).value == NEW_SESSION
        for selector in ("#mode", "#acp-model", "#isolation"):
            self.query_one(selector, Select).disabled = not new

    @on(Select.Changed, "#agent")
    def _agent_changed(self, event: Select.Changed) -> None:
        new = self.choices.get(event.value)  # type: ignore[arg-type]
        if new is None:
            return
        old, self._applied = self._applied, new
        was, now = _fields(old), _fields(new)
        for selector, value in now.items():
            widget = self.query_one(selector)
            if isinstance(widget, Input) and widget.value == was[selector]:
                widget.value = value
            elif isinstance(widget, Select) and widget.value == was[selector]:
                widget.value = value
        self.query_one("#prompt", Input).placeholder = self._task_placeholder(new)
        if self.base_url:
            self.query_one("#model", Input).disabled = new.kind != "model"
        self.query_one("#agent-detail", Static).update(self._detail(new))
        self.query_one("#error", Static).update("")
        self._acp_rows(new)

    def request(self) -> NewRunRequest:
        choice = self.choice
        if choice.problem:
            raise ValueError(choice.problem)
        max_turns = parse_int(self.query_one("#max-turns", Input).value, "max turns")
        budget = parse_money(self.query_one("#budget", Input).value, "budget")
        if max_turns is None and budget is None:
            raise ValueError("give a turn cap or a budget: a run with neither can run forever")
        mode = self.query_one("#budget-mode", Select).value
        limits = replace(choice.limits, max_turns=max_turns, budget_usd=budget, budget_mode=mode)  # type: ignore[arg-type]
        policies = replace(choice.policies, auto_approve=list(choice.policies.auto_approve),
                           tool_errors=self.query_one("#tool-errors", Select).value,  # type: ignore[arg-type]
                           dedupe=self.query_one("#dedupe", Select).value)  # type: ignore[arg-type]
        prompt = self.query_one("#prompt", Input).value.strip() or None
        chosen = str(self.query_one("#isolation", Select).value)
        isolation = None if chosen == choice.isolation else chosen
        if choice.kind == "model":
            model = self.query_one("#model", Input).value.strip()
            if not model or not prompt:
                raise ValueError("give a model name and a task")
            return NewRunRequest(model, prompt, limits, policies, isolation=isolation)
        if prompt is None and not choice.prompt:
            raise ValueError(f"{choice.name} has no task of its own: type one in Task")
        if choice.kind == "agent" and choice.acp:
            session = str(self.query_one("#session", Select).value)
            if session != NEW_SESSION:  # it keeps its mode and model, and works in the agent's folder
                return NewRunRequest(choice.model, prompt, limits, policies, agent=choice.name, session=session)
            mode, model = (str(self.query_one(s, Select).value) for s in ("#mode", "#acp-model"))
            return NewRunRequest(choice.model, prompt, limits, policies, agent=choice.name, isolation=isolation,
                                 mode=None if mode == self._defaults[0] else mode,
                                 acp_model=None if model == self._defaults[1] else model)
        if choice.kind == "agent":
            return NewRunRequest(choice.model, prompt, limits, policies, agent=choice.name, isolation=isolation)
        return NewRunRequest(choice.name, prompt, limits, policies, isolation=isolation)
