"""Claude Code's hooks: a Claude Code session is a run on the store (issue 29, item 4).

``tether hook claude-code --install [DIR]`` writes the hooks into the project's
``.claude/settings.json``; Claude Code then runs ``tether hook claude-code`` at each hook with
the hook's JSON on stdin (docs/integrations.md, "Claude Code"). Each hook is a process of its
own that lives for one hook: the run lives on the store between them, under an id made from
Claude Code's ``session_id`` (``claude-<session_id>``), so each hook finds it:

* ``SessionStart`` opens the run (:meth:`tether.Harness.track`, source ``claude-code``);
* ``UserPromptSubmit`` adds the prompt; ``PreToolUse``, ``PostToolUse`` and ``Stop`` add what
  the session's transcript (``transcript_path``) holds that the run does not yet: the model's
  text and each model call's usage, checked against the run's budget and turn cap;
* ``PreToolUse`` (for the tools the policy's matcher names) puts the call on the store as a
  pending approval and waits for the decision from any console, ``tether approve|reject``, a
  standing rule or the deadline; it answers ``permissionDecision`` ``allow`` or ``deny`` with
  the decision in words, which the model reads;
* ``PostToolUse`` adds the call's result; ``SessionEnd`` ends the run ``completed``.

A Stop from a console lands at the next hook, as Claude Code offers no earlier interruption:
a ``PreToolUse`` that waits is denied at once; otherwise the next ``PreToolUse`` is denied and
the next ``PostToolUse`` or ``UserPromptSubmit`` answers ``continue: false`` (on ``PreToolUse``
Claude Code ignores it: measured with Claude Code 2.1.197, docs/integrations.md, "When Stop
lands"). What a hook reports of the past (the call's result
Claude Code received, the model's words and usage) is recorded before that Stop is honoured. A budget or a turn cap crossed ends the run, and
the session is stopped the same way.

A hook that Claude Code times out has its decision dropped, and Claude Code's own permissions
decide (with an allow-list, the call runs): so the installed ``PreToolUse`` hook's timeout is
the decision deadline plus :data:`TIMEOUT_MARGIN_S`, and the hook denies by itself, in words,
when the deadline passes (and, whatever a rule's own deadline says, :data:`ANSWER_BY_S` after it).
It never allows for want of an answer: a hook that cannot reach the store denies too.

``SessionEnd`` hooks get 1.5 s in all, less than it takes to load the harness on a busy
machine: that hook hands its JSON to a detached process of its own and returns at once.

Nothing of Tether is imported until a hook needs it, so the detaching hook is quick.

Claude Code's formats (its transcript, a tool's response, a hook's answer) are read and written
in :mod:`tether.integrations.claude_code_words`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.integrations import claude_code_words as talk
from tether.lazy import without_httpx_cli

if TYPE_CHECKING:
    from tether.integrations._common import Tracker
    from tether.store.protocol import Store
    from tether.vocab.state import RunState
    from tether.run.tracked import TrackedRun

__all__ = ["DEFAULT_DEADLINE_S", "DEFAULT_MATCHER", "EVENTS", "Policy", "install", "main", "run_id_of"]

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd")
"""The hooks ``--install`` writes, in the order Claude Code runs them."""
DEFAULT_MATCHER = "Bash|Write|Edit|MultiEdit|NotebookEdit"
"""The tools whose calls wait for a decision: Claude Code's ``PreToolUse`` matcher."""
DEFAULT_DEADLINE_S = 300.0
TIMEOUT_MARGIN_S = 30
"""The installed ``PreToolUse`` hook's timeout is the decision deadline plus this."""
ANSWER_BY_S = TIMEOUT_MARGIN_S - 10
"""A ``PreToolUse`` hook answers at the latest this long after the deadline, counted from its
start (10 s before Claude Code's timeout), however long a rule says to wait."""
_SLACK_S = 5.0  # between a decision deadline and the hook's last moment: the rejection's save
REPORT_TIMEOUT_S = 60
"""The other hooks' installed timeout."""
LOCK_WAIT_S = 30.0
"""How long a hook waits for the run while another hook of the session holds it (a call that
waits for a decision holds it until it is decided)."""
SOURCE = "claude-code"
RUN_PREFIX = "claude-"
MODULE = "tether.integrations.claude_code"
_OURS = (MODULE, "hook claude-code")
_MAX_PAYLOAD = 16 * 1024 * 1024
_SESSION = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"}


