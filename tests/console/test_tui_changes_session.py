"""The Changes pane (``c``) of a run that worked in its session's own folder (kind ``none``:
what a Claude Code session's hooks record, tether.workspaces.tracked.record_folder): the
session's writes since its start show, not what was uncommitted before it."""

from __future__ import annotations

from pathlib import Path

from tether.harness import Harness
from tether.workspaces import tracked
from tests.console.test_tui_changes import diff_shown, listed, shell
from tests.support import SIZE, home, make_app, wait_for  # noqa: F401 (home: a fixture)
from tests.unit.test_workspaces import repo  # noqa: F401 (repo: a fixture)


async def test_a_sessions_own_folder_shows_its_changes_in_the_pane(home: Path, repo: Path, tmp_path: Path) -> None:
    async with Harness(tmp_path / "runs", home / "demo", workspaces_dir=home / "workspaces") as h:
        async with h.track("claude-code", "tidy", source="claude-code") as run:
            await tracked.record_folder(run, repo, h.workspaces_dir)
            assert run.workspace == repo.resolve()
            await run.answer("done")
    shell("printf 'one\\n' > notes.txt", repo)  # the session's write (wip.txt was there before it)
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.select(run.run_id)
        await pilot.press("c")
        pane = app.changes_pane
        await wait_for(pilot, lambda: "notes.txt" in listed(pane), "notes.txt in the Changes pane")
        await wait_for(pilot, lambda: "-two" in diff_shown(pane), "notes.txt's diff")
        assert set(listed(pane)) == {"notes.txt"}, "wip.txt and the staged change were the user's, before"
        shell("printf 'x\\n' > later.txt", repo)
        await wait_for(pilot, lambda: "later.txt" in listed(pane), "a write while the pane is shown")
