"""The console's Costs screen (``$``; issue 41): spend per day as vertical bars, by agent and by
model as horizontal bars (textual-plotext) with each group's runs and dearest run, the fleet
budgets' state; Enter goes to the dearest run."""

from __future__ import annotations

import os
from pathlib import Path

from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from tether.tui.screens.costs import CostsScreen
from tether.tui.screens.new_run import NewRunRequest
from tests.support import SIZE, finish, make_app, settle, wait_for


def bar_lengths(plot: PlotextPlot) -> list[tuple[str, int]]:
    """Each horizontal bar as drawn, top to bottom: its label and how many cells it fills."""
    lines = plot.render().plain.splitlines()  # type: ignore[union-attr]
    return [(label.strip(), len(bar.rstrip("│").rstrip())) for label, _, bar in
            (line.partition("┤") for line in lines[1:-2]) if label.strip()]


async def test_dollar_shows_spend_per_day_by_agent_and_model_and_enter_goes_to_the_dearest_run(tmp_path: Path):
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        app.create_run(NewRunRequest("plan"), run_id="plan-1")
        await settle(pilot, app)
        app.create_run(NewRunRequest("plan", prompt="Plan the second thing."), run_id="plan-2")
        app.create_run(NewRunRequest("forbidden"), run_id="forbidden-1")
        await settle(pilot, app)
        app.select("forbidden-1")
        await pilot.press("$")
        await wait_for(pilot, lambda: isinstance(app.screen, CostsScreen) and app.screen.figures is not None,
                       "the costs screen with its figures")
        screen: CostsScreen = app.screen  # type: ignore[assignment]
        spent = {rid: app.states[rid].cost_usd for rid in ("plan-1", "plan-2", "forbidden-1")}
        assert all(spent.values())
        agents = screen.query_one("#costs-agents", DataTable)
        rows = [[str(c) for c in agents.get_row_at(i)] for i in range(agents.row_count)]
        by_agent = {row[0]: row for row in rows}
        dearest_plan = max(("plan-1", "plan-2"), key=spent.get)
        assert by_agent["plan"][1] == f"${spent['plan-1'] + spent['plan-2']:,.4f}" and by_agent["plan"][2] == "2"
        assert by_agent["plan"][3] == dearest_plan
        bars = {name: length for name, length in bar_lengths(screen.query_one("#costs-agents-bars", PlotextPlot))}
        assert set(bars) == {"plan", "forbidden"} and bars[rows[0][0]] > bars[rows[1][0]] > 0  # dearest, longest
        models = screen.query_one("#costs-models", DataTable)
        assert [name for name, _ in bar_lengths(screen.query_one("#costs-models-bars", PlotextPlot))] == [
            str(models.get_row_at(i)[0]) for i in range(models.row_count)]  # the dearest on top, as listed
        figures = screen.figures
        assert figures is not None and len(figures.days) == 30
        assert figures.days[-1][1] == sum(spent.values()) and not any(usd for _, usd in figures.days[:-1])  # UTC
        days = screen.query_one("#costs-days", PlotextPlot).render().plain.splitlines()  # type: ignore[union-attr]
        assert days[1].lstrip().startswith(f"${sum(spent.values()):.4f}┤")  # the top of the axis: today's spend
        assert days[-1].rstrip().endswith(figures.days[-1][0][5:])  # today, on the right
        drawn = [i for line in days[1:-2] for i, c in enumerate(line[:-1]) if c in "█▌▐▄▀▖▗▘▝▙▟▛▜"]
        assert drawn and min(drawn) > 0.9 * len(days[1])  # one bar, today's, at the right edge
        title = str(screen.query_one("#costs-days-title", Static).render())
        assert title.startswith(f"Spend per day: ${sum(spent.values()):,.4f} in 30 days")
        def bar_colours() -> set[str]:
            """The colours the day's bars are drawn in (the frame's and the ticks' aside)."""
            drawn = screen.query_one("#costs-days", PlotextPlot).render()
            colours = {span.style.color for span in drawn.spans  # type: ignore[union-attr]
                       if set(drawn.plain[span.start:span.end]) & set("█▌▐▄▀") and span.style.color}  # type: ignore
            return {c.triplet.hex for c in colours if c.triplet}

        assert bar_colours() == {app.current_theme.primary.lower()}
        app.theme = "textual-light" if app.theme != "textual-light" else "nord"
        await pilot.pause()
        assert bar_colours() == {app.current_theme.primary.lower()}  # the console's new theme
        if os.environ.get("TETHER_SCREENSHOTS"):
            app.save_screenshot(os.environ["TETHER_SCREENSHOTS"] + "/costs-screen.svg")
        agents.focus()
        agents.move_cursor(row=[r[0] for r in rows].index("plan"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, CostsScreen), "back on the console")
        assert app.selected == dearest_plan
        await finish(pilot, app)