@dataclass(frozen=True)
class Policy:
    """What the installed hooks say: where the runs are, how long a call waits, which tools
    ask, the run's name and limits."""

    store: str | None = None
    deadline_s: float = DEFAULT_DEADLINE_S
    matcher: str = DEFAULT_MATCHER
    name: str = SOURCE
    budget_usd: float | None = None
    max_turns: int | None = None

    def options(self) -> list[str]:
        """The hook command's options that say this policy (the matcher is the hook's own)."""
        out = ["--store", self.store] if self.store else []
        out += ["--deadline", f"{self.deadline_s:g}"]
        if self.name != SOURCE:
            out += ["--name", self.name]
        if self.budget_usd is not None:
            out += ["--budget", f"{self.budget_usd:g}"]
        if self.max_turns is not None:
            out += ["--max-turns", str(self.max_turns)]
        return out


class HookError(Exception):
    """A hook or an install that cannot go on, in words."""


def main(argv: Sequence[str] | None = None) -> int:
    """``tether hook claude-code [OPTIONS]`` (a hook: its JSON on stdin, its answer on stdout),
    or ``tether hook claude-code --install [DIR] [OPTIONS]``. Returns the exit code: never 2
    for a hook, which Claude Code would read as "block" (a Stop hook's 2 keeps the session going)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    installing = any(a == "--install" or a.startswith("--install=") for a in argv)
    try:
        args = _parser().parse_args(argv)
        policy = _policy(args)
        if args.install is not None:
            path = install(Path(args.install), policy, local=args.local)
            print(f"Tether's Claude Code hooks are in {path}: {', '.join(EVENTS)}; calls to {policy.matcher} "
                  f"wait for a decision (denied after {policy.deadline_s:g} s without one).")
            return 0
    except HookError as exc:
        if installing:
            print(f"tether hook claude-code: {exc}", file=sys.stderr)
            return 2
        return _failed(_event_of(sys.stdin.buffer.read(_MAX_PAYLOAD)), f"the hook's command is wrong: {exc}")
    return hook(sys.stdin.buffer.read(_MAX_PAYLOAD), policy, detached=args.detached, argv=argv)


def hook(raw: bytes, policy: Policy, *, detached: bool = False, argv: Sequence[str] = ()) -> int:
    """Answer one hook: its answer (if any) as JSON on stdout, exit 0; a failure in words on
    stderr, exit 1, except on ``PreToolUse``, whose failure is a deny."""
    started = time.monotonic()
    event = _event_of(raw)
    if event == "SessionEnd" and not detached:
        return _detach(raw, argv)
    try:
        payload = json.loads(raw)
        if not isinstance(payload, dict):
            raise HookError("the hook's input is not a JSON object")
        answer = asyncio.run(_answer(payload, policy, started))
    except Exception as exc:  # never allow for want of an answer: a failure denies the call
        return _failed(event, str(exc) or type(exc).__name__)
    if answer:
        print(json.dumps(answer))
    return 0


def _failed(event: str | None, words: str) -> int:
    if event == "PreToolUse":
        print(json.dumps(talk.decision("deny", f"Tether could not put this call before an operator, so it is denied: "
                                           f"{words}")))
        return 0
    print(f"tether hook claude-code: {event or 'a hook'}: {words}", file=sys.stderr)
    return 1


def _event_of(raw: bytes) -> str | None:
    try:
        payload = json.loads(raw)
    except ValueError:
        return None
    event = payload.get("hook_event_name") if isinstance(payload, dict) else None
    return event if isinstance(event, str) else None


def run_id_of(session_id: str) -> str:
    """The run of a Claude Code session (the first one: a session resumed after its run ended
    goes on in ``claude-<session_id>-2``, and so on)."""
    if not _SESSION.match(session_id):
        raise HookError(f"session_id {session_id[:80]!r} is not one Claude Code gives")
    return RUN_PREFIX + session_id


# ---- installing ----------------------------------------------------------------------------


def install(directory: Path, policy: Policy, *, local: bool = False, python: str | None = None) -> Path:
    """Write Tether's hooks into ``DIR/.claude/settings.json`` (``settings.local.json`` with
    ``local``), keeping every other setting and every other hook; Tether's earlier hooks are
    replaced, so installing twice is installing once. Returns the file."""
    if policy.store and re.match(r"^postgres(ql)?://[^/@]*:[^/@]*@", policy.store):
        raise HookError("the store's URL holds a password, which would be written into the project's settings: "
                        "give Claude Code TETHER_STORE in its environment instead, and install without --store")
    folder = directory.expanduser().resolve()
    if not folder.is_dir():
        raise HookError(f"{folder} is not a folder: --install takes the project's folder")
    path = folder / ".claude" / ("settings.local.json" if local else "settings.json")
    settings: Any = {}
    if path.exists():
        try:
            settings = json.loads(path.read_text() or "{}")
        except ValueError as exc:
            raise HookError(f"{path} is not JSON ({exc}): fix it first; nothing was written") from None
    if not isinstance(settings, dict) or not isinstance(settings.get("hooks", {}), dict):
        raise HookError(f"{path} does not hold a settings object with a hooks object: nothing was written")
    command = shlex.join([python or sys.executable, "-m", MODULE, *policy.options()])
    hooks = dict(settings.get("hooks") or {})
    for event in EVENTS:
        kept = []
        for group in hooks.get(event) or []:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                others = [h for h in group["hooks"] if not _ours(h)]
                if not others:
                    continue
                group = {**group, "hooks": others}
            kept.append(group)
        timeout = math.ceil(policy.deadline_s) + TIMEOUT_MARGIN_S if event == "PreToolUse" else REPORT_TIMEOUT_S
        ours: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}
        if event in ("PreToolUse", "PostToolUse"):
            ours = {"matcher": policy.matcher if event == "PreToolUse" else "*", **ours}
        hooks[event] = [*kept, ours]
    settings["hooks"] = hooks
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tether-partial")
    partial.write_text(json.dumps(settings, indent=2) + "\n")
    os.replace(partial, path)
    return path


def _ours(entry: Any) -> bool:
    return isinstance(entry, dict) and any(mark in str(entry.get("command", "")) for mark in _OURS)


# ---- one hook ------------------------------------------------------------------------------


async def _answer(payload: dict[str, Any], policy: Policy, started: float) -> dict[str, Any] | None:
    # lazy: a hook loads Tether only as it needs it; SessionEnd's detaches first (see the module)
    from tether.harness import Harness
    from tether.store.spec import open_store

    event = payload.get("hook_event_name")
    if event not in EVENTS:
        return None  # a hook Tether does not use: nothing to say
    session = payload.get("session_id")
    if not isinstance(session, str):
        raise HookError("the hook's input has no session_id")
    store = open_store(policy.store)
    # PreToolUse: decided (or denied by itself) before Claude Code's timeout; others: a while.
    until = started + (policy.deadline_s + ANSWER_BY_S if event == "PreToolUse" else LOCK_WAIT_S)
    async with Harness(store=store) as harness:
        run_id = await _current_run(store, run_id_of(session))
        if run_id is None and event == "SessionEnd":
            return None
        if event == "SessionStart" or run_id is None:  # no SessionStart seen: hooks installed mid-session
            run_id = await _open(harness, store, policy, payload, run_id)
            if event == "SessionStart":
                return None
        handler = _HANDLERS[event]
        return await _reporting(harness, policy, run_id, payload, until,
                                lambda run: handler(run, payload, policy, until))


async def _current_run(store: Store, first: str) -> str | None:
    """The session's run: the last of ``claude-<id>``, ``claude-<id>-2``... on the store."""
    from tether.store.protocol import call  # lazy: hooks load Tether as they need it

    if not await call(store, store.exists, first):
        return None
    latest, n = first, 2
    while await call(store, store.exists, f"{first}-{n}"):
        latest, n = f"{first}-{n}", n + 1
    return latest


