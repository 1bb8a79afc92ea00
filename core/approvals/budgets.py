"""Fleet budgets: a limit on what many runs spend together in a day, a week or a month
(``[budgets.NAME]`` in the agent file; docs/costs.md).

```toml
[budgets.opencode-daily]
agent = "opencode"   # or model = "…", or source = "acp" | "claude-code" | …; none of them: every run
per = "day"          # | "week" | "month" (UTC; a week starts on Monday)
usd = 5
on_exceed = "stop"   # | "refuse" | "ask" (tether.approvals.budget_ask)
warn_at = 0.8
```

A budget's spend this period is kept on the store (``Store.budget_charge``: a locked file on
the file store, a row under an advisory lock on PostgreSQL). A run in its scope charges what it
spent since its last check before each model call. Once the period's spend has reached ``usd``:
``stop`` stops the running runs there, as a budget exit, so what the fleet spends beyond the
budget is at most one model call per live run, whichever processes run them; ``refuse`` lets the
runs already running go on (each still bound by its own ``budget_usd``), still charging them. A
new run in a crossed budget's scope is refused in words before it starts (``stop``, ``refuse``
and ``ask``). A new period's spend starts from what its runs have cost so far (``Store.costs``).
"""

from __future__ import annotations

import datetime as _dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from tether.store.protocol import Store
from tether.vocab.events import FleetBudgetLevel
from tether.vocab.state import RunState
from tether.store.costs import CostQuery, GroupBy
from tether.approvals.budget_ask import lifted
from tether.vocab.audit import run_source

log = logging.getLogger(__name__)

Period = Literal["day", "week", "month"]
OnExceed = Literal["stop", "refuse", "ask"]


BEFORE_NEXT_CALL = "the run stopped before its next model call"
"""How a reached budget's words end for a Tether run (an ACP agent's says how its turn ended)."""


class BudgetRefused(ValueError):
    """A new run in the scope of a fleet budget that is spent: said in words, nothing made."""


@dataclass(frozen=True, slots=True)
class FleetBudget:
    name: str
    usd: float
    per: Period = "day"
    on_exceed: OnExceed = "stop"
    warn_at: float = 0.8
    agent: str | None = None
    model: str | None = None
    source: str | None = None

    @property
    def scope(self) -> tuple[GroupBy, str] | None:
        for kind in ("agent", "model", "source"):
            value = getattr(self, kind)
            if value is not None:
                return kind, value  # type: ignore[return-value]
        return None

    def scope_words(self) -> str:
        scope = self.scope
        return "every run" if scope is None else f"{scope[0]} {scope[1]}"

    def covers(self, state: RunState, source: str) -> bool:
        scope = self.scope
        if scope is None:
            return True
        kind, value = scope
        got = {"agent": state.agent.name if state.agent is not None else None, "model": state.model,
               "source": source}[kind]
        return got == value

    def period_start(self, now: float | None = None) -> float:
        day = _dt.datetime.fromtimestamp(time.time() if now is None else now, _dt.timezone.utc).replace(
            hour=0, minute=0, second=0, microsecond=0)
        if self.per == "week":
            day -= _dt.timedelta(days=day.weekday())
        elif self.per == "month":
            day = day.replace(day=1)
        return day.timestamp()

    def key(self, now: float | None = None) -> str:
        start = _dt.datetime.fromtimestamp(self.period_start(now), _dt.timezone.utc)
        return f"{self.name}@{start:%Y-%m-%d}"

    def words(self, spent: float) -> str:
        return (f"budget {self.name} (${self.usd:.2f}/{self.per}, {self.scope_words()}) reached: "
                f"${spent:.2f} spent this {self.per}")


def spent_so_far(store: Store, budget: FleetBudget, now: float | None = None) -> float:
    """What the runs in ``budget``'s scope made this period have cost (the index, one query)."""
    scope = budget.scope
    rows = store.costs(CostQuery(scope[0] if scope else "agent", since=budget.period_start(now)))
    return sum(r.cost_usd for r in rows if scope is None or r.group == scope[1])


