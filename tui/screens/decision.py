"""The decision dialogs: approve or reject one call waiting for approval.

Each shows the call (tool, arguments, why), what it would change (its preview: a diff, a
summary, or that the preview failed, which does not stand in the way), how many people it
needs and who approved so far (``1 of 2 approved (alice)``), and its deadline (``rejects in
9 min``). From Approve, ``e`` (where no text field has the focus, as on the console) or
``ctrl+e`` (anywhere) edits the arguments before approving (not for an ACP agent's call: the
protocol has no way to change them). "Always allow…" and "Always deny…" make a
standing rule from the call (:mod:`.rule_editor`) that decides it and the calls like it.

Enter is ignored for a short grace period after the dialog opens, so a stray Enter meant
for something else cannot approve a deletion.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, Select, Static

from tether.approvals import Checked
from tether.vocab.state import NeedsApproval
from tether.tui.state.agent_notes import Ask, Option
from tether.tui.state.options import GRACE_S
from tether.tui.widgets.approval_view import (
    deadline_words, diff_summary, diff_text, preview_body, preview_heading, tally_words,
)
from tether.tui.screens.args_editor import ArgsEditor
from tether.tui.screens.forms import Dialog, kv
from tether.tui.screens.rule_editor import RuleContext, RuleEditor
from tether.tui.state.text import clean, one_line, pretty_args

ACP_NO_EDIT = ("an ACP agent's call cannot be approved with other arguments: the protocol offers no way to "
               "change them; approve or reject it as the agent asked")


@dataclass(frozen=True)
class DecisionAnswer:
    """What a decision dialog returns when there is more than its words: the ACP agent's
    option to answer with (None: allow once for Approve, reject once for Reject, as the run
    picks by itself), the operator's edited arguments (JSON), or a standing rule to save
    that then decides the call (its effect says approve or reject). A dialog on Tether's
    own call answered plainly returns the words alone."""

    text: str
    option: str | None = None
    args: str | None = None
    rule: Checked | None = None
    scope: str | None = None
    """With an ACP agent's "always" option: the scope of the rule Tether keeps of it."""


