"""The console's Costs screen (``$``; issue 41): spend per day as a sparkline, by agent and by model
as bars with each group's dearest run, the fleet budgets' state; Enter goes to the dearest run."""

from __future__ import annotations

import os
from pathlib import Path

from textual.widgets import DataTable, Sparkline, Static

from tether.tui.components.costs_screen import CostsScreen
from tether.tui.components.dialogs import NewRunRequest
from tests.support import SIZE, finish, make_app, settle, wait_for


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
        assert by_agent["plan"][1] == f"${spent['plan-1'] + spent['plan-2']:,.4f}" and by_agent["plan"][3] == "2"
        assert by_agent["plan"][4] == dearest_plan and set(by_agent["plan"][2]) <= set("█▏▎▍▌▋▊▉")
        assert rows[0][2].startswith("█")  # the dearest agent's bar is the full width
        days = screen.query_one("#costs-days", Sparkline).data
        assert len(days) == 30 and days[-1] == sum(spent.values()) and not any(days[:-1])  # today's spend, UTC
        title = str(screen.query_one("#costs-days-title", Static).render())
        assert title.startswith(f"Spend per day: ${sum(spent.values()):,.4f} in 30 days")
        if os.environ.get("TETHER_SCREENSHOTS"):
            app.save_screenshot(os.environ["TETHER_SCREENSHOTS"] + "/costs-screen.svg")
        agents.focus()
        agents.move_cursor(row=[r[0] for r in rows].index("plan"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, CostsScreen), "back on the console")
        assert app.selected == dearest_plan
        await finish(pilot, app)
