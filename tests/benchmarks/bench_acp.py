"""ACP agents under Tether: Stop, the console with five agents streaming, permission round trips.

Four figures (issue 30, item 8), each against a baseline measured here, in this process:

1. **Stop -> run_stopped, per real agent** (OpenCode, Qwen Code; ``make agents`` installs
   them): a run of the agent on the scripted endpoint of ``tests/acp/endpoint.py`` (offline,
   loopback), prompted ``HOLD`` so the model's reply streams a few words and then holds; once
   it holds (plus a few random ms), ``harness.stop()``; the figure ends when a sink on the run
   sees its ``RunStopped``. One agent process per run, started as ``harness.start`` starts it
   (``initialize`` first, then the run driven with that session), with a clock on the session.
   Baseline, in the same trial: the agent's own part, from ``session/cancel`` being sent to
   its answer (``TurnEnded``); the rest is Tether's. (A bare client's cancel on a fresh agent
   process varies as much: OpenCode answered in 0.3-1.6 s in a first turn here, 0.2-0.3 s in a
   warm one, so a baseline on another process would compare the agents' warm-up, not Tether.)
2. **Agent frame -> on screen, five ACP agents streaming in one console**: the fake agent
   (``tests/acp/fake_agent.py``, ``normal`` mode, a prompt with ``SLOW``: a text chunk every
   20 ms until cancelled), subclassed here only to number its chunks and log the wall time at
   which it sends each one. Five such runs in the console driven headlessly as
   ``bench_console`` drives it; a hook on the transcript view notes when a chunk of the
   selected run first reaches the view, and the time of the screen refresh after it is the
   chunk's "on screen" time (``bench_stream``'s method). Only chunks that arrive while their
   run is selected count (a chunk that waited for its run to be selected is a key's effect,
   not a frame's). The figure is split at the moment the chunk became a Tether event (a
   harness sink on ``TextDelta``).
3. **Console key p99 in that scene**: up/down every 200 ms between two of the streaming
   runs, the effect being the newly selected run painted (``bench_console``'s ``Shown``
   message). Baseline: the same keys in the same console after the runs stopped.
4. **Tether's added latency per permission round trip**: the fake agent in ``normal`` mode
   (it asks permission for a write, and once allowed calls the client's
   ``fs/write_text_file``), and one real agent (Qwen Code) on a ``WRITE`` prompt. Two clocks in
   the client's session (a subclass of ``AcpSession`` that timestamps its events): from the
   agent's ``session/request_permission`` arriving to the answer being handed back
   (``PermissionSettled``, the response then goes out), and to the agent's next request
   arriving (its ``fs/write_text_file``: the full round trip through the agent). (a) bare:
   the session's ``on_event`` picks allow once at once; (b) Tether: a run with
   ``wait_for_decision=0`` whose sink, on ``ApprovalRequired``, calls ``harness.decide`` (the
   control channel: the run's ``control.jsonl`` and a poke over its socket), as any console
   does. One agent process per trial on both sides.

No timing is asserted: the figures are printed; docs/performance.md has a run's.

Run: ``.venv/bin/python -m tests.benchmarks --only acp``, or
``.venv/bin/python -m tests.benchmarks.bench_acp [--stops N] [--permissions N] [--real-permissions N]
[--scene-seconds S] [--agents N]`` (0 skips a part)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from tether.acp import AcpSession
from tether.acp.events import AcpEvent, PermissionAsked
from tether.agents.agent import AcpCommand, Agent
from tether.vocab.events import ApprovalRequired, Event, RunStopped, TextDelta
from tether.harness import Harness
from tether.tui.state.options import ConsoleOptions
from tether.demo.provider.server import running_app
from tether.vocab.state import Cancelled, Status
from tether.demo.agents import DEMO
from tests.acp import installed as real_agents
from tests.acp.conftest import FAKE_AGENT, fake_agent
from tests.acp.endpoint import ScriptedEndpoint
from tests.acp.procs import alive_in
from tests.benchmarks.bench_console import MeasuredConsole, _painted_after, _send_key
from tests.benchmarks.bench_stop import percentile

REPO = Path(__file__).resolve().parents[2]
STOP_TRIALS = 5
PERMISSION_TRIALS = 10
REAL_PERMISSION_TRIALS = 3
SCENE_AGENTS = 5
SCENE_SECONDS = 12.0
KEY_INTERVAL_S = 0.2  # bench_console's "fast typist" for real runs
TARGET_KEY_MS = 100.0
CAP_S = 120.0
GRACE_S = 5.0  # the agent file's default cancel grace

# The fake agent's SLOW stream, each chunk numbered and its send time logged (wall clock).
NUMBERED_AGENT = '''
import asyncio, sys, time
from typing import cast
import acp
from acp import schema
sys.path.insert(0, {fake_dir!r})
from fake_agent import FakeAgent

LOG = sys.argv[1]


class NumberedFake(FakeAgent):
    async def _normal(self, sid, text):
        if "SLOW" not in text:
            return await super()._normal(sid, text)
        cancelled = self.cancelled[sid]
        await self._say(sid, acp.update_agent_thought_text("Planning the write."))
        await self._say(sid, acp.update_plan([acp.plan_entry("Write out.txt", priority="high",
                                                             status="in_progress")]))
        with open(LOG, "a", buffering=1) as log:
            i = 0
            while not cancelled.is_set():
                sent = time.time()
                await self._say(sid, acp.update_agent_message_text(f"<{{i}}> "))
                log.write(f"{{i}} {{sent!r}}\\n")
                i += 1
                await asyncio.sleep(0.02)
        return schema.PromptResponse(stop_reason="cancelled")


asyncio.run(acp.run_agent(cast(acp.Agent, NumberedFake("normal"))))
'''
_MARK = re.compile(r"<(\d+)>")


def _stats(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return float("nan"), float("nan"), float("nan")
    return statistics.median(values), percentile(values, 99), max(values)


def _fmt(values: list[float], unit: str = "ms", digits: int = 1) -> str:
    p50, p99, top = _stats(values)
    return f"p50 {p50:.{digits}f} {unit}, p99 {p99:.{digits}f} {unit}, max {top:.{digits}f} {unit} (n={len(values)})"


def _fake_env() -> dict[str, str]:
    paths = [str(REPO), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])]
    return {"PYTHONPATH": os.pathsep.join(paths)}


class TimedSession(AcpSession):
    """The client's session with a clock on its events: the first time each kind was emitted
    (``time.perf_counter``), before anyone (Tether's run, a test's callback) sees it."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.marks: dict[str, float] = {}

    def _emit(self, event: AcpEvent) -> None:
        self.marks.setdefault(type(event).__name__, time.perf_counter())
        super()._emit(event)

    async def cancel(self, grace_s: float | None = None) -> bool:
        self.marks.setdefault("cancel", time.perf_counter())  # then session/cancel goes out
        return await super().cancel(grace_s)


