"""``tether stop``, ``approve`` and ``reject``: a Stop or a decision for a run, delivered to
whichever process holds it. ``stop`` goes through the store and the control channel alone
(no harness, no agent file), which is why it starts in a fraction of ``run``'s time
(docs/performance.md, "Cold start")."""

from __future__ import annotations

import argparse
import json

from tether.run.state import StateError
from tether.store.protocol import call
from tether.text import json_words
from tether.tui.cli import context, output
from tether.tui.cli.parser import UsageError


async def approve(args: argparse.Namespace) -> int:
    return await _decide(args, "approve", args.note)


async def reject(args: argparse.Namespace) -> int:
    return await _decide(args, "reject", args.reason)


async def _decide(args: argparse.Namespace, verdict: str, text: str) -> int:
    """Decide the run's waiting call: delivered to whoever holds the run waiting for a
    decision (a queue worker's workflow, or a process), if anyone does; otherwise made here,
    and the run goes on in this process."""
    from tether.workers.deliver import deliver
    from tether.store.control import ControlRequest

    edited = _edited_args(getattr(args, "args", None))
    await context.may_operate(args, verdict)
    async with context.harness_for(args) as harness:
        acp = {"option": getattr(args, "option", None), "silent": getattr(args, "silent", False),
               "scope": getattr(args, "scope", None)}
        if acp["scope"] is not None and not acp["option"]:
            raise UsageError("--scope is the scope of the rule kept of an ACP agent's \"always\" option: "
                             "give the option with --option ID")
        if acp["scope"] not in (None, "agent", "store") and not str(acp["scope"]).startswith("run:"):
            raise UsageError(f"--scope is run:ID, agent or store; not {acp['scope']!r}")
        request = ControlRequest(verdict, text, by=context.who(args), args=edited, **acp)
        reply = await deliver(harness.store, args.run_id, request)
        if reply is not None:
            return output.emit_reply(args, reply)
        if acp["option"] or acp["silent"] or acp["scope"]:
            raise UsageError(f"--option and --silent answer an ACP agent while it waits, and no process holds run "
                             f"{args.run_id} now")
        edit = {"args": edited} if edited is not None else {}
        operate = harness.approve if verdict == "approve" else harness.reject
        outcome = await operate(args.run_id, text, by=context.who(args), signal=await context.stop_signal(args),
                                wait_for_decision=context.waiting(args), **edit)
    return output.emit_outcome(args, outcome)


def _edited_args(text: str | None) -> str | None:
    """``--args JSON``: the call's arguments as the operator edited them (a JSON object),
    refused in words before anything is decided when it is not one."""
    if text is None:
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"--args is not JSON ({json_words(exc)}): give the arguments as a JSON "
                         "object, such as '{\"path\": \"old.log\"}'; nothing was decided") from None
    if not isinstance(parsed, dict):
        raise UsageError(f"--args must be a JSON object of the call's arguments, not {type(parsed).__name__}; "
                         "nothing was decided")
    return json.dumps(parsed, ensure_ascii=False)


async def stop(args: argparse.Namespace) -> int:
    """Through the store and the control channel alone: no harness, no agent file to load,
    so the Stop reaches the run's process a few interpreter start-ups sooner."""
    from tether.store import control, operate
    from tether.store.spec import has_workers

    store = context.store_of(args)
    await context.may_operate(args, "stop")
    if not await call(store, store.exists, args.run_id):
        raise StateError(f"no run {args.run_id} in {store.where}")
    request = control.ControlRequest("stop", args.reason or "stopped from the command line", by=context.who(args))
    if has_workers(store):
        from tether.workers import decide as workers  # a worker's workflow may wait for a decision on the run

        waiting = await workers.stop_waiting(store, args.run_id, request)
        if waiting is not None:
            return output.emit_reply(args, waiting)
    return output.emit_reply(args, await operate.request(store, args.run_id, request))


COMMANDS = {"stop": stop, "approve": approve, "reject": reject}
