"""A write in a run's workspace → the console's Changes pane (issue 38, item 8): p99, goal ≤ 1 s.

A run's worktree of a generated repository of 10,000 files (bench_workspaces' generator), the
console (headless, Textual's Pilot) on its store with the run selected and its Changes pane
shown (``c``). Each trial writes a new file in the workspace and times until the pane lists it:
the inotify wake-up, the debounce, git staging and diffing the whole workspace against its
base (10,000 files), and the pane's update. The condition is looked at every 2 ms.
No timing is asserted: docs/performance.md has a run's figures.

Run: ``.venv/bin/python -m tests.benchmarks.bench_changes [--files N] [--writes N]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from tether.agents.agent import Agent, Isolation
from tether.store.files.store import RunStore
from tests.benchmarks.bench_harness import host_speed_ms
from tests.benchmarks.bench_workspaces import generate, tether_ready

FILES = 10_000
WRITES = 40
GOAL_S = 1.0


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main_async(files: int, writes: int) -> None:
    from tests.support import SIZE, still_console, wait_for

    with tempfile.TemporaryDirectory(prefix="tether-bench-changes-") as tmp:
        root = Path(tmp)
        repo = root / "repo"
        generate(repo, files, 8)
        store = RunStore(root / "runs")
        agent = Agent(name="coder", model="m", workspace=repo, isolation=Isolation("worktree"))
        _, ws = await tether_ready(store, agent, root / "workspaces", 0)
        tree = Path(ws.path)  # type: ignore[attr-defined]
        app = still_console(runs_dir=root / "runs", workspace=root / "demo")
        took: list[float] = []
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: "bench-0" in app.states, "the run listed")
            app.select("bench-0")
            await pilot.press("c")
            pane = app.changes_pane
            await wait_for(pilot, lambda: pane.border_subtitle == "no changes", "the first reading")
            for n in range(writes):
                name = f"new_{n:03d}.txt"
                started = time.perf_counter()
                (tree / name).write_text("line\n" * (n + 1))
                while not any(f.path == name for f in pane.files):
                    await pilot.pause(0.002)
                took.append(time.perf_counter() - started)
            await pilot.press("c")
    p50, p99 = statistics.median(took), _p(took, 0.99)
    print(f"a write -> the Changes pane, {files:,} files, {writes} writes: p50 {p50 * 1000:.0f} ms, "
          f"p99 {p99 * 1000:.0f} ms, max {max(took) * 1000:.0f} ms (goal p99 <= {GOAL_S * 1000:.0f} ms)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=FILES)
    parser.add_argument("--writes", type=int, default=WRITES)
    args = parser.parse_args(argv)
    print(f"[host speed check: {host_speed_ms():.1f} ms]")
    asyncio.run(main_async(args.files, args.writes))


if __name__ == "__main__":
    main()
