"""Stop inside ``scan_archive``: from ``signal.cancel()`` to the ``run_stopped`` event.

Each trial starts a ``slow`` run on the embedded scripted provider; when the
``tool_start`` of ``scan_archive`` arrives, a callback is scheduled a few milliseconds
into the scan that takes ``perf_counter()`` and fires the run's signal, the way the
console's Stop key does (on the event loop). A sink takes ``perf_counter()`` when
``run_stopped`` is emitted; the figure is the difference. The scan is shortened
(``ScanArchive.seconds``, a class attribute) so 100 trials take seconds, not minutes;
the stop path does not depend on the scan's length.

Run: ``.venv/bin/python -m tests.benchmarks.bench_stop``
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tether.store import control, operate
from tether.vocab.cancel import CancelSignal
from tether.vocab.events import Event, RunStopped, ToolStart
from tether.harness import Harness
from tether.demo.agents import ScanArchive
from tether.store.files.layout import TRACE_FILE
from tether.store.files.store import RunStore
from tether.store.trace import read_trace
from tether.demo.agents import DEMO
from tests.benchmarks.peers import scratch_dir

TRIALS = 100
TARGET_P99_MS = 5.0
SCAN_SECONDS = 0.4  # instead of 3 s; batches still sleep 10 entries at a time


@dataclass
class StopFigures:
    trials: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    statuses: set[str]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]  # nearest-rank


async def _trials(n: int, workdir: Path) -> StopFigures:
    original = ScanArchive.seconds
    ScanArchive.seconds = SCAN_SECONDS
    rng = random.Random(6)
    latencies: list[float] = []
    statuses: set[str] = set()
    try:
        async with Harness(workdir / "runs", workdir / "workspace", agent_sets=(DEMO,)) as harness:
            for _ in range(n + 1):  # the first trial warms up (imports, encoding, schemas)
                signal = CancelSignal()
                marks: dict[str, float] = {}

                def fire(signal: CancelSignal = signal, marks: dict[str, float] = marks) -> None:
                    marks["cancel"] = time.perf_counter()
                    signal.cancel("stopped by the benchmark")

                def sink(event: Event, marks: dict[str, float] = marks) -> None:
                    if isinstance(event, ToolStart) and event.name == "scan_archive":
                        asyncio.get_running_loop().call_later(rng.uniform(0.02, 0.1), fire)
                    elif isinstance(event, RunStopped):
                        marks["stopped"] = time.perf_counter()

                state = harness.new_run("slow")
                outcome = await harness.run(state.run_id, signal=signal, sinks=[sink])
                statuses.add(f"{outcome.state.status.value}/{outcome.state.interruption and outcome.state.interruption.type}")
                if "cancel" not in marks:
                    raise RuntimeError("the scan finished before the stop was fired; lengthen SCAN_SECONDS")
                latencies.append((marks["stopped"] - marks["cancel"]) * 1000)
    finally:
        ScanArchive.seconds = original
    latencies = latencies[1:]
    return StopFigures(len(latencies), statistics.median(latencies), percentile(latencies, 99),
                       max(latencies), statuses)


def measure(n: int = TRIALS) -> StopFigures:
    with scratch_dir("stop") as tmp:
        return asyncio.run(_trials(n, Path(tmp)))


def main() -> None:
    figures = measure()
    print(f"Stop inside scan_archive, signal.cancel() -> run_stopped, {figures.trials} trials: "
          f"p50 {figures.p50_ms:.2f} ms, p99 {figures.p99_ms:.2f} ms, max {figures.max_ms:.2f} ms "
          f"(target p99 <= {TARGET_P99_MS:g} ms); ended {', '.join(sorted(figures.statuses))}")




# ---- Stop from another process -----------------------------------------------------------

REMOTE_TRIALS = 50
REMOTE_TARGET_P99_MS = 100.0


@dataclass(frozen=True)
class Cli:
    """Whose ``tether`` the processes run: this tree's (``tether.tui.cli``), or a checkout's
    from before the restructure (``tether.cli`` on ``PYTHONPATH``). Without
    ``PYTHONDONTWRITEBYTECODE``, as an installed ``tether`` runs: with it, every process would
    compile Tether from source (this sandbox sets it)."""

    module: str = "tether.tui.cli"
    pythonpath: str | None = None

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath
        return env


async def _until_trace(trace: Path, kind: str, cap_s: float = 60.0) -> dict:
    deadline = time.monotonic() + cap_s
    while time.monotonic() < deadline:
        for record in read_trace(trace):
            if record.get("kind") == kind:
                return record
        await asyncio.sleep(0.005)
    raise RuntimeError(f"no {kind} in {trace} within {cap_s:g} s")


async def _remote_trials(n: int, workdir: Path, cli: Cli = Cli()) -> dict[str, list[float]]:
    """Each trial: ``tether run slow`` in a child process; once its trace shows scan_archive
    started, a Stop, either as a ``tether stop`` process (``command``: from spawning it) or
    as a request from this process (``request``: from sending it, what ``tether stop`` does
    once its interpreter is up); the figure ends at the ``ts`` of the ``run_stopped`` line
    the run's process wrote."""
    place = ["--runs-dir", str(workdir / "runs"), "--workspace", str(workdir / "workspace")]
    store = RunStore(workdir / "runs")
    out: dict[str, list[float]] = {"command": [], "request": []}
    for i in range(2 * n + 2):  # the first two warm the page cache
        how = "command" if i % 2 == 0 else "request"
        run_id = f"remote-{i}"
        run = await asyncio.create_subprocess_exec(sys.executable, "-m", cli.module, "run", "slow",
                                                   "--run-id", run_id, *place, env=cli.env(),
                                                   stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        try:
            trace = store.run_dir(run_id) / TRACE_FILE
            await _until_trace(trace, "tool_start")
            await asyncio.sleep(0.05)  # into the scan
            started = time.time()
            if how == "command":
                stop = await asyncio.create_subprocess_exec(sys.executable, "-m", cli.module, "stop", run_id, *place,
                                                            env=cli.env(), stdout=asyncio.subprocess.DEVNULL,
                                                            stderr=asyncio.subprocess.DEVNULL)
                await stop.wait()
            else:
                await operate.request(store, run_id, control.ControlRequest("stop", "the benchmark", by="bench"))
            stopped = await _until_trace(trace, "run_stopped")
            if i >= 2:
                out[how].append((stopped["ts"] - started) * 1000)
        finally:
            if run.returncode is None:
                await asyncio.wait_for(run.wait(), 30)
    return out


def measure_remote(n: int = REMOTE_TRIALS, cli: Cli = Cli()) -> dict[str, tuple[float, float, float]]:
    with scratch_dir("remote-stop") as tmp:
        samples = asyncio.run(_remote_trials(n, Path(tmp), cli))
    return {how: (statistics.median(v), percentile(v, 99), max(v)) for how, v in samples.items()}


def main_remote(n: int = REMOTE_TRIALS, before: Path | None = None) -> None:
    """This tree's ``tether stop``; with ``before``, a checkout's from before the restructure
    first (the host's speed is printed before each, as ``make bench`` does per section)."""
    from tests.benchmarks.bench_harness import host_speed_ms

    clis = ([("before the restructure", Cli("tether.cli", str(before)))] if before else []) + [("this tree", Cli())]
    for label, cli in clis:
        speed = host_speed_ms()
        figures = measure_remote(n, cli)
        for how, words in (("command", "`tether stop` (a new process) -> run_stopped written by the run's process"),
                           ("request", "a stop request sent from another process -> run_stopped written")):
            p50, p99, top = figures[how]
            print(f"Stop from another process ({label}), {words}, {n} trials: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
                  f"max {top:.1f} ms (target p99 <= {REMOTE_TARGET_P99_MS:g} ms; host speed check before: "
                  f"{speed:.1f} ms)")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="stop inside scan_archive: in the process, and from another one")
    parser.add_argument("--remote-only", action="store_true", help="only the stop from another process")
    parser.add_argument("-n", type=int, default=REMOTE_TRIALS, help="trials of the stop from another process")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="also a checkout from before the restructure (DIR/tether/cli.py)")
    options = parser.parse_args()
    if not options.remote_only:
        main()
    main_remote(options.n, options.before)
