"""``tether checkpoints``, ``tether rewind`` and ``tether fork``: a run's checkpoints listed,
its workspace and transcript taken back to one (and the rewind undone), and a new run forked
from one (docs/checkpoints.md). None of them loads a harness or an agent file."""

from __future__ import annotations

import argparse
import json
import time

from tether.run.state import StateError
from tether.store.protocol import call
from tether.tui.cli import context


async def checkpoints(args: argparse.Namespace) -> int:
    """``tether checkpoints RUN [--json]``: step, time, the call, +/- per file."""
    from tether.text import clean
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


COMMANDS = {"checkpoints": checkpoints}
