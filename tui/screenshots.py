"""Regenerate the console's demo screenshots: ``python -m tether.tui.screenshots [OUT_DIR]``.

Drives the app headlessly (``App.run_test``) on a temp runs dir and workspace, through
the states worth showing, and saves one SVG per state. Waits are on conditions (a trace
line, a status, the workers), so the pictures show the state they are named after.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from tether.state import Limits, Status
from tether.tui.app import TetherApp
from tether.tui.components.dialogs import ApproveDialog, NewRunRequest, RejectDialog

SIZE = (160, 45)
LATENCY_MS = 400  # so a run is visibly running for a moment (the pictures wait on conditions)


async def _until(pilot: Pilot[Any], predicate: Callable[[], bool], what: str, cap: float = 60.0) -> None:
    deadline = time.monotonic() + cap
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await pilot.pause(0.01)


async def _quiet(pilot: Pilot[Any], app: TetherApp) -> None:
    await _until(pilot, lambda: not app.active, "the runs to stop")
    app._flush()
    await pilot.pause()


def _has_line(app: TetherApp, rid: str, text: str) -> Callable[[], bool]:
    return lambda: any(text in line for line in app.trace_lines(rid))


async def record(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="tether-shots-") as tmp:
        app = TetherApp(runs_dir=Path(tmp) / "runs", workspace=Path(tmp) / "workspace", deterministic=True,
                        latency_ms=LATENCY_MS)
        async with app.run_test(size=SIZE) as pilot:

            async def shot(name: str, title: str) -> None:
                app._flush()
                await pilot.pause()
                await pilot.wait_for_scheduled_animations()
                path = out / name
                path.write_text(app.export_screenshot(title=f"Tether — {title}"), encoding="utf-8")
                saved.append(path)

            # 1. plan, running
            app.create_run(NewRunRequest("plan"), run_id="plan-demo")
            app.select("plan-demo")
            await _until(pilot, _has_line(app, "plan-demo", "tool_result"), "plan's first tool result")
            await shot("01-plan-running.svg", "plan running")
            await _quiet(pilot, app)

            # 2. slow, with progress; 3. the same after Stop
            app.create_run(NewRunRequest("slow"), run_id="slow-demo")
            app.select("slow-demo")
            await _until(pilot, _has_line(app, "slow-demo", "scanned 600 of 1200"), "scan_archive progress")
            await shot("02-slow-progress.svg", "slow, scan_archive reporting progress")
            await pilot.press("s")
            await _quiet(pilot, app)
            await shot("03-slow-stopped.svg", "slow after Stop")

            # 4. the approval dialog on destructive; 5. the transcript after a rejection
            app.create_run(NewRunRequest("destructive"), run_id="destructive-demo")
            app.select("destructive-demo")
            await _quiet(pilot, app)
            await pilot.press("a")
            await _until(pilot, lambda: isinstance(app.screen, ApproveDialog) and app.screen.armed,
                         "the approve dialog")
            await shot("04-approval-dialog.svg", "approving delete_file on destructive")
            await pilot.press("escape")
            await pilot.press("r")
            await _until(pilot, lambda: isinstance(app.screen, RejectDialog) and app.screen.armed,
                         "the reject dialog")
            await pilot.press(*"access.log is still needed by the log shipper")
            await pilot.press("enter")
            await _until(pilot, lambda: app.states["destructive-demo"].status is Status.COMPLETED,
                         "destructive to finish")
            await _quiet(pilot, app)
            await shot("05-rejected.svg", "destructive after a rejection, the decision in words")

            # 6. runaway stopped by its budget, the sparkline showing the growth
            app.create_run(NewRunRequest("runaway", limits=Limits(max_turns=100, budget_usd=0.05)),
                           run_id="runaway-demo")
            app.select("runaway-demo")
            await _quiet(pilot, app)
            await shot("06-runaway-budget.svg", "runaway stopped by its budget")

            # 7. research and its child
            app.create_run(NewRunRequest("research"), run_id="research-demo")
            app.select("research-demo")
            await _quiet(pilot, app)
            await shot("07-research-child.svg", "research and its subagent")

            await app.stop_all()
            await app.workers.wait_for_complete()
    return saved


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "screenshots")
    for path in asyncio.run(record(out)):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
