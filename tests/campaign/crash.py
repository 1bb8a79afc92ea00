"""The crash campaign: kill a run at every event boundary, resume it, compare.

For each scenario an uninterrupted *reference* flow runs first (``tether run``, then
``tether approve`` for as long as the run waits for an approval, when the scenario is
the approved one), as subprocesses against the scripted provider on loopback, logging
the boundaries each process passes (:mod:`tests.campaign.shim`): their number is N.
Then for every k in 1..N the same flow runs with ``TETHER_CRASH_AT`` set so that the
process holding the k-th boundary of the flow exits hard there; the driver loads the
saved state (it must load), and resumes (``tether resume``, or ``tether approve`` when
the run waits for one) until the run ends. In *double* mode the first resume also
crashes, at its own k-th boundary if it has that many. In *SIGKILL* mode no hook is
set: the first process is killed for real once its trace holds k lines, wherever it is.

What a crash point must show, against the reference (:func:`compare`):

* the same exit code, status and answer; the same turns, tokens and cost;
* provider requests = the reference's + one per crash that fell between a reply
  arriving and its save (the only window in which resuming must ask again); after a
  SIGKILL, whose place is unknown, at most one more per kill;
* no write performed twice: each ledger key begun at most once (completed at most once
  after a SIGKILL, which can land between a write's intent and its act), the same keys
  as the reference, and the same files left in the workspace;
* every trace line parseable, ``seq`` = 1..n, every saved turn and tool result traced,
  the last event a ``run_stopped`` with the final status;
* the saved state loadable after every crash.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.campaign.shim import CRASH_EXIT_CODE
from tether.demo.provider import create_app
from tether.vocab.state import NeedsApproval, RunState, StateError, Status
from tether.store.files.layout import LEDGER_FILE, TRACE_FILE
from tether.store.files.store import RunStore

from tests.campaign.server import CountingApp, serving
from tests.support import cli_here, load_all

REPO = Path(__file__).resolve().parents[2]
RUN_ID = "victim"
MAX_PROCESSES = 12  # a flow that needs more has stopped converging
PROCESS_CAP_S = 120.0


@dataclass(frozen=True)
class Scenario:
    name: str
    approve: bool = False  # answer each approval interruption with ``tether approve``
    auto_approve: tuple[str, ...] = ()
    model: str | None = None  # the scripted scenario run (default: the name)
    rule: tuple[str, ...] = ()  # ``tether rules add`` arguments, added to the store before the run

    def run_args(self, base_url: str) -> list[str]:
        args = ["run", self.model or self.name, "--base-url", base_url, "--run-id", RUN_ID]
        if self.auto_approve:
            args += ["--auto-approve", ",".join(self.auto_approve)]
        return args


SCENARIOS = {
    "plan": Scenario("plan"),
    "destructive": Scenario("destructive", approve=True),
    "repeat_write": Scenario("repeat_write", auto_approve=("delete_file",)),
    "research": Scenario("research"),
    # The delete decided by a standing rule, not a person: a crash between the rule matching
    # and the decision's save must decide again on resume, once.
    "destructive_ruled": Scenario("destructive_ruled", model="destructive",
                                  rule=("--allow", "delete_file", "--where", "path=*.log", "--reason", "scratch logs")),
}


@dataclass
class Process:
    """One ``tether`` process of a flow, and the boundaries it passed."""

    command: str
    exit_code: int
    boundaries: list[str]
    crash_at: int | None
    stdout: str
    stderr: str

    @property
    def killed(self) -> bool:
        return self.exit_code == -signal.SIGKILL

    @property
    def crashed(self) -> bool:
        """Died without cleaning up: the crash hook, or a real SIGKILL."""
        return self.exit_code == CRASH_EXIT_CODE or self.killed

    @property
    def lost_a_reply(self) -> bool:
        """Died after a model reply arrived and before it was saved: resuming asks again."""
        if self.exit_code != CRASH_EXIT_CODE or not self.boundaries:
            return False
        last, before = self.boundaries[-1], self.boundaries[-2] if len(self.boundaries) > 1 else ""
        return last == "before_save_reply" or (last == "before_save" and before == "before_save_reply")


@dataclass
class Flow:
    """A run driven to its end across processes, and what it left on disk."""

    processes: list[Process] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    requests: int = 0
    states: dict[str, RunState] = field(default_factory=dict)
    traces: dict[str, list[bytes]] = field(default_factory=dict)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def crashes(self) -> list[Process]:
        return [p for p in self.processes if p.crashed]

    @property
    def boundaries(self) -> list[str]:
        return [b for p in self.processes for b in p.boundaries]


CrashPlan = Callable[[int, list[Process]], int | None]
"""(process index, processes so far) -> the TETHER_CRASH_AT for the next process, or None."""


def never(_i: int, _done: list[Process]) -> int | None:
    return None


def crash_at(k: int, reference: Flow, *, double: bool = False) -> CrashPlan:
    """Crash at the k-th boundary of the flow; until that crash the flow is the reference's,
    so process i starts after the boundaries reference process i-1 passed."""

    def plan(i: int, done: list[Process]) -> int | None:
        if any(p.crashed for p in done):
            first_resume = done[-1].crashed and sum(p.crashed for p in done) == 1
            return k if double and first_resume else None
        return k - sum(len(p.boundaries) for p in reference.processes[:i])

    return plan


def _tether(cell: Path, args: list[str], crash: int | None, kill_after: int | None = None) -> Process:
    """One ``tether`` process through the boundary-logging shim. ``crash`` sets
    TETHER_CRASH_AT; ``kill_after`` SIGKILLs the process once the run's trace holds that
    many lines (if it gets there: a process that finishes first just finishes)."""
    log = cell / f"boundaries.{sum(1 for _ in cell.glob('boundaries.*'))}"
    log.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "TETHER_"))}
    env.update(TETHER_BOUNDARY_LOG=str(log), TETHER_HOME=str(cell / "home"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    if crash is not None:
        env["TETHER_CRASH_AT"] = str(crash)
    command = [sys.executable, "-m", "tests.campaign.shim", *args, "--json",
               "--runs-dir", str(cell / "runs"), "--workspace", str(cell / "ws")]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=REPO) as proc:
        if kill_after is not None:
            _kill_when(proc, cell / "runs" / RUN_ID / TRACE_FILE, kill_after)
        try:
            out, err = proc.communicate(timeout=PROCESS_CAP_S)
        finally:
            proc.kill()
    return Process(args[0], proc.returncode, log.read_text().split(), crash, out, err)


def _kill_when(proc: subprocess.Popen[str], trace: Path, lines: int) -> None:
    """SIGKILL ``proc`` as soon as ``trace`` has ``lines`` lines; poll, the process is fast."""
    deadline = time.monotonic() + PROCESS_CAP_S
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if trace.read_bytes().count(b"\n") >= lines:
                proc.send_signal(signal.SIGKILL)
                return
        except FileNotFoundError:
            pass
        time.sleep(0.001)


def drive(cell: Path, scenario: Scenario, base_url: str, plan: CrashPlan, counter: CountingApp,
          kill_after: int | None = None) -> Flow:
    """Run ``scenario`` in ``cell`` to its end, crashing where ``plan`` says (or SIGKILLing
    the first process after ``kill_after`` trace lines), resuming after."""
    if cell.exists():
        shutil.rmtree(cell)  # a scratch cell of this campaign: start from nothing
    cell.mkdir(parents=True)
    tag = "-".join(cell.parts[-2:])
    store = RunStore(cell / "runs")
    flow = Flow()
    counter.requests.pop(tag, None)
    if scenario.rule:  # set-up, not a process of the flow: the CLI's main in this process
        added = cli_here("rules", "add", *scenario.rule, "--as", "campaign", "--runs-dir", str(cell / "runs"), cwd=REPO)
        if added.returncode != 0:
            raise RuntimeError(f"tether rules add {' '.join(scenario.rule)}: {added.stderr.strip()}")
    args = scenario.run_args(f"{base_url}/{tag}/v1")
    while True:
        if len(flow.processes) >= MAX_PROCESSES:
            flow.problems.append(f"the run did not end after {MAX_PROCESSES} processes")
            break
        first = not flow.processes
        process = _tether(cell, args, plan(len(flow.processes), flow.processes), kill_after if first else None)
        flow.processes.append(process)
        if not process.crashed and process.exit_code not in (0, 1, 3, 4, 5):
            flow.problems.append(f"{process.command} exited {process.exit_code}: {process.stderr.strip()[-300:]}")
            break
        try:
            state = store.load(RUN_ID)
            _, unreadable = load_all(store)
        except StateError as exc:
            flow.problems.append(f"state unloadable after {process.command} (exit {process.exit_code}): {exc}")
            break
        if unreadable:
            flow.problems.append(f"unloadable runs after {process.command}: {unreadable}")
            break
        waiting = state.status is Status.INTERRUPTED and isinstance(state.interruption, NeedsApproval)
        if state.status is Status.RUNNING:
            args = ["resume", RUN_ID]
        elif waiting and scenario.approve:
            args = ["approve", RUN_ID]
        else:
            break
    flow.requests = counter.requests[tag]
    _collect(flow, store, cell / "ws")
    return flow


def _collect(flow: Flow, store: RunStore, workspace: Path) -> None:
    states, _ = load_all(store)
    flow.states = {s.run_id: s for s in states}
    for run_id in flow.states:
        directory = store.run_dir(run_id)
        trace = directory / TRACE_FILE
        flow.traces[run_id] = trace.read_bytes().splitlines(keepends=True) if trace.exists() else []
        ledger = directory / LEDGER_FILE
        if ledger.exists():
            flow.ledger += [json.loads(line) for line in ledger.read_bytes().splitlines() if line.strip()]
    if workspace.is_dir():
        flow.files = {p.name: p.read_bytes() for p in sorted(workspace.iterdir()) if p.is_file()}


# ---- the invariants --------------------------------------------------------------

def _account(state: RunState) -> dict[str, Any]:
    return {"status": state.status.value, "answer": state.answer, "turns": state.turns,
            "prompt_tokens": state.prompt_tokens, "completion_tokens": state.completion_tokens,
            "cost_usd": round(state.cost_usd, 8), "per_turn_prompt_tokens": state.per_turn_prompt_tokens,
            "children": len(state.children)}


def compare(flow: Flow, reference: Flow) -> list[str]:
    """Every way ``flow`` differs from what the reference promises; empty when it holds."""
    problems = list(flow.problems)
    if problems or RUN_ID not in flow.states:
        return problems or ["no saved run"]
    last, ref_last = flow.processes[-1], reference.processes[-1]
    if not last.crashed and last.exit_code != ref_last.exit_code:
        problems.append(f"final exit code {last.exit_code}, reference {ref_last.exit_code}")
    for run_id, ref_state in reference.states.items():
        state = flow.states.get(run_id)
        if state is None:
            problems.append(f"run {run_id} missing")
            continue
        mine, theirs = _account(state), _account(ref_state)
        for key in theirs:
            if mine[key] != theirs[key]:
                problems.append(f"{run_id}: {key} {mine[key]!r} != reference {theirs[key]!r}")
    lost = sum(p.lost_a_reply for p in flow.processes)
    kills = sum(p.killed for p in flow.processes)
    if kills and not reference.requests <= flow.requests <= reference.requests + kills:
        problems.append(f"provider requests {flow.requests} not within reference {reference.requests} "
                        f"+ {kills} SIGKILL(s)")
    elif not kills and flow.requests != reference.requests + lost:
        problems.append(f"provider requests {flow.requests} != reference {reference.requests} "
                        f"+ {lost} reply(ies) lost before their save")
    problems += _writes(flow, reference)
    for run_id, lines in flow.traces.items():
        problems += [f"{run_id} trace: {p}" for p in trace_problems(lines, flow.states[run_id])]
    return problems


def _writes(flow: Flow, reference: Flow) -> list[str]:
    problems = []
    begun = Counter(r["key"] for r in flow.ledger if r.get("status") == "begun")
    done = Counter(r["key"] for r in flow.ledger if r.get("status") == "done")
    # A SIGKILL can land between a write's intent and its act, so the retry begins it again
    # (and finds the file there, or gone); the hook's boundaries are outside the tool.
    twice = sorted(key for key, n in (done if any(p.killed for p in flow.processes) else begun).items() if n > 1)
    if twice:
        problems.append(f"write performed more than once under {twice}")
    ref_begun = {r["key"] for r in reference.ledger if r.get("status") == "begun"}
    if set(begun) != ref_begun:
        problems.append(f"writes {sorted(begun)} != reference {sorted(ref_begun)}")
    if flow.files != reference.files:
        problems.append(f"workspace {sorted(flow.files)} != reference {sorted(reference.files)}")
    return problems


def trace_problems(lines: list[bytes], state: RunState) -> list[str]:
    """A trace is complete when every line parses, seq runs 1..n, every saved turn and
    tool result is in it, and it ends with the run's final stop."""
    problems, records = [], []
    for n, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            assert line.endswith(b"\n") and record["run_id"] == state.run_id and record["ts"] > 0
            records.append(record)
        except (ValueError, KeyError, TypeError, AssertionError):
            problems.append(f"line {n} is not a complete event of this run: {line[:80]!r}")
    seqs = [r.get("seq") for r in records]
    if seqs != list(range(1, len(seqs) + 1)):
        problems.append(f"seq is not 1..{len(seqs)}: {_runs_of(seqs)}")
    traced_turns = {r["turn"] for r in records if r["kind"] == "turn"}
    missing = sorted(set(range(1, state.turns + 1)) - traced_turns)
    if missing:
        problems.append(f"saved turn(s) {missing} never traced")
    results = {r["call_id"] for r in records if r["kind"] == "tool_result"}
    answered = [m["tool_call_id"] for m in state.messages if m.get("role") == "tool"]
    untraced = [c for c in answered if c not in results]
    if untraced:
        problems.append(f"saved tool result(s) {untraced} never traced")
    final = records[-1] if records else {}
    if final.get("kind") != "run_stopped" or final.get("status") != state.status.value:
        problems.append(f"last event is {final.get('kind')}/{final.get('status')}, not run_stopped/{state.status.value}")
    return problems