def test_the_costs_figures_carry_each_fleet_budgets_state(tmp_path: Path):
    from tether.approvals.budgets import FleetBudget, FleetBudgets
    from tether.vocab.state import AgentRef, Pricing, RunState, Status
    from tether.store.files.store import RunStore
    from tether.observe.cost_figures import load_figures
    from tether.web.costs import figures

    store = RunStore(tmp_path / "runs")
    for i, cost in enumerate((0.30, 0.45)):
        store.create(RunState(run_id=f"r{i}", model="m", cost_usd=cost, status=Status.COMPLETED,
                              pricing=Pricing(source="config"), agent=AgentRef("ops", "config", "f"),
                              messages=[{"role": "user", "content": "go"}]))
    fleet = FleetBudgets((FleetBudget("ops-daily", usd=1.0, agent="ops", warn_at=0.7),
                          FleetBudget("all-daily", usd=0.5), FleetBudget("qa-daily", usd=1.0, agent="qa")))
    states = [(b["name"], b["state"]) for b in load_figures(store, fleet).budgets]
    assert states == [("ops-daily", "warning"), ("all-daily", "reached"), ("qa-daily", "ok")]
    on_web = figures(store, fleet, __import__("time").time())["budgets"]
    assert [(b["name"], b["spent"], b["state"]) for b in on_web] == [
        ("ops-daily", "$0.7500", "warning"), ("all-daily", "$0.7500", "reached"), ("qa-daily", "$0.0000", "ok")]


async def test_the_ten_dearest_runs_are_listed_dearest_first_and_enter_selects_one(tmp_path: Path):
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        app.create_run(NewRunRequest("plan"), run_id="plan-1")
        await settle(pilot, app)
        app.create_run(NewRunRequest("plan", prompt="Plan the second thing."), run_id="plan-2")
        app.create_run(NewRunRequest("forbidden"), run_id="forbidden-1")
        await settle(pilot, app)
        app.select("plan-1")
        await pilot.press("$")
        await wait_for(pilot, lambda: isinstance(app.screen, CostsScreen) and app.screen.figures is not None,
                       "the costs screen with its figures")
        screen: CostsScreen = app.screen  # type: ignore[assignment]
        table = screen.query_one("#costs-dearest", DataTable)
        shown = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        order = sorted(("plan-1", "plan-2", "forbidden-1"), key=lambda r: (-app.states[r].cost_usd, r))
        assert [row[0] for row in shown] == order
        cheapest = app.states[order[-1]]
        assert shown[-1][1:4] == [cheapest.agent.name if cheapest.agent else "", cheapest.model,
                                  f"${cheapest.cost_usd:,.4f}"]
        assert shown[-1][4] == f"{cheapest.prompt_tokens:,} in / {cheapest.completion_tokens:,} out"
        assert shown[-1][5] == cheapest.status.value and shown[-1][6].endswith(" s")
        table.focus()
        table.move_cursor(row=len(order) - 1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, CostsScreen), "back on the console")
        assert app.selected == order[-1] != "plan-1"
        await finish(pilot, app)
