"""``tether demo``'s tour, played headlessly as the snapshots are: it reaches every step,
and each step leaves on the console what its caption promises."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.screen import ModalScreen

from tether.harness import Harness
from tether.demo.provider.scenarios import DESTRUCTIVE_DECLINED
from tether.vocab.state import Cancelled, MaxBudget, Status
from tether.tui.widgets.cost_meter import TurnsSparkline
from tether.tui.cli.tour import REJECTION, STEPS, Caption, Tour
from tether.demo.agents import DEMO

from tests.support import SIZE, finish, make_app, settle, shown, transcript, wait_for


def caption(app) -> str:
    return str(app.console_screen.query_one(Caption).render())


async def test_the_tour_reaches_every_step_and_shows_what_it_says(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0.2)  # the decision dialogs' grace period, as an operator has it
    tour = Tour(pace=0, stay=True)
    async with app.run_test(size=SIZE) as pilot:
        await tour(pilot)
        assert tour.error is None
        assert tour.reached == [step.name for step in STEPS]
        assert caption(app) == STEPS[-1].caption
        states = {scenario: app.states[rid] for scenario, rid in tour.runs.items()}
        assert list(states) == ["plan", "destructive", "slow", "runaway"]

        assert states["plan"].status is Status.COMPLETED

        # destructive: rejected from the dialog with a reason; the decision, in words, on screen
        assert states["destructive"].status is Status.COMPLETED
        assert (tmp_path / "workspace" / "access.log").exists()
        app.select(tour.runs["destructive"])
        await settle(pilot, app)
        assert f"The operator declined this call: {REJECTION}. Nothing was done." in transcript(app)
        assert DESTRUCTIVE_DECLINED in transcript(app)

        # slow: stopped inside its tool, after reporting progress, by the console's Stop
        slow = states["slow"]
        assert slow.status is Status.INTERRUPTED and isinstance(slow.interruption, Cancelled)
        assert slow.interruption.by == app.operator
        assert any("scanned 400 of 1200" in line for line in app.trace_lines(tour.runs["slow"]))

        # runaway: stopped by the budget typed in the New run dialog, its turns on the sparkline
        runaway = states["runaway"]
        assert runaway.status is Status.BUDGET_EXCEEDED and isinstance(runaway.interruption, MaxBudget)
        assert runaway.limits.budget_usd == 0.05 and runaway.limits.max_turns == 100
        app.select(tour.runs["runaway"])
        await settle(pilot, app)
        assert len(app.console_screen.query_one(TurnsSparkline).data or []) == runaway.turns > 3
        assert "budget_exceeded" in shown(app)
        await finish(pilot, app)


async def test_the_tour_quits_the_console_at_its_end(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    tour = Tour(pace=0)
    async with app.run_test(size=SIZE) as pilot:
        await tour(pilot)
        await wait_for(pilot, lambda: not app.is_running, "the console to quit")
    assert tour.reached[-1] == "end" and app.return_code == 0


class QuitsAtSlow(Tour):
    """A viewer who presses q while slow reports its progress."""

    async def step(self, pilot, name: str) -> None:
        await super().step(pilot, name)
        if name == "stop":  # its caption is up, s not pressed yet
            await pilot.press("q")


async def test_quitting_during_the_tour_ends_the_tour_with_the_console(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    tour = QuitsAtSlow(pace=0)
    async with app.run_test(size=SIZE) as pilot:
        await tour(pilot)
        await wait_for(pilot, lambda: not app.is_running, "the console to quit")
    assert tour.error is None and tour.reached[-1] == "stop"
    assert app.states[tour.runs["slow"]].status is Status.INTERRUPTED  # stopped by the quit, saved, resumable
    assert not app.active and app.return_code == 0


async def test_a_tour_that_cannot_reach_a_step_says_so_and_exits_1(tmp_path: Path) -> None:
    """The endpoint refuses the key: plan fails, and the tour stops there, in words, at once
    (not after its wait's cap)."""
    harness = Harness(tmp_path / "runs", tmp_path / "workspace", fail="401@0", agent_sets=(DEMO,))
    app = make_app(tmp_path, harness=harness)
    tour = Tour(pace=0)
    async with app.run_test(size=SIZE) as pilot:
        await tour(pilot)
        await wait_for(pilot, lambda: not app.is_running, "the console to exit")
    await harness.aclose()
    assert tour.reached == ["plan"] and app.return_code == 1
    assert tour.error is not None
    assert "plan to answer" in tour.error and "ended failed" in tour.error and "401" in tour.error


# ---- one caption, wherever the tour is --------------------------------------------------------

def times_drawn(app: Any, words: str) -> int:
    """How many runs of text on the screen (as its screenshot draws it) hold ``words``: a
    caption drawn in two places, or two overlapping copies, counts twice."""
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", app.export_screenshot())
    return sum(words in html.unescape(text).replace("\xa0", " ") for text in texts)


class Counting(Tour):
    """The tour, counting how often its caption is on the screen while a dialog is up."""

    def __init__(self) -> None:
        super().__init__(pace=0, stay=True)
        self.on_dialogs: list[tuple[str, str, int]] = []

    async def read(self, pilot: Pilot[Any], paces: float = 1.0) -> None:
        await super().read(pilot, paces)
        screen = pilot.app.screen
        if isinstance(screen, ModalScreen) and screen.query(Caption):
            self.on_dialogs.append((type(screen).__name__, self._caption,
                                    times_drawn(pilot.app, self._caption[:12])))


async def test_the_caption_is_drawn_once_over_a_dialog(tmp_path: Path) -> None:
    """On the New run, approve and reject dialogs the viewer reads one caption: the dialog's
    own, in the row of the console's, which it covers (two, one above the dialog and one
    dimmed under the header, read as the caption drawn twice)."""
    app = make_app(tmp_path, grace_s=0)
    tour = Counting()
    async with app.run_test(size=SIZE) as pilot:
        await tour(pilot)
        assert tour.error is None
        seen = {name for name, _, _ in tour.on_dialogs}
        assert {"NewRunDialog", "ApproveDialog", "RejectDialog"} <= seen, seen
        assert [entry for entry in tour.on_dialogs if entry[2] != 1] == []
        await finish(pilot, app)