def _runs_of(seqs: list[Any]) -> str:
    text = ",".join(str(s) for s in seqs)
    return text if len(text) < 120 else text[:117] + "..."


# ---- the campaign ----------------------------------------------------------------

CRASH, DOUBLE, SIGKILL = "crash", "crash + 2nd crash in resume", "SIGKILL"


@dataclass
class Point:
    """One crash point's result."""

    scenario: str
    mode: str
    k: int
    where: str  # the boundary crashed at, or the trace line a SIGKILL waited for
    crashes: int
    lost_replies: int
    processes: int
    problems: list[str]

    @property
    def survived(self) -> bool:
        return not self.problems


@dataclass
class ScenarioResult:
    scenario: str
    boundaries: int
    points: list[Point]

    def of(self, mode: str) -> list[Point]:
        return [p for p in self.points if p.mode == mode]


class Campaign:
    """One loopback provider with a request counter, a scratch directory, a worker pool size."""

    def __init__(self, root: Path, workers: int | None = None) -> None:
        self.root = root
        self.counter = CountingApp(create_app())
        self.workers = workers or max(2, os.cpu_count() or 2)
        self._serving = serving(self.counter)
        self.base_url = ""

    def __enter__(self) -> "Campaign":
        self.base_url = self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(*exc)

    def reference(self, scenario: Scenario) -> Flow:
        flow = drive(self.root / scenario.name / "reference", scenario, self.base_url, never, self.counter)
        if flow.problems or flow.crashes:
            raise RuntimeError(f"{scenario.name}: the reference flow did not run cleanly: {flow.problems}")
        return flow

    def point(self, scenario: Scenario, reference: Flow, mode: str, k: int) -> Point:
        cell = self.root / scenario.name / f"{mode.split()[0].lower()}{'2' if mode == DOUBLE else ''}-{k}"
        if mode == SIGKILL:
            flow = drive(cell, scenario, self.base_url, never, self.counter, kill_after=k)
            where = f"after trace line {k}"
        else:
            flow = drive(cell, scenario, self.base_url, crash_at(k, reference, double=mode == DOUBLE), self.counter)
            where = reference.boundaries[k - 1]
        problems = compare(flow, reference)
        if mode != SIGKILL and not flow.crashes:
            problems.append(f"no crash happened at k={k}")
        return Point(scenario.name, mode, k, where, len(flow.crashes),
                     sum(p.lost_a_reply for p in flow.processes), len(flow.processes), problems)

    def sweep(self, name: str, ks: Iterable[int] | None = None, *, modes: Iterable[str] = (CRASH,)) -> ScenarioResult:
        """Crash ``name`` at each k (default every boundary, and for SIGKILL every trace line
        of the first process), each in its own cell, in parallel."""
        scenario = SCENARIOS[name]
        reference = self.reference(scenario)
        n = len(reference.boundaries)
        first_lines = _first_process_trace_lines(reference)
        wanted = []
        for mode in modes:
            limit = first_lines if mode == SIGKILL else n
            wanted += [(mode, k) for k in (ks or range(1, limit + 1)) if k <= limit]
        with ThreadPoolExecutor(self.workers) as pool:
            points = list(pool.map(lambda mk: self.point(scenario, reference, *mk), wanted))
        return ScenarioResult(name, n, points)


