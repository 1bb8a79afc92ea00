"""A new pane is one widget file and one line where its screen composes it (docs/architecture.md,
"Adding a pane"): a :class:`~tether.tui.widgets.run_pane.RunPane` is handed the selected run,
and the run again as it changes, with nothing else wired in the app."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.widgets import Static

from tether.tui.screens.new_run import NewRunRequest
from tether.tui.widgets.run_pane import RunPane
from tether.vocab.state import RunState
from tests.support import SIZE, make_app, wait_for


class StatusPane(RunPane):
    """The whole of a pane: the selected run's id and status, in words."""

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(id="status-words")

    def show_run(self, run_id: str | None, state: RunState | None) -> None:
        words = "no run" if state is None else f"{run_id}: {state.status.value}"
        self.query_one("#status-words", Static).update(Text(words))


def shown(app) -> str:  # type: ignore[no-untyped-def]
    return str(app.console_screen.query_one("#status-words", Static).render())


async def test_a_pane_added_where_the_screen_composes_it_follows_the_selected_run(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app.console_screen.query_one("#right").mount(StatusPane(id="status"))  # the one line
        first = app.create_run(NewRunRequest("plan"), run_id="plan-a")
        await wait_for(pilot, lambda: not app.active, "the first run to end")
        second = app.create_run(NewRunRequest("plan"), run_id="plan-b")
        await wait_for(pilot, lambda: not app.active, "the second run to end")
        app.select(first)
        await wait_for(pilot, lambda: shown(app).startswith("plan-a: "), "the first run in the pane")
        app.select(second)
        await wait_for(pilot, lambda: shown(app).startswith("plan-b: "), "the second run in the pane")
        assert shown(app) == f"plan-b: {app.states[second].status.value}"
