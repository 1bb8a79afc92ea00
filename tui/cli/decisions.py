"""``tether decisions``: the record of who decided what, from the store's index
(docs/approvals.md). It imports the store and the record's wording, nothing that runs an
agent: it is read far more often than a rule is added."""

from __future__ import annotations

import argparse
import sys

from tether.store.protocol import call
from tether.tui.cli import context
from tether.approvals import DecisionQuery
from tether.approvals.commands import decision_table, decisions_json, parse_time


async def decisions(args: argparse.Namespace) -> int:
    """``tether decisions``: the record of decisions, from the index, newest first."""
    since = None if args.since is None else parse_time(args.since, option="--since", ago=True)
    store = context.store_of(args)
    query = DecisionQuery(since=since, agent=args.agent, by=args.by, limit=args.limit)
    records = await call(store, store.decisions, query)
    if args.json:
        print(decisions_json(records))
    elif not records:
        print(f"no decisions on {store.where}" + (" that fit" if any((args.since, args.agent, args.by)) else ""))
    else:
        sys.stdout.write(decision_table(records) + "\n")
    return 0


COMMANDS = {"decisions": decisions}
