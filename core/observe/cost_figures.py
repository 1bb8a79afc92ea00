"""What the fleet cost over the last 30 days, as the console's Costs screen and the web's /costs
draw it: spend per day, by agent and by model (``Store.costs``: one aggregate query each), the
ten dearest runs (``Store.dearest``) and the fleet budgets' state. One reading for both views,
so the screen and the page never disagree about a day's boundary or a budget's state."""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field
from typing import Any

from tether.store.protocol import Store
from tether.store.costs import DEAREST, CostQuery, CostRow
from tether.approvals.budgets import shown

DAYS = 30


@dataclass
class CostFigures:
    """The last :data:`DAYS` days (UTC), the spend by agent and by model, the budgets."""

    days: list[tuple[str, float]]
    agents: list[CostRow]
    models: list[CostRow]
    budgets: list[dict[str, Any]] = field(default_factory=list)
    """Each budget: name, scope (words), per, usd, spent, state (ok, warning, reached)."""
    unknown_runs: int = 0
    dearest: list[Any] = field(default_factory=list)  # RunSummary, dearest first
    now: float = 0.0


def load_figures(store: Store, fleet: Any = None, now: float | None = None) -> CostFigures:
    """The figures from ``store`` and the ``fleet``'s budgets (blocking: call it in a thread for
    a store that blocks)."""
    now = time.time() if now is None else now
    today = _dt.datetime.fromtimestamp(now, _dt.timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    since = (today - _dt.timedelta(days=DAYS - 1)).timestamp()
    per_day = {r.group: r.cost_usd for r in store.costs(CostQuery("day", since=since))}
    days = [(day, per_day.get(day, 0.0)) for day in
            ((today - _dt.timedelta(days=DAYS - 1 - i)).strftime("%Y-%m-%d") for i in range(DAYS))]
    agents = store.costs(CostQuery("agent", since=since))
    models = store.costs(CostQuery("model", since=since))
    budgets = []
    if fleet is not None:
        for b in fleet.budgets:
            total = shown(store, b)
            budgets.append({"name": b.name, "scope": b.scope_words(), "per": b.per, "usd": b.usd, "spent": total,
                            "state": "reached" if total >= b.usd else "warning" if total >= b.warn_at * b.usd
                            else "ok"})
    return CostFigures(days, agents, models, budgets, sum(r.unknown_runs for r in agents),
                       store.dearest(CostQuery(since=since), DEAREST), now)
