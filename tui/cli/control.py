"""``tether approve`` and ``reject``, and ``stop``'s full path: a Stop or a decision for a
run, delivered through the store's control channel to whichever process holds it. A decision
that no process takes is made here, and only then is a harness built
(:mod:`tether.tui.cli.running`)."""

from __future__ import annotations

import argparse
from typing import Any

from tether.actions import control
from tether.approvals.decisions import edit_json
from tether.store.control import ControlReply, ControlRequest
from tether.store.owner import Owner
from tether.tui.cli import context, output
from tether.tui.cli.parser import UsageError


async def approve(args: argparse.Namespace) -> int:
    return await _decide(args, "approve", args.note)


async def reject(args: argparse.Namespace) -> int:
    return await _decide(args, "reject", args.reason)


async def _decide(args: argparse.Namespace, verdict: str, text: str) -> int:
    """Decide the run's waiting call: delivered to whoever holds the run waiting for a
    decision (a queue worker's workflow, or a process), if anyone does; otherwise made here,
    and the run goes on in this process (:mod:`tether.actions.adopting`). Only then is the
    harness built (and the run's agent with it): a decision that a process takes needs neither."""
    edited = _edited_args(getattr(args, "args", None))
    unchecked = bool(getattr(args, "unchecked", False))
    if unchecked and edited is None:
        raise UsageError("--unchecked takes the edited arguments of --args as they are: give them with --args JSON")
    acp = {"option": getattr(args, "option", None), "silent": getattr(args, "silent", False),
           "scope": getattr(args, "scope", None)}
    if acp["option"] is not None and not acp["option"].strip():
        raise UsageError(f"--option is empty: give the id of one of the agent's options (tether show {args.run_id} "
                         "lists them), or leave --option out to allow once; nothing was decided")
    if acp["scope"] is not None and not acp["option"]:
        raise UsageError("--scope is the scope of the rule kept of an ACP agent's \"always\" option: "
                         "give the option with --option ID")
    if acp["scope"] not in (None, "agent", "store") and not str(acp["scope"]).startswith("run:"):
        raise UsageError(f"--scope is run:ID, agent or store; not {acp['scope']!r}")
    await context.may_operate(args, verdict)
    account = await context.account(args)
    request = ControlRequest(verdict, text, by=context.who(args), args=edited, account=account, unchecked=unchecked,
                             **acp)
    reply = await control.deliver(context.store_of(args), args.run_id, request)
    if reply is not None:
        return output.emit_reply(args, reply)
    if acp["option"] is not None or acp["silent"] or acp["scope"] is not None:
        raise UsageError(f"--option and --silent answer an ACP agent while it waits, and no process holds run "
                         f"{args.run_id} now")
    # lazy: the harness (and the run's agent), only when no process takes the decision
    # (tests/processes/test_cold_start.py::test_a_decision_for_a_process_that_waits_for_it_loads_no_harness)
    from tether.actions import adopting
    from tether.tui.cli import running

    async with running.harness_for(args) as harness:
        outcome = await adopting.adopt(harness, args.run_id, request, signal=await running.stop_signal(args),
                                       wait_for_decision=running.waiting(args))
    return running.emit_outcome(args, outcome)


def _edited_args(text: str | None) -> str | None:
    """``--args JSON``: the call's arguments as the operator edited them (a JSON object, each
    key once), refused in words before anything is decided when they are not one."""
    if text is None:
        return None
    try:
        return edit_json(text)
    except ValueError as exc:
        raise UsageError(f"--args: {exc}; nothing was decided") from None


async def stop(args: argparse.Namespace, stopped: str) -> int:
    """``tether stop``'s full path: through the store and the control channel."""
    store = context.store_of(args)
    await context.may_operate(args, "stop")
    return output.emit_reply(args, await control.stop(store, args.run_id, args.reason or stopped,
                                                      by=context.who(args)))


async def settle(args: argparse.Namespace, sent: Any) -> int:
    """The quick Stop was sent, but its process let go of the run or did not answer: say
    where the run is now, as the full path would."""
    store = context.store_of(args)
    reply = ControlReply(*sent.reply) if sent.reply is not None else None
    owner = Owner(**sent.owner, alive=True)
    return output.emit_reply(args, await control.answered(store, args.run_id, ControlRequest.from_dict(sent.request),
                                                          owner, reply))


COMMANDS = {"approve": approve, "reject": reject}
