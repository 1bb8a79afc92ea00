"""The console's scenes: the states worth a picture, reached by driving the app headlessly.

One definition serves two uses, so they cannot drift apart:

* the snapshot tests (tests/console/test_tui_snapshots.py) compare each settled scene with its
  saved SVG;
* ``python -m tests.scenes OUT_DIR`` (``make screenshots``) saves the README's pictures
  from the same scenes, plus two taken while a run is still going, which no snapshot
  could hold still.

A :class:`Scene` is what to do, in order, to a fresh console. Scenes wait on conditions (a trace line, a status,
the workers), never on time, and use :func:`tests.support.still_console`, whose screen
depends on neither the clock nor the user.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from tether.vocab.state import Limits, Status
from tether.tui.app import TetherApp
from tether.tui.screens.decision import ApproveDialog, RejectDialog
from tether.tui.screens.new_run import NewRunRequest

from tests.support import still_console

SIZE = (150, 42)  # the snapshots'
PICTURE_SIZE = (160, 45)  # the README's
LIVE_LATENCY_MS = 400  # the live pictures: a run visibly running for a moment


def console(root: Path, **kw: Any) -> TetherApp:
    """A still console on its own runs dir and workspace under ``root``."""
    return still_console(runs_dir=root / "runs", workspace=root / "workspace", grace_s=0, **kw)


async def until(pilot: Pilot[Any], predicate: Callable[[], bool], what: str = "the scene", cap: float = 60.0) -> None:
    deadline = time.monotonic() + cap
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.01)


def _app(pilot: Pilot[Any]) -> TetherApp:
    return pilot.app  # type: ignore[return-value]


async def quiet(pilot: Pilot[Any]) -> None:
    """Every run stopped (or waiting) and the views caught up."""
    app = _app(pilot)
    await until(pilot, lambda: not app.active, "the runs to stop")
    await app.workers.wait_for_complete()
    app.show_events()
    await pilot.pause()


Step = Callable[[Pilot[Any]], Awaitable[None]]


@dataclass(frozen=True)
class Scene:
    """Runs made one after the other (a fixed order), one selected, a step, then keys."""

    runs: tuple[tuple[str, NewRunRequest], ...] = ()
    select: str | None = None
    then: Step | None = None
    press: tuple[str, ...] = ()
    size: tuple[int, int] = SIZE

    async def setup(self, pilot: Pilot[Any]) -> None:
        """Everything but the keys (the snapshot plugin presses those itself)."""
        app = _app(pilot)
        for rid, request in self.runs:
            app.create_run(request, run_id=rid)
            await quiet(pilot)
        if self.runs:
            app.select(self.select or self.runs[-1][0])
            await quiet(pilot)
        if self.then is not None:
            await self.then(pilot)
            await quiet(pilot)
        app.clear_notifications()  # a toast is a moment, not part of a still picture (it may or may not be up yet)
        await pilot.pause()

    async def play(self, pilot: Pilot[Any]) -> None:
        await self.setup(pilot)
        if self.press:
            await pilot.press(*self.press)
            await pilot.pause()


def _has_line(app: TetherApp, rid: str, text: str) -> Callable[[], bool]:
    return lambda: any(text in line for line in app.trace_lines(rid))


async def _reject(pilot: Pilot[Any]) -> None:
    _app(pilot).decisions.reject_run("destructive-1", "access.log is still needed")


async def _reject_in_the_dialog(pilot: Pilot[Any]) -> None:
    app = _app(pilot)
    await pilot.press("r")
    await until(pilot, lambda: isinstance(app.screen, RejectDialog) and app.screen.armed, "the reject dialog")
    await pilot.press(*"access.log is still needed by the log shipper", "enter")
    await until(pilot, lambda: app.states["destructive-1"].status is Status.COMPLETED, "destructive to finish")


async def _armed_approval(pilot: Pilot[Any]) -> None:
    app = _app(pilot)
    await pilot.press("a")
    await until(pilot, lambda: isinstance(app.screen, ApproveDialog) and app.screen.armed, "the approve dialog")


async def _changes_shown(pilot: Pilot[Any]) -> None:
    """The plan's copy changed as an agent's tools would (a line changed, a file added, one
    deleted), then the Changes pane (``c``) with the first file's diff."""
    app = _app(pilot)
    ws = app.states["plan-copy"].run_workspace
    assert ws is not None and ws.path is not None
    tree = Path(ws.path)
    (tree / "errors.log").write_text((tree / "errors.log").read_text().replace("timed out", "TIMED OUT (retry 3)"))
    (tree / "summary.md").write_text("# Errors\n\n- worker 7 timed out\n- retried 3 times\n")
    (tree / "access.log").unlink()
    await pilot.press("c")
    pane = app.changes_pane
    await until(pilot, lambda: {f.path for f in pane.files} == {"access.log", "errors.log", "summary.md"},
                "the three files in the Changes pane")
    await until(pilot, lambda: "access.log" in str(pane.query_one("#changes-diff").render()), "the first file's diff")
    pane.query_one("#changes-files").focus()
    await pilot.press("down")  # errors.log: a line changed
    await until(pilot, lambda: "TIMED OUT (retry 3)" in str(pane.query_one("#changes-diff").render()),
                "errors.log's diff")


