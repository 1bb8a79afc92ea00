"""``tether runs``, ``show``, ``trace`` and ``watch``: a store's runs read, listed, or followed
as they happen (``export-otel``, which sends one to a collector, is :mod:`tether.tui.cli.export`).
None changes a run (``runs`` applies passed decision deadlines, as any reader of the listing does)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from typing import Any

from tether.actions.deadlines import apply_due
from tether.observe.report import (SYSTEM_NOT_SENT, as_sent, listing, owner_words, recorded_all, recorded_records,
                                   summary, text_summary, warnings_of)
from tether.vocab.state import RunState, StateError, Status
from tether.vocab.text import clean
from tether.vocab.wording import commands_words, config_words, sandbox_words
from tether.store.protocol import call
from tether.tui.cli import context, output
from tether.tui.cli.parser import UsageError
from tether.workspaces.changes import stat_words


async def runs(args: argparse.Namespace) -> int:
    """From the index of summaries (``tether.store.files.index``), not by replaying every journal.
    A running run shows who runs it; one whose process died shows as ``orphaned`` (in
    ``--json``: ``status`` stays the saved ``running``, ``liveness`` says ``orphaned``)."""
    store = context.store_of(args)
    problems: dict[str, str] = {}
    runs = await call(store, store.summaries, live_only=args.live, problems=problems)
    now = time.time()
    if any(r.waiting and (r.interruption or {}).get("deadlineAt", now + 1) <= now for r in runs):
        # Deadlines of calls nobody is there to answer are applied by the listing (and the
        # listing then shows what they did).
        for words in await call(store, apply_due, store, now=now):
            print(f"tether: {clean(words)}", file=sys.stderr)
        problems.clear()
        runs = await call(store, store.summaries, live_only=args.live, problems=problems)
    if args.json:
        recorded = await call(store, recorded_all, store, [r.run_id for r in runs])
        print(json.dumps([listing(r, *recorded[r.run_id]) for r in runs]))
    else:
        lines = []
        for r in runs:
            line = f"{r.run_id:<40} {r.shown_status:<20} {r.model:<16} turns={r.turns:<4} cost=${r.cost_usd:.4f}"
            if r.source != "tether":  # an ACP agent's, or a program's on another framework
                line += f"  [{r.source}]"
            if r.workspace:  # what it changed in its own workspace, as of its last operation's end
                line += f"  {_changed(r.workspace)}"
            if r.forked_from:  # its lineage: tether fork made it from that run's checkpoint
                line += f"  fork of {r.forked_from.get('run_id')}@{r.forked_from.get('step')}"
            if r.liveness is not None:
                line += f"  {owner_words(r.run_id, r.liveness, r.owner)}"
            elif (r.interruption or {}).get("type") == "approval":
                waiting = r.interruption or {}
                line += f"  waits for approval of {waiting.get('toolName')}"
                if int(waiting.get("needed") or 1) > 1:  # a two-person call: how far it is
                    line += f" ({len(waiting.get('approvers') or [])} of {waiting['needed']} approved)"
                holder = await call(store, store.owner, r.run_id)
                if holder is not None and holder.alive:  # a process keeps it, waiting for a decision
                    line += f" (pid {holder.where} waits for the decision)"
            lines.append(clean(line))
        if not runs:
            lines.append(f"no {'live ' if args.live else ''}runs in {store.where}")
        sys.stdout.write("\n".join(lines) + "\n")
    for run_id, problem in problems.items():
        print(f"tether: skipped {run_id}: {problem}", file=sys.stderr)
    return 0


def _changed(workspace: dict[str, Any]) -> str:
    if workspace.get("stage") == "discarded":
        return "(workspace discarded)"
    counts = workspace.get("changes")
    if not counts:
        return f"({workspace.get('kind')} not made yet)"
    return stat_words(counts.get("files", 0), counts.get("added", 0), counts.get("deleted", 0))


async def show(args: argparse.Namespace) -> int:
    store = context.store_of(args)
    state = await call(store, store.load, args.run_id)
    records = await call(store, lambda: list(store.read_trace(args.run_id)))
    tool_runs, ms = recorded_records(records)
    warnings = warnings_of(records)
    configs = [r for r in records if r.get("kind") == "config_options"]  # an ACP agent's, as last stated
    owner = await call(store, store.owner, args.run_id) if state.status is Status.RUNNING else None
    liveness = None if state.status is not Status.RUNNING else "running" if owner and owner.alive else "orphaned"
    messages = as_sent(state)
    if args.json:
        print(json.dumps({**summary(state, tool_runs, ms), "liveness": liveness,
                          "workspace": None if state.run_workspace is None else state.run_workspace.listed(),
                          "owner": None if owner is None else owner.to_dict(), "warnings": warnings,
                          "messages": messages, "rewinds": state.rewinds, "forked_from": state.forked_from,
                          "operator": state.operator, "operator_name": state.operator_name,
                          "config_options": configs[-1].get("options") if configs else None}))
        return 0
    print(text_summary(state, len(tool_runs), ms))
    if state.of_acp_agent:  # where the agent could write, as its last session said
        sessions = [r for r in records if r.get("kind") == "agent_session"]
        box = sessions[-1].get("sandbox") if sessions else None
        print(clean(sandbox_words(box)) if box else "sandbox: none (the agent could write wherever its user can)")
        if configs:  # the agent's session config options, as it last stated them
            print(clean(config_words(configs[-1].get("options") or [])))
        offered = [r for r in records if r.get("kind") == "agent_commands"]
        if offered:  # the agent's slash commands, as it last listed them
            print(clean(f"slash commands: {commands_words(offered[-1].get('commands') or [])}"))
    if liveness is not None:
        label = "owner" if liveness == "running" else "orphaned"
        print(clean(f"{label}: {owner_words(state.run_id, liveness, owner, long=True)}"))
    if state.run_workspace is not None:
        print(workspace_words(state, records))
    if state.rewinds or state.forked_from:
        for line in rewind_lines(state, records, everything=getattr(args, "all", False)):
            print(clean(line))
    if state.of_acp_agent:  # in place of the system prompt the agent never received
        print(f"({SYSTEM_NOT_SENT})")
    placed = {w["call_id"] for w in warnings  # a warning on no call (a restart, say) goes at the end
              if w["call_id"] and any(m.get("tool_call_id") == w["call_id"] for m in messages)}
    for message in messages:
        role = message.get("role")
        if message.get("content"):
            print(f"[{role}] {clean(message['content'])}")
        for tool_call in message.get("tool_calls") or ():
            fn = tool_call.get("function") or {}
            print(clean(f"[{role} → {fn.get('name')}] {fn.get('arguments')}  ({tool_call.get('id')})"))
        if role == "tool":  # a warning about the call goes after its result
            for warning in warnings:
                if warning["call_id"] == message.get("tool_call_id"):
                    print(clean(f"[warning] {warning['text']}"))
    for warning in warnings:
        if warning["call_id"] not in placed:
            print(clean(f"[warning] {warning['text']}"))
    return 0


def workspace_words(state: RunState, records: list[dict[str, Any]]) -> str:
    """Where the run works, how far its workspace got, and its setup commands' output (from the trace)."""
    ws = state.run_workspace
    assert ws is not None
    where = f"{ws.kind} {ws.path or '(not made yet)'}" + (f" on {ws.branch}" if ws.branch else "")
    if ws.kind == "none":  # a session's own folder, recorded (Claude Code's hooks)
        where = f"its session's own folder {ws.root}, its changes read against the files at its start"
    elif ws.base_commit:
        where += f" from {ws.base_commit[:12]}"
    out = [f"workspace: {where}" + (f", host {ws.host}" if ws.host else "") + f" ({ws.stage})"]
    if ws.changes:
        out.append(f"changes: {_changed(ws.listed())} (tether diff {state.run_id})")
    for record in records:
        if record.get("kind") != "workspace_setup":
            continue
        code = record.get("exit_code")
        said = "could not start" if code is None else f"exit {code}"
        out.append(f"setup: {record.get('command')}  ({said}, {record.get('ms', 0):.0f} ms)")
        out += [f"  | {line}" for line in str(record.get("output") or "").rstrip("\n").splitlines()]
    return clean("\n".join(out))


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