async def _open(harness: Tracker, store: Store, policy: Policy, payload: dict[str, Any], run_id: str | None) -> str:
    """Open the session's run, or go on with it: a session resumed after its run ended (or
    failed) gets the next run; one resumed after a Stop goes on in the stopped run, since its
    user started it again (a compaction or a clear does not)."""
    # lazy: a hook loads Tether only as it needs it; SessionEnd's detaches first (see the module)
    from tether.store.protocol import call
    from tether.vocab.state import Limits, Policies

    session = str(payload["session_id"])
    first = run_id_of(session)
    if run_id is not None:
        state = await call(store, store.load, run_id)
        resumed = payload.get("source") == "resume"
        if _going(state) or (state.status.resumable and resumed):
            async with harness.track(policy.name, source=SOURCE, run_id=run_id, attach=True, keep_open=True) as run:
                _keep(run, "SessionStart")  # a resumed session is a new Claude Code process
                _honour_a_stop(run)  # one made while no hook held the run
            return run_id
        if state.status.resumable:
            return run_id  # stopped, or a limit: the session's hooks keep saying so
        suffix = int(run_id.rsplit("-", 1)[1]) + 1 if run_id != first else 2
        run_id = f"{first}-{suffix}"
    limits = Limits(max_turns=policy.max_turns, budget_usd=policy.budget_usd)
    policies = Policies(decision_deadline_s=policy.deadline_s, on_deadline="reject")
    async with harness.track(policy.name, "", source=SOURCE, run_id=run_id or first, limits=limits,
                             policies=policies, keep_open=True) as run:
        # What the run remembers of its program: the session, and Claude Code's process and host
        # (the hook's process is gone in a moment), in place of the hook's own pid.
        spec = {"program": SOURCE, "session_id": session, "cwd": payload.get("cwd"),
                "transcript_path": payload.get("transcript_path"), "pid": _claude_pid(), "host": socket.gethostname()}
        if run.state.agent is not None:
            run.state.agent = replace(run.state.agent, spec={k: v for k, v in spec.items() if v})
        _keep(run, "SessionStart")
        # lazy: a hook loads Tether only as it needs it; SessionEnd's detaches first (see the module)
        from tether.workspaces import tracked  # its cwd, for tether diff: the files as they are now

        await tracked.record_folder(run, payload.get("cwd"), harness.workspaces_dir)
        return run.run_id