PLAN = ("plan-1", NewRunRequest("plan"))
DESTRUCTIVE = ("destructive-1", NewRunRequest("destructive"))
RUNAWAY = ("runaway-1", NewRunRequest("runaway", limits=Limits(max_turns=100, budget_usd=0.05)))
RESEARCH = ("research-1", NewRunRequest("research"))

completed_plan = Scene((PLAN,))
approval_dialog = Scene((PLAN, DESTRUCTIVE), press=("a",))
transcript_after_rejection = Scene((DESTRUCTIVE,), then=_reject)
runaway_stopped_by_its_budget = Scene((RUNAWAY,))
research_with_its_child = Scene((RESEARCH,))
research_child_selected = Scene((RESEARCH,), press=("down",))
new_run_dialog = Scene(press=("n",))
help_screen = Scene((PLAN,), press=("f1",))
small_terminal = Scene((DESTRUCTIVE,), size=(80, 24))
changes_pane = Scene((("plan-copy", NewRunRequest("plan", isolation="copy")),), then=_changes_shown, size=(150, 60))


# ---- the README's pictures ----------------------------------------------------------------

async def _plan_running(pilot: Pilot[Any]) -> None:
    app = _app(pilot)
    app.create_run(NewRunRequest("plan"), run_id="plan-1")
    app.select("plan-1")
    await until(pilot, _has_line(app, "plan-1", "tool_result"), "plan's first tool result")


async def _slow_progress(pilot: Pilot[Any]) -> None:
    app = _app(pilot)
    app.create_run(NewRunRequest("slow"), run_id="slow-1")
    app.select("slow-1")
    await until(pilot, _has_line(app, "slow-1", "scanned 600 of 1200"), "scan_archive's progress")


async def _slow_stopped(pilot: Pilot[Any]) -> None:
    await _slow_progress(pilot)
    await pilot.press("s")
    await quiet(pilot)


@dataclass(frozen=True)
class Picture:
    file: str
    title: str
    scene: Scene | Step
    latency_ms: float = 0.0


PICTURES = (
    Picture("01-plan-running.svg", "plan running", _plan_running, LIVE_LATENCY_MS),
    Picture("02-slow-progress.svg", "slow, scan_archive reporting progress", _slow_progress),
    Picture("03-slow-stopped.svg", "slow after Stop", _slow_stopped),
    Picture("04-approval-dialog.svg", "approving delete_file on destructive",
            Scene((PLAN, DESTRUCTIVE), then=_armed_approval)),
    Picture("05-rejected.svg", "destructive after a rejection, the decision in words",
            Scene((DESTRUCTIVE,), then=_reject_in_the_dialog)),
    Picture("06-runaway-budget.svg", "runaway stopped by its budget", runaway_stopped_by_its_budget),
    Picture("07-research-child.svg", "research and its subagent", research_with_its_child),
)


async def take(picture: Picture, out: Path) -> Path:
    """Play ``picture``'s scene in a console of its own and save what the screen shows."""
    with tempfile.TemporaryDirectory(prefix="tether-shots-") as tmp:
        app = console(Path(tmp), latency_ms=picture.latency_ms)
        async with app.run_test(size=PICTURE_SIZE) as pilot:
            await (picture.scene.play(pilot) if isinstance(picture.scene, Scene) else picture.scene(pilot))
            app.show_events()
            await pilot.pause()
            await pilot.wait_for_scheduled_animations()
            path = out / picture.file
            path.write_text(app.export_screenshot(title=f"Tether — {picture.title}"), encoding="utf-8")
            await app.stop_all()
            await app.workers.wait_for_complete()
    return path


async def record(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return [await take(picture, out) for picture in PICTURES]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for path in asyncio.run(record(Path(args[0] if args else "screenshots"))):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
