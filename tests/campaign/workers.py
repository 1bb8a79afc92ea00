"""The crash campaign on PostgreSQL, with queue workers: SIGKILL the worker that drives a
run once the run's committed trace holds k lines, let a second worker recover the run, and
compare the result with an uninterrupted run (the invariants of :mod:`tests.campaign.crash`).

A PostgreSQL trace line is committed with the save after it, or by the store's trace timer
within 150 ms, so "k lines" lands just after a save or inside a tool call or a model request,
or (destructive) while the run waits for the approval, which :func:`drive` gives through :func:`tether.workers.decide.decide` as
``tether approve`` would. What must hold, besides :func:`tests.campaign.crash.compare`
(status, answer, turns, tokens, cost; provider requests at most one more per kill; the
trace complete and in order; the workspace's files):

* every tool result in the transcript is the reference's, so no write ran twice (a delete
  run again would answer that the file is gone);
* the run was driven by the killed worker, then by the worker that recovered it, never by
  both at once (one ``run_started`` per driving worker, in order).

Cells run one after another: a kill must hit the worker that drives the cell's run, and
all workers share the queue.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.store.postgres.store import PgStore
from tether.vocab.state import NeedsApproval, Status
from tests.campaign.crash import SIGKILL, Flow, Point, Process, ScenarioResult, compare
from tests.campaign.server import CountingApp, serving
from tests.workerproc import Fleet, wait_for

RUN_CAP_S = 120.0


@dataclass(frozen=True)
class WorkerScenario:
    name: str
    approve: bool = False
    auto_approve: tuple[str, ...] = ()


SCENARIOS = {
    "plan": WorkerScenario("plan"),
    "slow": WorkerScenario("slow"),
    "destructive": WorkerScenario("destructive", approve=True),
    "repeat_write": WorkerScenario("repeat_write", auto_approve=("delete_file",)),
}


def _trace_count(store: PgStore, run_id: str) -> int:
    with store._conn() as conn:
        return conn.execute("SELECT count(*) FROM tether.trace WHERE run_id = %s", (run_id,)).fetchone()[0]


def _workflow(store: PgStore, run_id: str) -> str | None:
    from tether.workers.view import _workflow_status

    return _workflow_status(store, run_id)


MODEL_LATENCY_MS = 150


class WorkerCampaign:
    """One PostgreSQL store, one counting provider on loopback, a scratch directory."""

    def __init__(self, url: str, root: Path) -> None:
        self.url = url
        self.root = root
        from tether.demo.provider import create_app

        # Each model reply takes a while, as a real one does: a kill "after committed trace line
        # k" needs the run to be still going when line k is seen, and the worker, whose imports
        # are all done at its start, otherwise finishes a scripted run between two polls.
        self.counter = CountingApp(create_app(latency_ms=MODEL_LATENCY_MS))
        self._serving = serving(self.counter)
        self.base_url = ""
        self.store = PgStore(url)
        self._cells = 0
        self._decided: set[tuple[str, str]] = set()

    def __enter__(self) -> "WorkerCampaign":
        self.base_url = self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.close()
        self._serving.__exit__(*exc)

    def drive(self, scenario: WorkerScenario, kill_after: int | None) -> Flow:
        self._cells += 1
        tag = f"w{self._cells}-{scenario.name}"
        cell = self.root / tag
        if cell.exists():
            shutil.rmtree(cell)
        cell.mkdir(parents=True)
        flow = Flow()
        self.counter.requests.pop(tag, None)
        args = ["--base-url", f"{self.base_url}/{tag}/v1", "--run-id", tag, "--workspace", str(cell / "ws")]
        if scenario.auto_approve:
            args += ["--auto-approve", ",".join(scenario.auto_approve)]
        with Fleet(self.url, cell, here=True) as fleet:  # the workers are processes; the submit is here
            first = fleet.start()
            fleet.submit(scenario.name, *args)
            killed = False
            if kill_after is not None:
                deadline = time.monotonic() + RUN_CAP_S
                while time.monotonic() < deadline and _workflow(self.store, tag) not in ("SUCCESS", "ERROR"):
                    self._decide_if_waiting(scenario, tag)
                    if _trace_count(self.store, tag) >= kill_after:
                        first.kill()
                        killed = True
                        break
                    time.sleep(0.001)
            if killed:
                fleet.start()
            try:
                wait_for(lambda: self._decide_if_waiting(scenario, tag) or
                         _workflow(self.store, tag) in ("SUCCESS", "ERROR"), f"run {tag} to end", RUN_CAP_S, 0.01)
            except AssertionError as exc:
                flow.problems.append(str(exc))
            status = _workflow(self.store, tag)
            if status != "SUCCESS":
                flow.problems.append(f"the run's workflow ended {status}")
                for w in fleet.workers:  # what the workers said, for the diagnosis
                    flow.problems.append(f"worker pid {w.pid} said: {w.text()[-1500:]!r}")
            workers = list(fleet.workers)
        for w in workers:  # stopped by the fleet (SIGTERM), or killed above
            flow.processes.append(Process("worker", w.process.returncode, [], None, "", w.text()[-2000:]))
        flow.requests = self.counter.requests[tag]
        self._collect(flow, tag, cell / "ws")
        return flow

    def _decide_if_waiting(self, scenario: WorkerScenario, run_id: str) -> bool:
        """Approve the run's waiting call as an operator would, once per call, when a
        worker's workflow waits for it. Never ends the wait by itself: returns False."""
        if not scenario.approve:
            return False
        state = self.store.load(run_id)
        waiting = state.interruption
        if isinstance(waiting, NeedsApproval) and state.status is Status.INTERRUPTED \
                and (run_id, waiting.call_id) not in self._decided:
            from tether.store.control import ControlRequest
            from tether.workers.decide import _decide

            reply = _decide(self.store, run_id, ControlRequest("approve", by="campaign"))
            if reply is not None:
                self._decided.add((run_id, waiting.call_id))
        return False

    def _collect(self, flow: Flow, run_id: str, workspace: Path) -> None:
        ids = [r for r in self.store.run_ids() if r == run_id or r.startswith(run_id + ".")]
        for rid in ids:
            state = self.store.load(rid)
            flow.states[rid] = state
            flow.traces[rid] = [(json.dumps(r) + "\n").encode() for r in self.store.read_trace(rid)]
        with self.store._conn() as conn:
            flow.ledger = [{"key": k, "status": s} for k, s in conn.execute(
                "SELECT key, status FROM tether.ledger WHERE run_id = %s ORDER BY key", (run_id,))]
        if workspace.is_dir():
            flow.files = {p.name: p.read_bytes() for p in sorted(workspace.iterdir()) if p.is_file()}

    def compare(self, flow: Flow, reference: Flow, run_id: str, ref_id: str) -> list[str]:
        """:func:`compare` on the run under its reference's id, plus the worker checks."""
        renamed = Flow(flow.processes, list(flow.problems), flow.requests,
                       {k.replace(run_id, "victim", 1): v for k, v in flow.states.items()},
                       {k.replace(run_id, "victim", 1): _renamed(v, run_id) for k, v in flow.traces.items()},
                       flow.ledger, flow.files)
        ref = Flow(reference.processes, [], reference.requests,
                   {k.replace(ref_id, "victim", 1): v for k, v in reference.states.items()},
                   {k.replace(ref_id, "victim", 1): _renamed(v, ref_id) for k, v in reference.traces.items()},
                   reference.ledger, reference.files)
        for states in (renamed.states, ref.states):
            for state in states.values():
                state.run_id = state.run_id.replace(run_id, "victim", 1).replace(ref_id, "victim", 1)
        problems = compare(renamed, ref)
        mine = _tool_results(flow.states.get(run_id))
        theirs = _tool_results(reference.states.get(ref_id))
        if mine != theirs:
            problems.append(f"tool results differ from the reference (a tool ran twice?): {mine} != {theirs}")
        drivers = [r["pid"] for line in flow.traces.get(run_id, []) if (r := json.loads(line))["kind"] == "run_started"]
        if not _ordered(drivers):
            problems.append(f"run driven by workers out of turn: {drivers}")
        return problems

    def reference(self, scenario: WorkerScenario) -> tuple[Flow, str]:
        flow = self.drive(scenario, None)
        run_id = f"w{self._cells}-{scenario.name}"
        if flow.problems:
            raise RuntimeError(f"{scenario.name}: the reference flow did not run cleanly: {flow.problems}")
        return flow, run_id

    def sweep(self, name: str, ks: list[int] | None = None) -> ScenarioResult:
        scenario = SCENARIOS[name]
        reference, ref_id = self.reference(scenario)
        n = len(reference.traces[ref_id])
        points = []
        for k in ks or range(1, n):
            if k >= n:
                continue
            flow = self.drive(scenario, k)
            run_id = f"w{self._cells}-{scenario.name}"
            problems = self.compare(flow, reference, run_id, ref_id)
            kills = sum(p.exit_code == -signal.SIGKILL for p in flow.processes)
            points.append(Point(name, SIGKILL, k, f"after committed trace line {k}", kills, 0,
                                len(flow.processes), problems))
        return ScenarioResult(name, n, points)