async def _first(aw: Coroutine[Any, Any, Any], running: asyncio.Task[Any], what: str) -> None:
    """Wait for ``aw``, unless the run ends first (then say why)."""
    waiting = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({waiting, running}, timeout=CAP_S, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not waiting.done():
            waiting.cancel()
    if waiting in done:
        return
    if not done:
        raise RuntimeError(f"{what} did not happen within {CAP_S:g} s")
    failed = running.exception()
    state = running.result().state if failed is None else None
    raise RuntimeError(f"{what} did not happen: the run ended first ("
                       + (f"{state.status.value}: {state.error}" if state is not None else repr(failed)) + ")")


# ---- 1. Stop -> run_stopped, real agents --------------------------------------------------------

def _real_launch(name: str, home: Path, base_url: str) -> real_agents.AgentLaunch:
    home.mkdir(parents=True, exist_ok=True)
    launch = real_agents.launch_opencode if name == "opencode" else real_agents.launch_qwen
    return launch(home, base_url)


async def _held(endpoint: ScriptedEndpoint) -> None:
    """After the previous trial's held stream is gone (its client went away), the next one."""
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(endpoint.held_closed.wait(), 10)


async def stop_trials(name: str, n: int, tmp: Path) -> dict[str, Any]:
    """``n`` runs of the real agent ``name``, each stopped mid-stream; per run, harness.stop()
    -> RunStopped, and within it the agent's own part: session/cancel sent -> its answer."""
    rng = random.Random(30)
    endpoint = ScriptedEndpoint()
    workspace = tmp / f"stop-{name}" / "workspace"
    workspace.mkdir(parents=True)
    total_ms: list[float] = []
    agent_ms: list[float] = []
    ended: set[str] = set()
    killed = 0
    left: dict[int, str] = {}
    async with running_app(endpoint.app()) as base_url, Harness(tmp / f"stop-{name}" / "runs", agent_sets=(DEMO,)) as harness:
        launch = _real_launch(name, tmp / f"stop-{name}" / "home", base_url)
        agent = Agent(name=name, model="scripted", acp=AcpCommand(tuple(launch.command), launch.env, GRACE_S),
                      workspace=workspace)
        for _ in range(n):
            endpoint.held_closed.clear()
            marks: dict[str, float] = {}

            def sink(event: Event, marks: dict[str, float] = marks) -> None:
                if isinstance(event, RunStopped):
                    marks["stopped"] = time.perf_counter()

            # What harness.start does: the agent started (initialize) first, then the run made
            # and driven with it; the session is the client's own, with a clock on it.
            session = TimedSession(launch.command, workspace=workspace, env=launch.env, cancel_grace_s=GRACE_S)
            await session.start()
            try:
                state = harness.create(agent, "HOLD on")
                running = asyncio.create_task(harness.run(state.run_id, sinks=[sink], acp_session=session))
                await _first(endpoint.holding.wait(), running, f"{name}'s model stream")
                await asyncio.sleep(rng.uniform(0.02, 0.08))
                t0 = time.perf_counter()
                reply = await harness.stop(state.run_id, "stopped by the benchmark", by="bench")
                final = (await asyncio.wait_for(running, CAP_S)).state
            finally:
                await session.close()
            if not reply.ok or "stopped" not in marks:
                raise RuntimeError(f"{name}: the stop did not end the run: {reply.words}; {final.status.value}")
            total_ms.append((marks["stopped"] - t0) * 1000)
            agent_ms.append((session.marks["TurnEnded"] - session.marks["cancel"]) * 1000)
            interruption = final.interruption
            ended.add(f"{final.status.value}/{type(interruption).__name__}")
            if isinstance(interruption, Cancelled) and "process group was killed" in interruption.reason:
                killed += 1
            left |= alive_in(workspace)
            await _held(endpoint)
    left |= alive_in(workspace)
    return {"total": total_ms, "agent": agent_ms, "tether": [t - a for t, a in zip(total_ms, agent_ms)],
            "ended": ended, "killed": killed, "left": left}


# ---- 2 and 3. Five ACP agents streaming in one console ----------------------------------------

async def console_scene(n_agents: int, seconds: float, tmp: Path) -> dict[str, Any]:
    folder = tmp / "scene"
    folder.mkdir()
    script = folder / "numbered_agent.py"
    script.write_text(NUMBERED_AGENT.format(fake_dir=str(FAKE_AGENT.parent)))
    received: dict[tuple[str, int], float] = {}  # (run, chunk) -> when it became a TextDelta (wall)

    def on_delta(event: Event) -> None:
        if isinstance(event, TextDelta) and event.text:
            found = _MARK.search(event.text)
            if found:
                received[(event.run_id, int(found.group(1)))] = time.time()

    harness = Harness(folder / "runs", sinks=[on_delta], agent_sets=(DEMO,))
    app = MeasuredConsole(ConsoleOptions(timings=False), harness=harness)
    shown: dict[tuple[str, int], float] = {}
    showing: dict[str, Any] = {"rid": None, "last": -1}
    workspaces: list[Path] = []
    logs: dict[str, Path] = {}
    async with app.run_test(size=(160, 45)) as pilot:
        view = app.transcript_view
        show = view.show

        def watched_show(state: Any, footer: Any = None, *rest: Any, **kw: Any) -> None:  # the bench's hook
            show(state, footer, *rest, **kw)
            if state is None or footer is None:
                return
            text = footer.plain
            at = text.rfind("<")
            found = _MARK.match(text, at) if at >= 0 else None
            if found is None:
                return
            last = int(found.group(1))
            rid = state.run_id
            if rid != showing["rid"]:  # newly selected: what it shows already waited for the key, not counted
                showing["rid"], showing["last"] = rid, last
                return
            fresh = [(rid, i) for i in range(showing["last"] + 1, last + 1)]
            showing["last"] = max(showing["last"], last)
            if fresh:
                app.call_after_refresh(lambda: [shown.setdefault(k, time.time()) for k in fresh])

        view.show = watched_show  # type: ignore[method-assign]
        rids = []
        for n in range(n_agents):
            workspace = folder / f"workspace-{n}"
            workspace.mkdir()
            workspaces.append(workspace)
            log = folder / f"sent-{n}.log"
            agent = Agent(name=f"fake-{n}", model="acp:fake",
                          acp=AcpCommand((sys.executable, str(script), str(log)), _fake_env(), GRACE_S),
                          workspace=workspace)
            state = harness.create(agent, "stream SLOW", run_id=f"acp-{n}")
            logs[state.run_id] = log
            # What TetherApp.create_run does with a run it makes, for an agent given here.
            app.model.put_state(state)
            app.model.ours.add(state.run_id)
            app.pump.structure_dirty = True
            app.start_run(state.run_id)
            rids.append(state.run_id)
        deadline = time.monotonic() + CAP_S
        while not all(any(r == rid for r, _ in received) for rid in rids):
            if time.monotonic() > deadline or not app.active:
                raise RuntimeError(f"not all {n_agents} agents streamed: {sorted({r for r, _ in received})}")
            await pilot.pause(0.05)
        runs = app.console_screen.query_one("#runs")
        app.select(runs.order[0])
        runs.focus()
        await pilot.pause(0.3)
        received_before = len(received)
        keys, timeouts = await _keys(app, seconds, lambda: len(app.active) == n_agents)
        streamed_s = seconds
        chunks_in_scene = len(received) - received_before
        streaming = len(app.active)
        await app.stop_all()
        await app.workers.wait_for_complete()
        statuses = {app.states[rid].status.value for rid in rids}
        await pilot.pause(0.3)
        idle_keys, idle_timeouts = await _keys(app, 3.0, lambda: True)
    await harness.aclose()
    sent: dict[tuple[str, int], float] = {}
    for rid, log in logs.items():
        for line in log.read_text().splitlines():
            i, when = line.split()
            sent[(rid, int(i))] = float(when)
    counted = [k for k in shown if k in sent and k in received]
    left: dict[int, str] = {}
    for workspace in workspaces:
        left |= alive_in(workspace)
    return {
        "end_to_end": [(shown[k] - sent[k]) * 1000 for k in counted],
        "to_event": [(received[k] - sent[k]) * 1000 for k in counted],
        "event_to_screen": [(shown[k] - received[k]) * 1000 for k in counted],
        "keys": keys, "timeouts": timeouts, "idle_keys": idle_keys, "idle_timeouts": idle_timeouts,
        "chunks_per_s": chunks_in_scene / streamed_s, "streaming": streaming, "statuses": statuses, "left": left,
    }


async def _keys(app: Any, seconds: float, going: Callable[[], bool]) -> tuple[list[float], int]:
    """Up/down between the first two runs of the list every KEY_INTERVAL_S; per key, the time
    until the run it moved to was painted."""
    runs = app.console_screen.query_one("#runs")
    latencies: list[float] = []
    timeouts = 0
    down = True
    started = time.perf_counter()
    while time.perf_counter() - started < seconds and going():
        order = list(runs.order)
        at = order.index(app.selected) if app.selected in order else 0
        expected = order[max(0, min(len(order) - 1, at + (1 if down else -1)))]
        t0 = time.perf_counter()
        _send_key(app, "down" if down else "up")
        painted = await _painted_after(app, "selected", expected, t0)
        if painted is None:
            timeouts += 1
        else:
            latencies.append((painted - t0) * 1000)
        down = not down
        await asyncio.sleep(max(0.0, KEY_INTERVAL_S - (time.perf_counter() - t0)))
    return latencies, timeouts


# ---- 4. A permission round trip, bare and through Tether -----------------------------------------

def _round_trip(marks: dict[str, float]) -> tuple[float, float]:
    """(asked -> answered, asked -> the agent's next request), ms."""
    asked = marks["PermissionAsked"]
    return (marks["PermissionSettled"] - asked) * 1000, (marks["FileWritten"] - asked) * 1000


async def _bare_permission(command: list[str], env: dict[str, str], workspace: Path,
                           prompt: str) -> tuple[float, float]:
    def allow_at_once(event: AcpEvent) -> None:
        if isinstance(event, PermissionAsked):
            option = event.request.option("allow_once")
            assert option is not None, event.request
            event.request.decide(option.option_id)

    session = TimedSession(command, workspace=workspace, env=env, on_event=allow_at_once, cancel_grace_s=GRACE_S)
    async with session:
        await session.new_session()
        ended = await asyncio.wait_for(session.prompt(prompt), CAP_S)
    if ended.stop_reason != "end_turn" or "FileWritten" not in session.marks:
        raise RuntimeError(f"the bare write did not go through: {ended}, {sorted(session.marks)}")
    return _round_trip(session.marks)


async def _tether_permission(harness: Harness, agent: Agent, prompt: str,
                             refused: list[str]) -> tuple[float, float, tuple[float, float, float]]:
    """Through a run: the sink decides on ApprovalRequired with harness.decide. Also where the
    time goes: the agent's request -> the run's ApprovalRequired -> the decider's task runs
    (the run saved, waiting) -> the answer handed back (harness.decide: the control channel)."""
    assert agent.acp is not None and agent.workspace is not None
    marks: dict[str, float] = {}
    deciding: list[asyncio.Task[None]] = []

    async def decide(run_id: str) -> None:
        marks["decider"] = time.perf_counter()
        for _ in range(200):
            reply = await harness.decide(run_id, "approve", by="bench")
            if reply.ok:
                return
            refused.append(reply.words)  # too early for the run: say so, and try again
            await asyncio.sleep(0.005)

    def sink(event: Event) -> None:
        if isinstance(event, ApprovalRequired):
            marks["approval_required"] = time.perf_counter()
            deciding.append(asyncio.get_running_loop().create_task(decide(event.run_id)))

    # What harness.start does: the agent started first, then the run made and driven with it.
    session = TimedSession(agent.acp.argv, workspace=Path(agent.workspace), env=dict(agent.acp.env),
                           cancel_grace_s=agent.acp.cancel_grace_s)
    await session.start()
    try:
        state = harness.create(agent, prompt)
        final = (await asyncio.wait_for(harness.run(state.run_id, wait_for_decision=0, acp_session=session,
                                                    sinks=[sink]), CAP_S)).state
    finally:
        await session.close()
        for task in deciding:
            task.cancel()
    if final.status is not Status.COMPLETED or "FileWritten" not in session.marks:
        raise RuntimeError(f"the write through Tether did not go through: {final.status.value} {final.error}")
    answered, round_trip = _round_trip(session.marks)
    asked, required, decider = session.marks["PermissionAsked"], marks["approval_required"], marks["decider"]
    settled = session.marks["PermissionSettled"]
    split = ((required - asked) * 1000, (decider - required) * 1000, (settled - decider) * 1000)
    return answered, round_trip, split


async def permission_trials(kind: str, n: int, tmp: Path) -> dict[str, Any]:
    """``kind``: "fake" (the fake agent, normal mode) or a real agent's name. Bare and Tether
    trials alternate, one agent process each."""
    folder = tmp / f"permission-{kind}"
    workspace = folder / "workspace"
    workspace.mkdir(parents=True)
    out: dict[str, Any] = {"bare": [], "tether": [], "split": [], "refused": []}
    async with contextlib.AsyncExitStack() as stack:
        if kind == "fake":
            command, env = fake_agent("normal"), _fake_env()
            prompts = ["write the file"] * (n + 1)
        else:
            endpoint = ScriptedEndpoint()
            base_url = await stack.enter_async_context(running_app(endpoint.app()))
            launch = _real_launch(kind, folder / "home", base_url)
            command, env = launch.command, launch.env
            prompts = [f"WRITE {workspace / f'file-{i}.txt'} CONTENT trial {i}" for i in range(2 * n + 2)]
        agent = Agent(name=kind, model="acp:fake" if kind == "fake" else "scripted",
                      acp=AcpCommand(tuple(command), env, GRACE_S), workspace=workspace)
        harness = await stack.enter_async_context(Harness(folder / "runs", agent_sets=(DEMO,)))
        warm = 1 if kind == "fake" else 0  # the fake's first pair warms up (imports); a real agent is slow to start
        for i in range(n + warm):
            bare = await _bare_permission(command, env, workspace, prompts[(2 * i) % len(prompts)])
            answered, round_trip, split = await _tether_permission(harness, agent, prompts[(2 * i + 1) % len(prompts)],
                                                                      out["refused"])
            if i >= warm:
                out["bare"].append(bare)
                out["tether"].append((answered, round_trip))
                out["split"].append(split)
    out["left"] = alive_in(workspace)
    return out


def _print_permission(label: str, r: dict[str, Any]) -> None:
    bare_answer = [a for a, _ in r["bare"]]
    bare_rt = [b for _, b in r["bare"]]
    tether_answer = [a for a, _ in r["tether"]]
    tether_rt = [b for _, b in r["tether"]]
    b50, b99, _ = _stats(bare_rt)
    t50, t99, _ = _stats(tether_rt)
    a50, a99, _ = _stats(bare_answer)
    c50, c99, _ = _stats(tether_answer)
    print(f"permission round trip, {label}, {len(r['bare'])} trials each (one agent process per trial):")
    print(f"  request -> answered: bare client {_fmt(bare_answer, digits=2)}; "
          f"through Tether {_fmt(tether_answer, digits=2)}")
    print(f"  request -> the agent's next request (its fs/write_text_file): bare {_fmt(bare_rt, digits=2)}; "
          f"Tether {_fmt(tether_rt, digits=2)}")
    print(f"  Tether adds: p50 {t50 - b50:+.2f} ms, p99 {t99 - b99:+.2f} ms per round trip "
          f"(answered: p50 {c50 - a50:+.2f} ms, p99 {c99 - a99:+.2f} ms)")
    parts = list(zip(*r["split"]))
    print(f"  through Tether, request -> answered, p50 of each part: -> the run's ApprovalRequired "
          f"{statistics.median(parts[0]):.2f} ms, -> the decider runs (the run saved, waiting) "
          f"{statistics.median(parts[1]):.2f} ms, -> answered (harness.decide: control.jsonl and the socket) "
          f"{statistics.median(parts[2]):.2f} ms")
    if r["refused"]:
        print(f"  decisions refused as too early, then retried: {len(r['refused'])} "
              f"(first: {r['refused'][0]})")
    if r["left"]:
        print(f"  PROCESSES LEFT: {r['left']}")


# ---- the bench -------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stops", type=int, default=STOP_TRIALS, help="stops per real agent (0: skip)")
    parser.add_argument("--permissions", type=int, default=PERMISSION_TRIALS, help="fake-agent round trips (0: skip)")
    parser.add_argument("--real-permissions", type=int, default=REAL_PERMISSION_TRIALS,
                        help="Qwen Code round trips (0: skip)")
    parser.add_argument("--scene-seconds", type=float, default=SCENE_SECONDS, help="the console scene (0: skip)")
    parser.add_argument("--agents", type=int, default=SCENE_AGENTS, help="ACP agents streaming in the console")
    args = parser.parse_args(argv)
    missing = real_agents.missing()
    print(f"ACP agents under Tether, {os.cpu_count()} cores; percentiles are nearest-rank "
          "(with under 100 samples, p99 is the largest)")
    with tempfile.TemporaryDirectory(prefix="tether-bench-acp-") as tmp_dir:
        tmp = Path(tmp_dir)
        if args.stops:
            if missing:
                print(f"Stop -> run_stopped, real agents: skipped: {missing}")
            for name, label in (("opencode", "OpenCode"), ("qwen", "Qwen Code")):
                if missing:
                    break
                r = asyncio.run(stop_trials(name, args.stops, tmp))
                print(f"Stop mid-stream -> run_stopped, {label}, one agent process per run: harness.stop() -> "
                      f"RunStopped {_fmt(r['total'])}")
                print(f"  of which the agent's own: session/cancel sent -> its answer {_fmt(r['agent'])}; "
                      f"Tether's (the rest): {_fmt(r['tether'], digits=2)}; ended {', '.join(sorted(r['ended']))}; "
                      f"killed after the {GRACE_S:g} s grace: {r['killed']}; "
                      f"processes left: {len(r['left']) or 'none'}")
        if args.scene_seconds:
            s = asyncio.run(console_scene(args.agents, args.scene_seconds, tmp))
            print(f"{args.agents} ACP agents streaming in one console (the fake agent's SLOW stream, a chunk every "
                  f"20 ms each: {s['chunks_per_s']:.0f} chunks/s in all; {s['streaming']} still streaming at the end; "
                  f"ended {', '.join(sorted(s['statuses']))}):")
            print(f"  agent frame -> on screen (the agent's send -> the refresh after the selected run's transcript "
                  f"shows it): {_fmt(s['end_to_end'])}")
            print(f"    of which agent -> Tether event (pipe, acp, the run): {_fmt(s['to_event'])}; "
                  f"Tether event -> on screen: {_fmt(s['event_to_screen'])}")
            p99 = percentile(s["keys"], 99) if s["keys"] else float("nan")
            idle99 = percentile(s["idle_keys"], 99) if s["idle_keys"] else float("nan")
            print(f"  key to effect (up/down every {KEY_INTERVAL_S * 1000:.0f} ms between two streaming runs): "
                  f"{_fmt(s['keys'])}, {s['timeouts']} unanswered (target p99 <= {TARGET_KEY_MS:.0f} ms); "
                  f"baseline, the same console once the runs stopped: {_fmt(s['idle_keys'])} "
                  f"(p99 x{p99 / idle99:.2f})")
            if s["left"]:
                print(f"  PROCESSES LEFT: {s['left']}")
        if args.permissions:
            _print_permission("the fake agent (normal mode)",
                              asyncio.run(permission_trials("fake", args.permissions, tmp)))
        if args.real_permissions:
            if missing:
                print(f"permission round trip, Qwen Code: skipped: {missing}")
            else:
                _print_permission("Qwen Code (a WRITE prompt, allow once)",
                                  asyncio.run(permission_trials("qwen", args.real_permissions, tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