class _DecisionDialog(Dialog):
    """Approve or reject one pending call; Enter confirms once the grace period is over.

    For an ACP agent's permission request (``ask``: its options and diff), it also shows
    the diff the agent proposes and every option it offers, with its kind. Enter (and the
    main button) answers allow once, or reject once; a button per other option of the
    same family (allow always, reject always) answers with that one. ``acp``: the run's
    agent speaks ACP (its request may not have been seen yet). ``rules``: what the rule
    editor needs to make a rule from the call (None: no "always" choices)."""

    AUTO_FOCUS = "#text"
    """The note (or reason) field has the focus from the start: Textual would give it to the
    first focusable widget, a scrolling diff, and scroll the call down to it."""

    verb = "Approve"
    approves = True
    field_label = "Note (optional)"
    placeholder = "why you approve, kept with the decision"
    button_variant = "success"
    always: tuple[str, ...] = ("allow", "deny")

    def __init__(self, run_id: str, waiting: NeedsApproval, grace_s: float = GRACE_S, ask: Ask | None = None, *,
                 acp: bool = False, rules: RuleContext | None = None) -> None:
        super().__init__()
        self.run_id = run_id
        self.waiting = waiting
        self.call_id = waiting.call_id
        self.tool = waiting.tool_name
        self.args = waiting.args
        self.why = waiting.why
        self.grace_s = grace_s
        self.armed = False
        self.ask = ask
        self.acp = acp or ask is not None
        self.rules = rules
        self.default_option: Option | None = ask.default(self.approves) if ask is not None else None
        self.other_options: list[Option] = ([o for o in ask.family(self.approves) if o != self.default_option]
                                            if ask is not None else [])

    @property
    def diff(self) -> str:
        """The diff shown (empty: none)."""
        return self.ask.diff if self.ask is not None else ""

    def compose(self) -> ComposeResult:
        waiting = self.waiting
        with Vertical(classes="dialog", id="decision"):
            yield Label(Text(f"{self.verb} {clean(self.tool)}?", style="bold"), classes="dialog-title")
            yield Static(kv("run", self.run_id))
            yield Static(kv("call id", self.call_id))
            yield Static(kv("tool", self.tool, "bold"))
            # An ACP agent's why lists its options: they are shown below, each with how to pick it.
            why = self.why.partition(": ")[0] if self.ask is not None and self.ask.options else self.why
            yield Static(kv("why", why))
            tally = tally_words(waiting)
            if tally is not None:
                yield Static(kv("people", tally, "bold"), id="tally")
            deadline = deadline_words(waiting)
            if deadline is not None:
                yield Static(kv("deadline", deadline, "bold yellow"), id="deadline")
            if self.ask is not None:
                yield Static(self._options(), id="options")
            if any(o.kind.endswith("_always") for o in self.other_options):
                # One row (a compact select): the rows above the note are the diff's.
                with Horizontal(id="always-row"):
                    yield Label("The agent's \"always\" is kept as a Tether rule for ")
                    yield Select([("this run", f"run:{self.run_id}"), ("this agent's runs", "agent"),
                                  ("the whole store", "store")], value=f"run:{self.run_id}", allow_blank=False,
                                 id="always-scope", compact=True)
            if self.ask is not None and self.ask.diff:
                yield Static(kv("diff", diff_summary(self.ask.diff)), classes="field-label")
                with VerticalScroll(classes="diff"):
                    yield Static(diff_text(self.ask.diff), id="diff")
            elif waiting.preview:
                yield Static(kv("changes", preview_heading(waiting.preview)), classes="field-label")
                with VerticalScroll(classes="diff"):
                    yield Static(preview_body(waiting.preview), id="preview")
            yield Static(Text("arguments", style="dim"))
            short = self.ask is not None or bool(waiting.preview)
            with VerticalScroll(classes="args short" if short else "args"):
                yield Static(Text(clean(pretty_args(self.args))), id="args")
            # What the operator types and presses stays at the dialog's foot, in sight however
            # long the call: what is shown of it above scrolls (a short terminal, a toast below).
            with Vertical(id="decision-actions"):
                yield Label(self.field_label, classes="field-label")
                yield Input(placeholder=self.placeholder, id="text")
                yield from self.extra()
                with Horizontal(classes="buttons"):
                    label = (self.verb if self.default_option is None
                             else f"{self.verb}: {one_line(self.default_option.name, 24)}")
                    yield Button(label, variant=self.button_variant, id="confirm", disabled=True)  # type: ignore[arg-type]
                    for i, option in enumerate(self.other_options):
                        yield Button(one_line(option.name, 24), variant="warning", id=f"option-{i}",
                                     classes="option", disabled=True)
                    yield Button("Cancel", id="cancel")
                more = list(self._more())
                if more:
                    with Horizontal(classes="buttons more"):
                        yield from more
                yield Static(Text(self._hint(), style="dim"), id="hint")

    def _more(self) -> ComposeResult:
        """The second row: edit the arguments, make a rule."""
        if self.approves and not self.acp:
            yield Button("Edit arguments…", id="edit")
        if self.rules is not None:
            for effect in self.always:  # an ACP agent's own "always" options are on the row above
                label = f"Tether rule: {effect}…" if self.acp else f"Always {effect}…"
                yield Button(label, id=f"always-{effect}", classes="always")

    def _options(self) -> Text:
        """Every option the agent offers, its kind, and how to pick it here."""
        ask = self.ask
        assert ask is not None
        out = Text()
        out.append(f"{'options':<10}", style="dim")
        if not ask.options:
            out.append("the agent offers none: the run answers in its own way", style="yellow")
        other_key = "r rejects" if self.approves else "a approves"
        for i, option in enumerate(ask.options):
            if i:
                out.append("\n" + " " * 10)
            out.append(f"{one_line(option.name, 24):<24} ", style="bold" if option.allows == self.approves else "")
            out.append(f"{option.kind_words:<14}", style="green" if option.allows else "red")
            if option == self.default_option:
                how = "Enter"
            elif option in self.other_options:
                how = "its button below"
            else:
                how = other_key
            out.append(f" {how}", style="dim")
        return out

    def _hint(self) -> str:
        if self.ask is not None and self.default_option is None:
            return (f"the agent offers no {'allow' if self.approves else 'reject'} option: the run answers with "
                    "what it can · Esc cancels")
        if self.approves and not self.acp:
            return "Enter confirms · ctrl+e (e off the note) edits the arguments · Esc cancels"
        return "Enter confirms · Esc cancels"

    def extra(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        if self.grace_s <= 0:
            self._arm()
        else:
            self.set_timer(self.grace_s, self._arm)
        if self.waiting.deadline_at is not None:
            self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        words = deadline_words(self.waiting)
        if words is not None:
            self.query_one("#deadline", Static).update(kv("deadline", words, "bold yellow"))

    def _arm(self) -> None:
        self.armed = True
        self.query_one("#confirm", Button).disabled = False
        for button in self.query(".option").results(Button):
            button.disabled = False

    def say(self, words: str, style: str = "yellow") -> None:
        """Words in the hint line (why a key did nothing)."""
        self.query_one("#hint", Static).update(Text(words, style=style))

    @on(Input.Submitted, "#text")
    def _submitted(self) -> None:
        self.action_confirm()

    @on(Button.Pressed, "#confirm")
    def _pressed(self) -> None:
        self.action_confirm()

    @on(Button.Pressed, ".option")
    def _option_pressed(self, event: Button.Pressed) -> None:
        index = int(str(event.button.id).rpartition("-")[2])
        self.pick(self.other_options[index])

    @on(Button.Pressed, ".always")
    def _always_pressed(self, event: Button.Pressed) -> None:
        self.make_rule(str(event.button.id).rpartition("-")[2])

    def make_rule(self, effect: str) -> None:
        """Open the rule editor prefilled with this call; a rule saved there decides it."""
        if self.rules is None:
            return

        def done(checked: Checked | None) -> None:
            if checked is not None:
                self.dismiss(DecisionAnswer(self.query_one("#text", Input).value, rule=checked))

        self.app.push_screen(RuleEditor(self.rules, effect=effect, tool=self.tool, args=self.args), done)

    def action_confirm(self) -> None:
        self.pick(None)

    def pick(self, option: Option | None) -> None:
        """Answer with ``option`` (None: the default, allow once or reject once)."""
        if not self.armed:
            self.say(f"Enter is ignored for {self.grace_s:g} s after the dialog opens; press it again")
            return
        text = self.query_one("#text", Input).value
        if self.ask is None:
            self.dismiss(text)
        elif option is not None and option.kind.endswith("_always"):
            self.dismiss(DecisionAnswer(text, option.id, scope=str(self.query_one("#always-scope", Select).value)))
        else:
            self.dismiss(DecisionAnswer(text, option.id if option is not None else None))


class ApproveDialog(_DecisionDialog):
    verb = "Approve"
    BINDINGS = [
        # e, as on the console, wherever no text field has the focus (in the Note field it is
        # typed); ctrl+e from anywhere, the Note field included. The key bar shows the one that works.
        Binding("e", "edit", "Edit arguments", id="approve.edit"),
        Binding("ctrl+e", "edit", "Edit arguments", priority=True, id="approve.edit_in_field"),
    ]

    @on(Button.Pressed, "#edit")
    def _edit_pressed(self) -> None:
        self.action_edit()

    def action_edit(self) -> None:
        """The arguments in an editor; approving there approves with them."""
        if self.acp:
            self.say(ACP_NO_EDIT)
            return

        def done(answer: tuple[str, str | None] | None) -> None:
            if answer is not None:
                note, args = answer
                self.dismiss(DecisionAnswer(note, args=args) if args is not None else note)

        self.app.push_screen(ArgsEditor(self.run_id, self.waiting, self.query_one("#text", Input).value), done)


class RejectDialog(_DecisionDialog):
    verb = "Reject"
    approves = False
    field_label = "Reason (written into the transcript, in words)"
    placeholder = "e.g. access.log is still needed"
    button_variant = "error"
    always = ("deny",)

    def extra(self) -> ComposeResult:
        if self.ask is not None:
            yield Static(Text("ACP has no field for a reason: the words go to the agent as its next prompt, "
                              "after this turn (unless its agent file says tell_rejections = false).", style="dim"))
            return
        yield Static(Text("An empty reason still records \"The operator declined this call: no reason given. "
                          "Nothing was done.\"", style="dim"))