def _renamed(lines: list[bytes], run_id: str) -> list[bytes]:
    out = []
    for line in lines:
        record = json.loads(line)
        record["run_id"] = str(record.get("run_id", "")).replace(run_id, "victim", 1)
        out.append((json.dumps(record) + "\n").encode())
    return out


def _tool_results(state: Any) -> list[str]:
    if state is None:
        return []
    return [str(m.get("content")) for m in state.messages if m.get("role") == "tool"]


def _ordered(drivers: list[int]) -> bool:
    """Each driver's operations are contiguous: no worker took the run back after another."""
    seen: list[int] = []
    for pid in drivers:
        if not seen or seen[-1] != pid:
            if pid in seen:
                return False
            seen.append(pid)
    return True


def table(results: list[ScenarioResult]) -> str:
    from tests.campaign.crash import markdown

    rows = [[r.scenario, str(r.boundaries), f"{sum(p.survived for p in r.points)}/{len(r.points)}",
             str(sum(p.crashes > 0 for p in r.points))] for r in results]
    rows.append(["total", str(sum(r.boundaries for r in results)),
                 f"{sum(p.survived for r in results for p in r.points)}/{sum(len(r.points) for r in results)}",
                 str(sum(p.crashes > 0 for r in results for p in r.points))])
    return markdown(["scenario", "trace lines N", "SIGKILLed worker: survived/points", "kills landed"], rows)


def failures(results: list[ScenarioResult]) -> str:
    return "\n".join(f"- {p.scenario} k={p.k} ({p.where}): " + "; ".join(p.problems)
                     for r in results for p in r.points if not p.survived)
