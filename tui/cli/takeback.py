"""``tether checkpoints``, ``tether rewind`` and ``tether fork``: a run's checkpoints listed,
its workspace and transcript taken back to one (and the rewind undone), and a new run forked
from one (docs/checkpoints.md). None of them loads a harness or an agent file."""

from __future__ import annotations

import argparse
import json
import time

from tether.vocab import faultpoints
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
    from tether.vocab.text import clean
    from tether.workspaces.git import GitError
    from tether.workspaces.rewinding import rewind_run

    await context.may_operate(args, "rewind")
    try:
        _, said = await rewind_run(context.store_of(args), args.run_id, to=None if args.undo else args.to,
                                   by=context.who(args))
    except GitError as exc:
        raise StateError(f"run {args.run_id}: {exc}") from None
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
    from tether.harness import tether_home
    from tether.vocab.state import new_run_id
    from tether.vocab.text import clean
    from tether.workspaces.forking import fork as forked
    from tether.workspaces.git import GitError

    await context.may_operate(args, "fork")
    store = context.store_of(args)
    origin = await call(store, store.load, args.run_id)
    prefix = (origin.agent.name if origin.agent else origin.model).replace("/", "_")[:24]
    new_id = args.new_id or new_run_id(prefix)
    if await call(store, store.exists, new_id):
        raise StateError(f"run {new_id} exists already: tether fork --run-id takes a new id; nothing was made")
    agent = None
    if args.agent:
        config = context.config(args)
        if config is None:
            raise StateError(f"--agent {args.agent}: there is no agent file to find it in (--config FILE)")
        agent = config.agent(args.agent)
        if agent.acp is not None and not origin.of_acp_agent:
            raise StateError(f"--agent {args.agent} speaks ACP: a fork of a Tether run goes on with a Tether agent")
        if agent.acp is None and origin.of_acp_agent:
            raise StateError(f"--agent {args.agent} is a Tether agent: a fork of an ACP agent's run goes on with an "
                             "ACP agent (its transcript is the agent's own)")
    try:
        sessions = [r.get("session_id") for r in await call(store, lambda: list(store.read_trace(args.run_id)))
                    if r.get("kind") == "agent_session"] if origin.of_acp_agent and not args.agent else []
        state = await forked(origin, args.at, new_id, tether_home() / "workspaces",
                             session=str(sessions[-1]) if sessions and sessions[-1] else None)
    except GitError as exc:
        raise StateError(f"run {args.run_id}: {exc}") from None
    if agent is not None:  # another agent, or model, goes on from the same prefix
        from dataclasses import replace

        from tether.vocab.state import Pricing

        state.agent, state.model = agent.ref(), agent.model
        state.base_url = agent.base_url or state.base_url
        state.pricing = replace(agent.pricing) if agent.pricing else Pricing(assumed=True)
    if args.message:
        from tether.run.controls import add_follow_up

        status, interruption = state.status, state.interruption
        add_follow_up(state, args.message)
        state.status, state.interruption = status, interruption  # it waits, interrupted, for its resume
    faultpoints.boundary("fork_prepared")  # a crash here: no run made (a copy's files left for the next fork)
    await call(store, store.create, state)
    if args.json:
        print(json.dumps({"run_id": new_id, "forked_from": state.forked_from, "messages": len(state.messages)}))
        return 0
    taken = state.forked_from["messages"] if state.forked_from else len(state.messages)
    print(clean(f"run {new_id} forked from {args.run_id} at checkpoint {args.at}"
                + (f", with agent {agent.name} ({agent.model})" if agent is not None else "")
                + ": its workspace starts there (made when it first runs), "
                + ("the agent forks its session (session/fork) if it advertises that, else " if (state.forked_from or {}).get("session") else "")
                + ("a new session of the agent is told in words what was done up to there" if origin.of_acp_agent
                   else f"its transcript is the first {taken} messages of {args.run_id}'s")
                + (" and your message" if args.message else "")
                + f"; tether resume {new_id} goes on"))
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