def _keep(run: TrackedRun, event: str) -> None:
    """Record Claude Code's process as the run's keeper (:mod:`tether.store.keeper`): while it lives
    on this host the run is live between hooks, and once it is gone without a ``SessionEnd``
    the run is orphaned. Each hook checks it, as a resumed session is a new process.
    ``SessionEnd``'s hook runs detached, its parent gone: it keeps what the run has."""
    from tether.store import keeper  # lazy: hooks load Tether as they need it

    agent = run.state.agent
    pid = _claude_pid() if event != "SessionEnd" else None
    if agent is None or pid is None:
        return
    kept = agent.spec.get("keeper")
    if isinstance(kept, dict) and kept.get("pid") == pid and keeper.living(kept):
        return
    record = keeper.record(pid, "Claude Code")
    if record is not None:
        run.state.agent = replace(agent, spec={**agent.spec, "keeper": record, "pid": pid, "host": record["host"]})


async def _reporting(harness: Tracker, policy: Policy, run_id: str, payload: dict[str, Any], until: float,
                     handler: Callable[[TrackedRun], Awaitable[dict[str, Any] | None]]) -> dict[str, Any] | None:
    """Attach to the run and report into it; while another hook of the session holds it, hand
    the report to that hook (:func:`_relay`), or, for a ``PreToolUse``, wait for the run. A Stop or a limit that ends the run there is answered as the hook must; so is a run
    that ended before (attaching would start it again)."""
    # lazy: a hook loads Tether only as it needs it; SessionEnd's detaches first (see the module)
    from tether.store.protocol import call
    from tether.vocab.state import StateError
    from tether.run.tracked import RunEnded

    store = harness.store
    event = str(payload["hook_event_name"])
    while True:
        state = await call(store, store.load, run_id)
        if not _going(state):
            return talk.after_the_end(event, state)
        entered, answer = False, None
        try:
            async with harness.track(policy.name, source=SOURCE, run_id=run_id, attach=True, keep_open=True) as run:
                entered = True
                try:
                    _keep(run, event)
                    with run.after_the_fact():  # what Claude Code has done is recorded, Stop or not
                        await _what_happened(run, payload)
                    _honour_a_stop(run)  # one made while no hook held the run
                    answer = await handler(run)
                    _honour_a_stop(run)  # one made while this hook held it
                except RunEnded as ended:  # the run ends in a known way as it leaves the block
                    answer = talk.stopping(event, talk.ended_words(run_id, ended.reason, getattr(ended, "by", None),
                                                           ended.interruption))
                    raise
            return answer
        except StateError:
            owner = None if entered else await call(store, store.owner, run_id)
            held = owner is not None and owner.alive and not owner.kept  # by another hook of the session
            if held and event in _RELAYED:
                return await _relay(store, run_id, event, payload)
            if not held or time.monotonic() >= until - _SLACK_S:
                raise
            await asyncio.sleep(0.1)  # another hook of the session holds the run: wait for it


