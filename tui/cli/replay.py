"""``tether replay``: a run's recorded tool calls run again with its agent's tools as they are
today, in a scratch folder, and the first result that differs from the recorded one
(docs/checkpoints.md, "Replay"). No model is asked; a harness rebuilds the run's agent, for
its tools."""

from __future__ import annotations

import argparse
import json

from tether.vocab.state import StateError
from tether.vocab.text import clean
from tether.store.protocol import call
from tether.tui.cli import context, running
from tether.workspaces.git import GitError
from tether.workspaces.replaying import replay as replayed


async def replay(args: argparse.Namespace) -> int:
    """``tether replay RUN [--to N] [--json]``: today's tools on the recorded calls; exit 1 when one differs."""
    store = context.store_of(args)
    state = await call(store, store.load, args.run_id)
    if state.of_acp_agent:
        raise StateError(f"run {state.run_id} is an ACP agent's: its tools are the agent's own, so Tether cannot "
                         "run them again (Tether's own runs can be replayed)")
    harness = running.harness_for(args)
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


COMMANDS = {"replay": replay}
