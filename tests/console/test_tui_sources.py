"""The console shows where a run's turns come from and what that source can do (issue 29,
item 6): a program's run, reported through the run API, is not offered Resume, and says when
its Stop lands."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from tether.harness import Harness
from tether.vocab.state import Status
from tether.demo.agents import DEMO
from tests.support import SIZE, finish, make_app, wait_for


async def test_a_programs_run_says_its_source_and_is_not_offered_resume(tmp_path: Path) -> None:
    async with Harness(tmp_path / "runs", tmp_path / "workspace", agent_sets=(DEMO,)) as harness:
        async with harness.track("triage", "Triage ticket 42", source="claude-code", run_id="cc-1") as run:
            await harness.stop(run.run_id, "wrong repo", by="alice")
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "cc-1" in app.states, "the program's run on the store")
        app.select("cc-1")
        await wait_for(pilot, lambda: app.states["cc-1"].status is Status.INTERRUPTED, "its stop")
        await pilot.pause()
        header = str(app.console_screen.query_one("#run-header", Static).render())
        assert "source  Claude Code: Stop lands at its next hook" in header
        assert "R resumes" not in header
        assert app.check_action("resume", ()) is not True
        await finish(pilot, app)