_RELAYED = ("UserPromptSubmit", "PostToolUse", "Stop")
"""The hooks that report through the run's control channel when another hook holds the run
(a call waiting for a decision holds it until it is decided): a parallel tool's result is
not lost, and Claude Code is not kept waiting."""


async def _relay(store: Store, run_id: str, event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """Hand this hook's report to the hook that holds the run (:func:`tether.run.tracked.report_into`):
    it adds it, or, if it lets go first, the next hook to hold the run does. The model's text
    and usage are read from the transcript by the next hook that holds the run."""
    from tether.run.tracked import report_into  # lazy: hooks load Tether as they need it

    ops: list[dict[str, Any]] = []
    if event == "UserPromptSubmit" and isinstance(payload.get("prompt"), str) and payload["prompt"]:
        ops.append({"op": "user", "text": payload["prompt"]})
    elif event == "PostToolUse":
        tool, args, call_id = _call_of(payload)
        ops += [{"op": "tool_started", "call_id": call_id, "name": tool, "args": args},
                {"op": "tool_finished", "call_id": call_id, "output": talk.result_text(payload.get("tool_response"))}]
    if ops:
        reply = await report_into(store, run_id, ops, by=SOURCE)
        if reply is not None and not reply.ok:
            print(f"tether hook claude-code: {event}: {reply.words}", file=sys.stderr)
    return None


def _going(state: RunState) -> bool:
    """Whether the session's hooks go on reporting into the run: it runs, or a hook died while
    a call waited (Claude Code's timeout, or its user pressing Esc) and the call's wait ended
    with it."""
    from tether.vocab.state import NeedsApproval, Status  # lazy: hooks load Tether as they need it

    return state.status is Status.RUNNING or (state.status is Status.INTERRUPTED
                                              and isinstance(state.interruption, NeedsApproval))


def _honour_a_stop(run: TrackedRun) -> None:
    """Raise the Stop the run's signal carries: a run kept open must not outlive it."""
    from tether.run.tracked import Stopped  # lazy: hooks load Tether as they need it

    if run.signal.cancelled:
        raise Stopped(run.signal.reason or "stopped", run.signal.by)


# ---- what each hook reports ------------------------------------------------------------------


async def _what_happened(run: TrackedRun, payload: dict[str, Any]) -> None:
    """What every hook reports first, before a Stop is honoured: it has happened already.
    The transcript's model calls since the last hook (their words and usage), and at
    ``PostToolUse`` the call's result, which Claude Code has received whatever comes next."""
    await _catch_up(run, payload)
    if payload.get("hook_event_name") == "PostToolUse":
        tool, args, call_id = _call_of(payload)
        if not talk.started_here(run.state, call_id):  # a call no PreToolUse asked about
            await run.tool_started(call_id, tool, args)
        await run.tool_finished(call_id, talk.result_text(payload.get("tool_response")))


async def _prompt(run: TrackedRun, payload: dict[str, Any], policy: Policy, until: float) -> dict[str, Any] | None:
    prompt = payload.get("prompt")
    if isinstance(prompt, str) and prompt:
        await run.user(prompt)
    return None


async def _pre_tool(run: TrackedRun, payload: dict[str, Any], policy: Policy, until: float) -> dict[str, Any] | None:
    """Wait for the decision on a call, and answer it; denied by itself before Claude Code's
    timeout whatever the run's rules say."""
    tool, args, call_id = _call_of(payload)
    # The hook's deadline is the one its timeout was installed for: it wins over the run's,
    # is cut short if the hook was slow to get here, and never escalates past the timeout.
    policies = run.state.policies
    deadline = max(0.001, min(policy.deadline_s, until - _SLACK_S - time.monotonic()))
    run.state.policies = replace(policies, decision_deadline_s=deadline,
                                 on_deadline="stop" if policies.on_deadline == "stop" else "reject")
    try:
        decision = await asyncio.wait_for(run.approval(tool, args, call_id=call_id),
                                          max(0.001, until - time.monotonic()))
    except TimeoutError:  # a rule's own deadline outlasts the hook's: deny, and say so in the run
        words = (f"No decision within {policy.deadline_s + ANSWER_BY_S:g} s (the hook's own deadline, before "
                 "Claude Code's timeout): the call was declined. Nothing was done.")
        await run.tool_finished(call_id, words, ok=False, error="deadline")
        return talk.decision("deny", words)
    if not decision.approved:
        return talk.decision("deny", decision.words)
    await run.tool_started(call_id, tool, decision.args if decision.args is not None else args)
    return talk.decision("allow", decision.words, decision.args)


async def _reported(run: TrackedRun, payload: dict[str, Any], policy: Policy, until: float) -> dict[str, Any] | None:
    """``PostToolUse`` and ``Stop``: all they report has happened (:func:`_what_happened`);
    at a ``Stop`` (a turn's end), what the session has changed, for ``tether runs``."""
    if payload.get("hook_event_name") == "Stop":
        await _note_changes(run)
    return None


async def _session_end(run: TrackedRun, payload: dict[str, Any], policy: Policy, until: float) -> dict[str, Any] | None:
    await _note_changes(run)
    await run.answer("")
    return None


async def _note_changes(run: TrackedRun) -> None:
    """What the session has changed in its folder, recorded with the run (``tether runs``)."""
    from tether.workspaces import tracked  # lazy: hooks load Tether as they need it
    await tracked.note(run)


_HANDLERS: dict[str, Callable[[TrackedRun, dict[str, Any], Policy, float], Awaitable[dict[str, Any] | None]]] = {
    "UserPromptSubmit": _prompt, "PreToolUse": _pre_tool, "PostToolUse": _reported, "Stop": _reported,
    "SessionEnd": _session_end,
}


async def _catch_up(run: TrackedRun, payload: dict[str, Any]) -> None:
    """Report what the session's transcript holds and the run does not yet: each model call
    after the run's last usage report, its text and its usage (a limit crossed raises)."""
    path = payload.get("transcript_path")
    calls = await asyncio.to_thread(talk.model_calls, Path(path)) if isinstance(path, str) and path else []
    for model, usage, texts in calls[run.state.turns:]:
        for text in texts:
            run.text(text)
        prompt = sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                      "cache_read_input_tokens"))
        await run.usage(prompt, int(usage.get("output_tokens") or 0), model=model or None)


