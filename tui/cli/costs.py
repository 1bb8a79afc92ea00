"""``tether prices``: what a model's tokens cost and where the price comes from (the agent
file's ``[prices]``, else genai-prices' bundled data, else "price unknown"); ``tether costs``:
what the runs cost, grouped, from one aggregate query of the store (docs/costs.md)."""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys

from tether.tui.cli import context
from tether.approvals.budgets import from_config, shown
from tether.approvals.commands import parse_time
from tether.store.costs import CostQuery
from tether.store.protocol import call
from tether.vocab.prices import explain
from tether.vocab.text import clean as cleaned


async def prices(args: argparse.Namespace) -> int:
    """``tether prices [MODEL] [--base-url URL] [--json]``."""
    config = context.config(args)
    if args.model:
        asked = [(args.model, args.base_url)]
    elif config is not None:
        asked = []
        for name in config.names:
            entry = config.data.agents[name]
            if entry.model and (entry.model, entry.base_url) not in asked:
                asked.append((entry.model, entry.base_url))
        asked += [(model, None) for model in (*config.data.prices, *config.data.pricing)
                  if all(model != m for m, _ in asked)]
    else:
        print("give a model (tether prices MODEL), or an agent file with agents (--config FILE)")
        return 2
    answers = await asyncio.to_thread(lambda: [explain(model, config, url) for model, url in asked])
    if args.json:
        print(json.dumps([answer.to_dict() for answer in answers]))
    else:
        for answer in answers:
            print(answer.words())
    return 0


async def costs(args: argparse.Namespace) -> int:
    """``tether costs [--by agent|model|source|day|operator] [--since W] [--until W] [--json|--csv]``."""
    since = None if args.since is None else parse_time(args.since, option="--since", ago=True)
    until = None if args.until is None else parse_time(args.until, option="--until", ago=True)
    store = context.store_of(args)
    rows = await call(store, store.costs, CostQuery(args.by, since, until))
    if args.json:
        print(json.dumps({"by": args.by, "since": since, "until": until, "groups": [r.to_dict() for r in rows]}))
        return 0
    if args.csv:
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow([args.by, "runs", "cost_usd", "per_run_usd", "prompt_tokens", "completion_tokens",
                      "unknown_price_runs", "dearest_run", "dearest_usd"])
        for r in rows:
            out.writerow([r.group, r.runs, f"{r.cost_usd:.6f}", f"{r.per_run_usd:.6f}", r.prompt_tokens,
                          r.completion_tokens, r.unknown_runs, r.dearest_run or "", f"{r.dearest_usd:.6f}"])
        return 0
    if not rows:
        print(f"no runs on {store.where}" + (" in that time" if since or until else ""))
        return 0
    width = max(len(args.by), *(len(clean(r.group)) for r in rows))
    print(f"{args.by:<{width}}  {'runs':>6}  {'spend':>10}  {'per run':>9}  {'tokens in':>11}  {'out':>9}  dearest run")
    for r in rows:
        spend, per_run = _spend(r.cost_usd, r.unknown_runs, r.runs), _spend(r.per_run_usd, r.unknown_runs, r.runs)
        dearest = f"{r.dearest_run} ({_usd(r.dearest_usd)})" if r.unknown_runs < r.runs else ""
        print(f"{clean(r.group):<{width}}  {r.runs:>6}  {spend:>10}  {per_run:>9}  "
              f"{r.prompt_tokens:>11,}  {r.completion_tokens:>9,}  {dearest}"
              + (f"  {r.unknown_runs} price unknown" if r.unknown_runs else ""))
    total = sum(r.cost_usd for r in rows)
    runs = sum(r.runs for r in rows)
    unknown = sum(r.unknown_runs for r in rows)
    print(f"{'total':<{width}}  {runs:>6}  {_spend(total, unknown, runs):>10}")
    if unknown:
        print(f"{unknown} run{'s' if unknown != 1 else ''} had no price (price unknown): their tokens are counted "
              "above, their dollars are not, so the spend is at least this (tether prices MODEL)")
    return 0


def _spend(value: float, unknown: int, runs: int) -> str:
    """A group's dollars: "unknown" when no run of it had a price, "≥" before a sum that lacks some."""
    if unknown and unknown == runs:
        return "unknown"
    return ("≥" if unknown else "") + _usd(value)


def _usd(value: float) -> str:
    return f"${value:,.4f}" if abs(value) < 100 else f"${value:,.2f}"


def clean(text: str) -> str:
    return cleaned(text)


async def budgets(args: argparse.Namespace) -> int:
    """``tether budgets [--json]``: each ``[budgets.NAME]`` with its spend this period."""
    config = context.config(args)
    fleet = from_config(config.data.budgets) if config is not None else None
    if fleet is None:
        print("no fleet budgets: add [budgets.NAME] to the agent file (docs/costs.md)")
        return 0
    store = context.store_of(args)
    rows = []
    for b in fleet.budgets:
        total = await asyncio.to_thread(shown, store, b)
        state = "reached" if total >= b.usd else "warning" if total >= b.warn_at * b.usd else "ok"
        rows.append({"name": b.name, "scope": b.scope_words(), "per": b.per, "usd": b.usd, "spent_usd": round(total, 8),
                     "share": round(total / b.usd, 4), "on_exceed": b.on_exceed, "warn_at": b.warn_at, "state": state})
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        print(f"{clean(r['name'])}: ${r['spent_usd']:.2f} of ${r['usd']:.2f} this {r['per']} ({r['share']:.0%}), "
              f"{clean(r['scope'])}; {r['state']}; on exceed: {r['on_exceed']}")
    return 0


COMMANDS = {"prices": prices, "costs": costs, "budgets": budgets}