def spent(store: Store, budget: FleetBudget, usd: float = 0.0) -> float:
    """The period's spend, after adding ``usd`` to it (the store's counter, made if new)."""
    return store.budget_charge(budget.key(), usd, lambda: spent_so_far(store, budget))


def shown(store: Store, budget: FleetBudget) -> float:
    """The period's spend for a listing (``tether budgets``, the console, /costs): the store's
    counter, or what the runs have cost where this role may not keep one (a watcher's)."""
    try:
        return spent(store, budget)
    except Exception as exc:  # a read-only role or disk: the runs' own figures, which need no write
        log.info("budget %s: the counter could not be read (%s); the runs' costs instead", budget.name, exc)
        return spent_so_far(store, budget)


@dataclass
class FleetBudgets:
    """The agent file's fleet budgets for one process: which levels it has said this period."""

    budgets: tuple[FleetBudget, ...]
    said: set[tuple[str, int]] = field(default_factory=set)

    def of(self, state: RunState) -> list[FleetBudget]:
        source = run_source(state)
        return [b for b in self.budgets if b.covers(state, source)]

    def refuse_new(self, store: Store, state: RunState) -> None:
        """Raise :class:`BudgetRefused` when a budget covering the new run ``state`` is spent."""
        for budget in self.of(state):
            total = spent(store, budget)
            if total >= budget.usd:
                raise BudgetRefused(f"{budget.words(total)}: no new run of {budget.scope_words()} until the next "
                                    f"{budget.per} (UTC); raise usd in [budgets.{budget.name}] to go on now")

    def before_call(self, store: Store, state: RunState) -> tuple[str | tuple[FleetBudget, float] | None,
                                                                list[FleetBudgetLevel]]:
        """Charge what ``state`` spent since its last check to each budget over it; the words of
        the first ``stop`` budget that is reached (the run stops there), or an ``ask`` budget reached
        and its spend (the run asks: :mod:`tether.approvals.budget_ask`), else None (a reached
        ``refuse`` budget only refuses new runs); and the levels
        (``warn_at``, 100 %) a budget reached that this process has not yet said this period."""
        own = state.cost_usd - state.child_cost_usd
        delta = max(0.0, own - state.fleet_charged_usd)  # (saved with the run: another process goes on from it)
        state.fleet_charged_usd = max(own, state.fleet_charged_usd)

        reached: str | tuple[FleetBudget, float] | None = None
        levels = []
        for budget in self.of(state):
            total = spent(store, budget, delta)
            if budget.on_exceed == "ask":
                if reached is None and total >= budget.usd + lifted(state, budget):
                    reached = (budget, total)
            elif budget.on_exceed == "stop" and reached is None and total >= budget.usd:
                reached = f"{budget.words(total)}; {BEFORE_NEXT_CALL}"
            for level in (round(budget.warn_at * 100), 100):
                key = (budget.key(), level)
                if total >= budget.usd * level / 100 and key not in self.said:
                    self.said.add(key)
                    words = (f"fleet budget {budget.name} ({budget.scope_words()}): ${total:.2f} of "
                             f"${budget.usd:.2f} spent this {budget.per} ({level} %)")
                    levels.append(FleetBudgetLevel(run_id=state.run_id, budget=budget.name, period=budget.key(),
                                                   level=level, spent_usd=round(total, 8), usd=budget.usd,
                                                   words=words))
        return reached, levels


def from_config(entries: dict[str, Any]) -> FleetBudgets | None:
    """The checked ``[budgets]`` tables as fleet budgets, or None when there are none."""
    if not entries:
        return None
    return FleetBudgets(tuple(FleetBudget(name=name, usd=e.usd, per=e.per, on_exceed=e.on_exceed, warn_at=e.warn_at,
                                          agent=e.agent, model=e.model, source=e.source)
                              for name, e in entries.items()))