async def trace(args: argparse.Namespace) -> int:
    store = context.store_of(args)
    path = store.trace_file(args.run_id)
    if path is not None:  # the bytes as written
        if not path.exists():
            raise StateError(f"no trace for run {args.run_id} at {path}")
        sys.stdout.write(path.read_text(encoding="utf-8"))  # JSON lines: controls are escaped
        return 0
    if not await call(store, store.exists, args.run_id):
        raise StateError(f"no run {args.run_id} in {store.where}")
    records = await call(store, lambda: list(store.read_trace(args.run_id)))
    # The lines as the trace writer wrote them (ASCII JSON: controls and line breaks escaped).
    sys.stdout.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return 0


async def watch(args: argparse.Namespace) -> int:
    """Follow a run (or, with --all, every run) as its events are written, by whichever
    process runs it: its last trace lines first, then each new one, worded as in the
    console's trace pane. Ends when the run stops, and Ctrl-C ends it (exit 0)."""
    stop = asyncio.Event()  # Ctrl-C ends the watch quietly, from here on
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    if isinstance(sys.stdout, output.Output):  # and so does its reader going away (| head)
        sys.stdout.on_close.append(stop.set)
    try:
        def note(text: str) -> None:
            print(clean(text), file=sys.stderr, flush=True)

        if args.all and args.run_id:
            raise UsageError("give a RUN_ID or --all, not both")
        store = context.store_of(args)
        lines = max(0, args.lines)
        if args.all:
            await store.follow_all(sys.stdout, stop_event=stop, backlog=lines,
                                   on_ready=lambda: note(f"watching every run in {store.where} (Ctrl-C to stop)"))
            return 0
        run_id = args.run_id
        if run_id is None:  # the most recently created run, from the index
            summaries = await call(store, store.summaries)
            newest = max(summaries, key=lambda s: (s.created_at, s.run_id), default=None)
            if newest is None:
                raise StateError(f"no runs in {store.where}")
            run_id = newest.run_id
        if not await call(store, store.exists, run_id):
            raise StateError(f"no run {run_id} in {store.where}")
        await store.follow_run(run_id, sys.stdout, stop_event=stop, backlog=lines,
                               on_ready=lambda: note(f"watching {run_id} until it stops (Ctrl-C to stop watching)"))
        return 0
    except BrokenPipeError:  # the reader went away (tether watch | head)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        loop.remove_signal_handler(signal.SIGINT)


COMMANDS = {"runs": runs, "show": show, "trace": trace, "watch": watch}
