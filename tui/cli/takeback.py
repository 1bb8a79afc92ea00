"""``tether checkpoints``, ``tether rewind`` and ``tether fork``: a run's checkpoints listed,
its workspace and transcript taken back to one (and the rewind undone), and a new run forked
from one (docs/checkpoints.md). None of them loads a harness or an agent file."""

from __future__ import annotations

import argparse
import json
import time

from tether.vocab.state import StateError
from tether.store.protocol import call
from tether.tui.cli import context


async def checkpoints(args: argparse.Namespace) -> int:
    """``tether checkpoints RUN [--json]``: step, time, the call, +/- per file."""
    from tether.vocab.text import clean
    from tether.tui.cli.workspaces import _made
    from tether.workspaces.checkpoints import listing
    from tether.workspaces.git import GitError

    store = context.store_of(args)
    state = await call(store, store.load, args.run_id)
    ws = _made(state)
    try:
        found = await listing(ws, state.run_id)
    except GitError as exc:
        raise StateError(f"run {state.run_id}: {exc}") from None
    if args.json:
        print(json.dumps({"run_id": state.run_id, "base": ws.base_commit, "checkpoints": [c.to_dict() for c in found]}))
        return 0
    if not found:
        print(f"run {state.run_id}: no checkpoints yet (one is taken after each step that changes its workspace)")
        return 0
    for cp in found:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(cp.at))
        what = cp.label or (f"{cp.tool} ({cp.call_id})" if cp.tool else "")
        print(clean(f"{cp.step:>4}  {when}  turn {cp.turn:<3} {what}", keep_newlines=False))
        for f in cp.files:
            counts = "binary" if f["added"] is None else f"+{f['added']} \u2212{f['deleted']}"
            print(clean(f"        {f['status']:<8} {counts:>10}  {f['path']}", keep_newlines=False))
    return 0


async def rewind(args: argparse.Namespace) -> int:
    """``tether rewind RUN --to N`` / ``--undo``: workspace and transcript back, undoably."""
    from tether.actions import takeback
    from tether.vocab.text import clean

    await context.may_operate(args, "rewind")
    _, said = await takeback.rewind(context.store_of(args), args.run_id, to=None if args.undo else args.to,
                                    by=context.who(args))
    for words in said:
        print(clean(words))
    return 0


def rewind_lines(state: object, records: list[dict], *, everything: bool) -> list[str]:
    """What ``tether show`` says of a run's fork and rewinds; with ``everything``, the messages each cut."""
    out: list[str] = []
    origin = getattr(state, "forked_from", None)
    if origin:
        made = [r.get("fork") for r in records if r.get("kind") == "agent_session" and r.get("fork")]
        how = {"session/fork": ", made by session/fork of the agent's session",
               "told": ", a new session of the agent told in words"}.get(str(made[0]) if made else "", "")
        out.append(f"forked from {origin.get('run_id')} at checkpoint {origin.get('step')} "
                   f"(its first {origin.get('messages')} messages{how})")
    cut = {r.get("rewind"): r.get("cut") or [] for r in records if r.get("kind") == "rewound"}
    for r in getattr(state, "rewinds", None) or ():
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.get("at") or 0))
        what = (f"rewind {r['id']}: undid rewind {r['undoes']}" if r.get("kind") == "undo"
                else f"rewind {r['id']}: back to checkpoint {r.get('to')}")
        pending = "" if r.get("stage") == "restored" else " (cut short: tether rewind finishes it)"
        out.append(f"{what} at {when}" + (f" by {r['by']}" if r.get("by") else "")
                   + f", {r.get('cut', 0)} messages cut after message {r.get('cut_at')}" + pending
                   + ("" if everything or not r.get("cut") else f" (tether show {getattr(state, 'run_id', '')} --all)"))
        if everything:
            for message in cut.get(r["id"], []):
                text = message.get("content") or ", ".join(
                    f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
                    for c in message.get("tool_calls") or ())
                out.append(f"  (rewound) [{message.get('role')}] {text}")
    return out


async def fork(args: argparse.Namespace) -> int:
    """``tether fork RUN --at N [--run-id ID]``: a new run from checkpoint N."""
    from tether.actions import takeback
    from tether.harness import tether_home
    from tether.vocab.text import clean

    await context.may_operate(args, "fork")
    agent = None
    if args.agent:
        config = context.config(args)
        if config is None:
            raise StateError(f"--agent {args.agent}: there is no agent file to find it in (--config FILE)")
        agent = config.agent(args.agent)
    state, origin = await takeback.fork(context.store_of(args), args.run_id, args.at, tether_home() / "workspaces",
                                        new_id=args.new_id, agent=agent, message=args.message)
    if args.json:
        print(json.dumps({"run_id": state.run_id, "forked_from": state.forked_from, "messages": len(state.messages)}))
        return 0
    print(clean(f"run {state.run_id} forked from {args.run_id} at checkpoint {args.at}"
                + (f", with agent {agent.name} ({agent.model})" if agent is not None else "")
                + ": its workspace starts there (made when it first runs), " + takeback.fork_words(state, origin)
                + (" and your message" if args.message else "")
                + f"; tether resume {state.run_id} goes on"))
    return 0


async def replay(args: argparse.Namespace) -> int:
    """``tether replay RUN [--to N] [--json]``: today's tools on the recorded calls; exit 1 when one differs."""
    from tether.vocab.text import clean
    from tether.workspaces.git import GitError
    from tether.workspaces.replaying import replay as replayed

    store = context.store_of(args)
    state = await call(store, store.load, args.run_id)
    if state.of_acp_agent:
        raise StateError(f"run {state.run_id} is an ACP agent's: its tools are the agent's own, so Tether cannot "
                         "run them again (Tether's own runs can be replayed)")
    harness = context.harness_for(args)
    try:
        agent = harness.agent_of(state)
    finally:
        await harness.aclose()
    try:
        done = await replayed(state, {t.name: t for t in agent.tool_list}, to=args.to)
    except GitError as exc:
        raise StateError(f"run {state.run_id}: {exc}") from None
    first = done.first_difference
    if args.json:
        print(json.dumps({"run_id": state.run_id, "started_from": done.started_from,
                          "calls": [c.to_dict() for c in done.calls],
                          "first_difference": None if first is None else first.step}))
        return 1 if first is not None else 0
    print(clean(f"run {state.run_id}: {len(done.calls)} recorded tool calls run again with today's tools, from "
                f"{done.started_from}; no model was asked"))
    for c in done.calls:
        print(clean(f"{c.step:>4}  {c.tool} ({c.call_id})  {c.outcome}" + (f": {c.why}" if c.why else ""),
                    keep_newlines=False))
    if first is None:
        print("every result is as recorded")
        return 0
    print(clean(f"the first difference: step {first.step}, {first.tool} ({first.call_id})", keep_newlines=False))
    print(clean(f"  recorded: {first.recorded[:500]}"))
    print(clean(f"  now:      {first.now[:500]}"))
    return 1


COMMANDS = {"checkpoints": checkpoints, "rewind": rewind, "fork": fork, "replay": replay}