def _call_of(payload: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    tool, args, call_id = payload.get("tool_name"), payload.get("tool_input"), payload.get("tool_use_id")
    if not isinstance(tool, str) or not isinstance(call_id, str):
        raise HookError("the hook's input has no tool_name or tool_use_id")
    return tool, args if isinstance(args, dict) else {}, call_id


# ---- the process -----------------------------------------------------------------------------


def _detach(raw: bytes, argv: Sequence[str]) -> int:
    """Hand the hook to a process of its own that outlives Claude Code's short wait, and return."""
    command = [sys.executable, "-m", MODULE, *argv, "--detached"]
    try:
        child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        assert child.stdin is not None
        child.stdin.write(raw)
        child.stdin.close()
    except OSError as exc:
        return _failed("SessionEnd", f"could not hand the run's end to a process of its own: {exc}")
    return 0


def _claude_pid() -> int | None:
    """Claude Code's process: the first ancestor that is not the shell it runs a hook in."""
    pid = os.getppid()
    try:
        for _ in range(4):
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            if name not in _SHELLS:
                return pid
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat[stat.rfind(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # not argparse's exit 2: Claude Code reads 2 as "block"
        raise HookError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tether hook claude-code",
        description="Claude Code's hooks: a Claude Code session is a run on Tether's store, and the calls the "
                    "matcher names wait for a decision from any console. Without --install: one hook, its JSON on "
                    "stdin (Claude Code runs it).")
    p.add_argument("--install", nargs="?", const=".", metavar="DIR",
                   help="write the hooks into DIR/.claude/settings.json (default: this folder), keeping every "
                        "other setting; installing again replaces Tether's hooks")
    p.add_argument("--local", action="store_true",
                   help="with --install: into .claude/settings.local.json (this machine's, not committed)")
    p.add_argument("--store", metavar="URL|DIR",
                   help="the run store (default $TETHER_STORE, else $TETHER_HOME/runs)")
    p.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S, metavar="SECONDS",
                   help=f"a call nobody decides within this long is denied (default {DEFAULT_DEADLINE_S:g}); the "
                        f"hook's timeout is installed {TIMEOUT_MARGIN_S} s longer")
    p.add_argument("--matcher", default=DEFAULT_MATCHER, metavar="REGEX",
                   help=f"with --install: the tools whose calls wait for a decision (default {DEFAULT_MATCHER})")
    p.add_argument("--name", default=SOURCE, help=f"the run's agent name (default {SOURCE})")
    p.add_argument("--budget", type=float, metavar="USD",
                   help="end the session's run (and stop the session) when its usage is worth this much")
    p.add_argument("--max-turns", type=int, metavar="N", help="the same, after N model calls")
    p.add_argument("--detached", action="store_true", help=argparse.SUPPRESS)
    return p


def _policy(args: argparse.Namespace) -> Policy:
    if not (args.deadline > 0 and math.isfinite(args.deadline)):
        raise HookError(f"--deadline must be a positive number of seconds, not {args.deadline:g}")
    if args.budget is not None and not args.budget > 0:
        raise HookError(f"--budget must be a positive amount, not {args.budget:g}")
    if args.max_turns is not None and args.max_turns < 1:
        raise HookError(f"--max-turns must be at least 1, not {args.max_turns}")
    try:
        re.compile(args.matcher)
    except re.error as exc:
        raise HookError(f"--matcher {args.matcher!r} is not a regular expression ({exc})") from None
    return Policy(args.store, args.deadline, args.matcher, args.name, args.budget, args.max_turns)


if __name__ == "__main__":  # the installed hook's command: a process of its own for each hook
    without_httpx_cli()
    raise SystemExit(main())
