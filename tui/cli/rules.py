"""``tether rules``: the store's standing rules (list, add, remove, explain a call;
docs/approvals.md). The work is in :mod:`tether.approvals.commands`; here, the options read
and the lines printed."""

from __future__ import annotations

import argparse
import json
import sys
import time

from tether.store.protocol import Store, call
from tether.tui.cli import context
from tether.actions.rules import apply_to_waiting
from tether.approvals import Rule, check, parse_duration, parse_where
from tether.approvals.commands import expiry_note, explain_call, known_tools, parse_time, rule_json, rule_line
from tether.vocab.text import clean


async def rules(args: argparse.Namespace) -> int:
    """``tether rules``: list the store's standing rules, or add, remove or explain."""
    store = context.store_of(args)
    action = getattr(args, "rules_command", None)
    if action == "add":
        return await _rule_add(args, store)
    if action == "remove":
        await context.may_operate(args, "rules remove")
        removed = await call(store, store.rule_remove, args.rule_id)
        print(f"removed {removed.id}: {removed.describe()} ({removed.reason})")
        return 0
    rules = await call(store, store.rules)
    if action == "explain":
        state = await call(store, store.load, args.run_id)
        print("\n".join(explain_call(state, args.call_id, rules)))
        return 0
    now = time.time()
    if args.json:
        print(json.dumps([rule_json(r, now) for r in rules]))
    elif not rules:
        print(f"no standing rules on {store.where}; tether rules add --allow|--deny TOOL --reason TEXT makes one")
    else:
        print("\n".join(rule_line(r, now) for r in rules))
    return 0


async def _rule_add(args: argparse.Namespace, store: Store) -> int:
    """Check the rule (errors refused in words, warnings on stderr), keep it, then let it
    decide the calls already waiting that it fits."""

    await context.may_operate(args, "rules add")
    rule = Rule(args.effect, args.tool, args.reason.strip(), context.who(args), agent=args.agent,
                where=tuple(parse_where(w) for w in args.where), source=args.source, scope=args.scope,
                expires=None if args.expires is None else parse_time(args.expires, option="--expires", ago=False),
                approvals=args.approvals, deadline_s=None if args.deadline is None else parse_duration(args.deadline),
                on_deadline=args.on_deadline)
    check(rule)  # what needs no agent file is refused before one is loaded (a second, at most)

    # lazy: the demo's agents (pydantic, the models' client) are only for a rule being added;
    # (tests/processes/test_cold_start.py holds the listings to the store and their wording)
    from tether.demo.agents import DEMO

    tools, agents = known_tools(context.config(args), (DEMO,))
    checked = check(rule, tools=tools, agents=agents)
    warnings = list(checked.warnings)
    if rule.run_id is not None and not await call(store, store.exists, rule.run_id):
        warnings.append(f"no run {rule.run_id} on {store.where}; the rule applies if one is made with that id")
    for warning in warnings:
        print(clean(f"tether: warning: {warning}"), file=sys.stderr)
    added = await call(store, store.rule_add, checked.rule)
    applied = await apply_to_waiting(store, added)
    if args.json:
        print(json.dumps({"rule": rule_json(added, time.time()), "warnings": warnings,
                          "decided": [{"run_id": a.run_id, "call_id": a.call_id, "tool": a.tool, "decided": a.decided,
                                       "words": a.words} for a in applied]}))
        return 0
    print(added.id)
    note = expiry_note(added)
    print(clean(f"{added.id}: {added.describe()} [{added.scope}]" + (f"; {note}" if note else "")))
    for outcome in applied:
        print(clean(outcome.words))
    return 0


COMMANDS = {"rules": rules}
