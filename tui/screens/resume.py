"""The Resume dialog (``R``): a run stopped by its turn cap, its budget or Stop, resumed with
raised limits (suggested: twice the cap or the budget that stopped it). It dismisses with a
:class:`ResumeRequest`, or None (Esc)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Input, Label, Static

from tether.vocab.state import RunState, Status
from tether.tui.screens.forms import FormDialog, kv, parse_int, parse_money
from tether.tui.state.text import money, one_line, stop_reason


@dataclass
class ResumeRequest:
    max_turns: int | None
    budget_usd: float | None


class ResumeDialog(FormDialog):
    def __init__(self, state: RunState, reason: str | None = None) -> None:
        super().__init__()
        self.state = state
        self.reason = reason

    def suggested(self) -> tuple[str, str]:
        st, limits = self.state, self.state.limits
        turns = limits.max_turns
        budget = limits.budget_usd
        if st.status is Status.MAX_TURNS_EXCEEDED and turns is not None:
            turns = max(turns * 2, st.turns + 1)
        if st.status is Status.BUDGET_EXCEEDED and budget is not None:
            budget = round(max(budget * 2, st.cost_usd * 1.5), 4)
        return ("" if turns is None else str(turns)), ("" if budget is None else f"{budget:g}")

    def compose(self) -> ComposeResult:
        st = self.state
        turns, budget = self.suggested()
        with Vertical(classes="dialog", id="resume"):
            yield Label(Text(f"Resume {one_line(st.run_id, 60)}", style="bold"), classes="dialog-title")
            yield Static(kv("stopped", f"{st.status.value}: "
                             + (self.reason or stop_reason(st, live=False))))
            cap = "no turn cap" if st.limits.max_turns is None else f"a cap of {st.limits.max_turns}"
            of_budget = ("no budget" if st.limits.budget_usd is None
                         else f"a budget of {money(st.limits.budget_usd)}")
            yield Static(kv("so far", f"{st.turns} turn{'' if st.turns == 1 else 's'} ({cap}), "
                             f"{money(st.cost_usd)} spent ({of_budget})"))
            if st.status in (Status.MAX_TURNS_EXCEEDED, Status.BUDGET_EXCEEDED):
                yield Static(Text("Each extra turn resends the whole transcript: the turns you add cost more "
                                  "than the turns before them.", style="dim"))
            with Grid(classes="form"):
                yield Label("Max turns")
                yield Input(value=turns, placeholder="blank: keep", id="max-turns")
                yield Label("Budget (USD)")
                yield Input(value=budget, placeholder="blank: keep", id="budget")
            yield from self.form_footer("Resume", "Enter resumes · Esc cancels")

    def on_mount(self) -> None:
        target = "#budget" if self.state.status is Status.BUDGET_EXCEEDED else "#max-turns"
        self.query_one(target, Input).focus()

    def request(self) -> ResumeRequest:
        st = self.state
        max_turns = parse_int(self.query_one("#max-turns", Input).value, "max turns")
        budget = parse_money(self.query_one("#budget", Input).value, "budget")
        if st.status is Status.MAX_TURNS_EXCEEDED and (max_turns or 0) <= st.turns:
            raise ValueError(f"raise max turns above the {st.turns} turns already taken")
        if st.status is Status.BUDGET_EXCEEDED and (budget or 0) <= st.cost_usd:
            raise ValueError(f"raise the budget above the {money(st.cost_usd)} already spent")
        return ResumeRequest(max_turns, budget)
