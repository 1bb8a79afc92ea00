"""``tether checkpoints``, ``tether rewind`` and ``tether fork``: a run's checkpoints listed,
its workspace and transcript taken back to one (and the rewind undone), and a new run forked
from one (docs/checkpoints.md). None of them loads a harness, nor an agent file unless
``fork --agent`` names one of it."""

from __future__ import annotations

import argparse
import json
import time

from tether.actions import takeback
from tether.vocab.state import StateError
from tether.vocab.text import clean
from tether.store.private import default_home
from tether.store.protocol import call
from tether.tui.cli import context
from tether.tui.cli.workspaces import workspace_made
from tether.workspaces.checkpoints import listing
from tether.workspaces.git import GitError


async def checkpoints(args: argparse.Namespace) -> int:
    """``tether checkpoints RUN [--json]``: step, time, the call, +/- per file."""
    store = context.store_of(args)
    state = await call(store, store.load, args.run_id)
    ws = workspace_made(state)
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
    await context.may_operate(args, "rewind")
    _, said = await takeback.rewind(context.store_of(args), args.run_id, to=None if args.undo else args.to,
                                    by=context.who(args))
    for words in said:
        print(clean(words))
    return 0


async def fork(args: argparse.Namespace) -> int:
    """``tether fork RUN --at N [--run-id ID]``: a new run from checkpoint N."""
    await context.may_operate(args, "fork")
    agent = None
    if args.agent:
        config = context.config(args)
        if config is None:
            raise StateError(f"--agent {args.agent}: there is no agent file to find it in (--config FILE)")
        agent = config.agent(args.agent)
    state, origin = await takeback.fork(context.store_of(args), args.run_id, args.at, default_home() / "workspaces",
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


COMMANDS = {"checkpoints": checkpoints, "rewind": rewind, "fork": fork}
