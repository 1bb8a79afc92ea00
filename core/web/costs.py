"""/costs: what the runs cost, for a phone and without JavaScript (issue 41's pictures). Spend
per day over 30 days as bars, by agent and by model as horizontal bars, each group's dearest
run, the ten dearest runs (each linked to its page), the runs nobody could price, and the fleet
budgets' state. The charts are SVG drawn here,
on the server, from ``Store.costs`` (:mod:`tether.store.costs`); every label is escaped."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from xml.sax.saxutils import escape

from aiohttp import web
from markupsafe import Markup

from tether.store.protocol import Store
from tether.observe.cost_figures import DAYS, load_figures
from tether.store.costs import CostRow, ago
from tether.web import auth, pages
from tether.web.render import html



def _usd(value: float) -> str:
    return f"${value:,.4f}" if value < 100 else f"${value:,.2f}"


def figures(store: Store, fleet: Any, now: float) -> dict[str, Any]:
    """Blocking: the store's aggregate queries (in a thread for a store that blocks), worded for the page."""
    got = load_figures(store, fleet, now)
    budgets = [{**b, "usd": _usd(b["usd"]), "spent": _usd(b["spent"]), "share": min(1.0, b["spent"] / b["usd"])}
               for b in got.budgets]
    dearest = [{"run_id": r.run_id, "agent": r.agent or "", "model": r.model or "", "status": r.status,
                "cost": "unknown" if r.price == "unknown" else _usd((r.cost_usd or 0.0) - (r.child_cost_usd or 0.0)),
                "tokens": f"{r.prompt_tokens or 0:,} in / {r.completion_tokens or 0:,} out",
                "age": ago(now - r.created_at)} for r in got.dearest]
    return {"days": got.days, "agents": got.agents, "models": got.models, "budgets": budgets, "dearest": dearest,
            "unknown": got.unknown_runs, "total": sum(usd for _, usd in got.days)}


def day_chart(days: list[tuple[str, float]]) -> Markup:
    """Vertical bars, one a day, in a 300×120 viewBox that scales to the page's width."""
    top = max((usd for _, usd in days), default=0.0)
    width, height, gap = 300 / len(days), 100.0, 1.0
    parts = [f'<svg class="chart" viewBox="0 0 300 120" role="img" aria-label="spend per day, last {len(days)} days" '
             'xmlns="http://www.w3.org/2000/svg" data-testid="day-chart">']
    for i, (day, usd) in enumerate(days):
        h = height * usd / top if top > 0 else 0.0
        parts.append(f'<rect x="{i * width:.2f}" y="{height - h:.2f}" width="{width - gap:.2f}" height="{h:.2f}" '
                     f'class="bar"><title>{escape(day)}: {escape(_usd(usd))}</title></rect>')
    parts.append(f'<line x1="0" y1="{height}" x2="300" y2="{height}" class="axis"/>')
    parts.append(f'<text x="0" y="115" class="label">{escape(days[0][0])}</text>')
    parts.append(f'<text x="300" y="115" text-anchor="end" class="label">{escape(days[-1][0])}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def group_chart(rows: list[CostRow], what: str) -> Markup:
    """Horizontal bars, one per group, dearest first, with its spend written beside it."""
    rows = rows[:12]
    top = max((r.cost_usd for r in rows), default=0.0)
    line = 22
    parts = [f'<svg class="chart" viewBox="0 0 300 {max(1, len(rows)) * line}" role="img" '
             f'aria-label="spend by {escape(what)}" xmlns="http://www.w3.org/2000/svg" data-testid="{what}-chart">']
    for i, r in enumerate(rows):
        w = 150 * r.cost_usd / top if top > 0 else 0.0
        spend = "unknown" if r.unknown_runs == r.runs else ("≥" if r.unknown_runs else "") + _usd(r.cost_usd)
        y = i * line
        parts.append(f'<text x="0" y="{y + 15}" class="label">{escape(r.group[:22])}</text>')
        parts.append(f'<rect x="100" y="{y + 4}" width="{w:.2f}" height="14" class="bar"/>')
        parts.append(f'<text x="{100 + w + 4:.2f}" y="{y + 15}" class="value">{escape(spend)}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


async def costs_page(request: web.Request) -> web.Response:
    store = request.config_dict[auth.SETTINGS].store
    fleet = getattr(getattr(request.config_dict[pages.DECIDER], "harness", None), "fleet", None)
    got = await asyncio.to_thread(figures, store, fleet, time.time())
    return html("costs.html", **auth.page_context(
        request, figures=got, days_svg=day_chart(got["days"]), agents_svg=group_chart(got["agents"], "agent"),
        models_svg=group_chart(got["models"], "model"), usd=_usd, days=DAYS))


def routes() -> list[web.RouteDef]:
    return [web.get("/costs", costs_page)]
