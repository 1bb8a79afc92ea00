"""The OS sandbox's added start time for an agent (issue 38, item 8: goal at most 50 ms).

For each agent (the fake ACP agent, and OpenCode when ``make agents`` installed it), the time
from starting its session to its answer to ``initialize`` (``AcpSession.start``), which covers
the launcher, the sandbox being made (a private temp folder, the folders made, bubblewrap's
namespace or Landlock's ruleset) and the agent's own start. Three ways, interleaved trial by
trial so that a noisy moment of the host falls on all three: no sandbox (the baseline, here, in
this process), bubblewrap, Landlock. The figure is the difference of the medians, and the ratio.

Beside it, the sandbox's mechanics alone, with no agent to drown them: the launcher running
``/bin/true`` in each way (a process start, as the launcher does it for every agent and MCP
server).

No timing is asserted: the figures are printed; docs/performance.md has a run's.

Run: ``.venv/bin/python -m tests.benchmarks --only sandbox``, or
``.venv/bin/python -m tests.benchmarks.bench_sandbox [--trials N]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tether.acp import AcpSession
from tether.agents import sandbox

from tests.acp.conftest import fake_agent

WAYS = ("none", "bubblewrap", "landlock")


async def _start_ms(command: list[str], env: dict[str, str], workspace: Path, way: str) -> float:
    started = time.perf_counter()
    box = None if way == "none" else sandbox.for_agent(workspace, env, backend=way)  # type: ignore[arg-type]
    session = AcpSession(command, workspace=workspace, env=env, sandbox=box)
    try:
        await session.start()
        return (time.perf_counter() - started) * 1000
    finally:
        await session.close()


async def _agent(name: str, command: list[str], env: dict[str, str], workspace: Path, trials: int) -> None:
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    await _start_ms(command, env, workspace, "none")  # warm the page cache: not counted
    for _ in range(trials):
        for way in WAYS:
            times[way].append(await _start_ms(command, env, workspace, way))
    base = statistics.median(times["none"])
    print(f"  {name}: initialize answered, median of {trials} (p90)")
    for way in WAYS:
        median = statistics.median(times[way])
        p90 = statistics.quantiles(times[way], n=10)[-1] if trials >= 2 else median
        added = "" if way == "none" else f"   added {median - base:+.1f} ms ({median / base:.2f}x)"
        print(f"    {way:<11} {median:7.1f} ms ({p90:.1f}){added}")


def _launcher_ms(workspace: Path, way: str) -> float:
    started = time.perf_counter()
    options = [] if way == "none" else sandbox.Sandbox(way, (workspace,), workspace).options()  # type: ignore[arg-type]
    subprocess.run([sys.executable, "-m", "tether.agents.mcp_launcher", *options, "--", "/bin/true"], check=True,
                   cwd=workspace)
    return (time.perf_counter() - started) * 1000


def _launcher(workspace: Path, trials: int) -> None:
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    for _ in range(trials):
        for way in WAYS:
            times[way].append(_launcher_ms(workspace, way))
    base = statistics.median(times["none"])
    print(f"  the launcher running /bin/true, median of {trials}")
    for way in WAYS:
        median = statistics.median(times[way])
        added = "" if way == "none" else f"   added {median - base:+.1f} ms ({median / base:.2f}x)"
        print(f"    {way:<11} {median:7.1f} ms{added}")


async def _main(trials: int) -> None:
    with tempfile.TemporaryDirectory(prefix="tether-bench-sandbox-") as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        _launcher(workspace, trials * 2)
        await _agent("the fake agent (Python)", fake_agent("normal"), {"HOME": str(Path(tmp) / "home")}, workspace,
                     trials)
        from tether.demo.acp import launch_opencode, missing

        if missing() is None:
            home = Path(tmp) / "opencode-home"
            home.mkdir()
            launch = launch_opencode(home, "http://127.0.0.1:9/v1")  # initialize asks no model
            await _agent("OpenCode", launch.command, launch.env, workspace, max(3, trials // 3))
        else:
            print(f"  OpenCode: skipped ({missing()})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=15)
    args = parser.parse_args(argv)
    asyncio.run(_main(args.trials))


if __name__ == "__main__":
    main()