def _first_process_trace_lines(reference: Flow) -> int:
    """Trace lines the first process of the reference wrote (up to its run_stopped)."""
    for n, line in enumerate(reference.traces[RUN_ID], 1):
        if json.loads(line)["kind"] == "run_stopped":
            return n
    return len(reference.traces[RUN_ID])


def table(results: list[ScenarioResult]) -> str:
    """scenario | boundaries | per mode: crash points survived."""
    modes = [m for m in (CRASH, DOUBLE, SIGKILL) if any(r.of(m) for r in results)]
    head = ["scenario", "boundaries N"] + [f"{m}: survived/points" for m in modes]
    rows = [[r.scenario, str(r.boundaries)] + [_cell(r.of(m), m) for m in modes] for r in results]
    everything = [p for r in results for p in r.points]
    rows.append(["total", str(sum(r.boundaries for r in results))]
                + [_cell([p for p in everything if p.mode == m], m) for m in modes])
    return markdown(head, rows)


def _cell(points: list[Point], mode: str) -> str:
    text = f"{sum(p.survived for p in points)}/{len(points)}"
    if mode == SIGKILL:
        text += f" ({sum(p.crashes > 0 for p in points)} landed)"
    if mode == CRASH and points:
        text += f" ({sum(p.lost_replies for p in points)} lost a reply)"
    return text


def failures(results: list[ScenarioResult]) -> str:
    return "\n".join(f"- {p.scenario} k={p.k} ({p.where}; {p.mode}): " + "; ".join(p.problems)
                     for r in results for p in r.points if not p.survived)


def markdown(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows)]
    fmt = "| " + " | ".join(f"{{:<{w}}}" for w in widths) + " |"
    return "\n".join([fmt.format(*head), "|" + "|".join("-" * (w + 2) for w in widths) + "|",
                      *(fmt.format(*row) for row in rows)])
