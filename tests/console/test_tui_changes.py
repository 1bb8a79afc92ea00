"""The Changes pane (``c``): what the selected run changed in its own workspace, as it is
written, by whoever writes it (issue 38, item 3).

The runs are made by a harness with a worktree of their own, then the console is opened on
their store; the writes in the workspace are made by another process (``sh -c``), as an
agent's own tool or a build would, and the tests wait for the pane to show them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from textual.widgets import OptionList, Static

from tether.harness import Harness
from tether.tui.widgets.changes import ChangesPane
from tests.support import SIZE, Scripted, git, home, make_app, wait_for  # noqa: F401 (home: a fixture)
from tests.unit.test_workspaces import coder, repo  # noqa: F401 (repo: a fixture)


async def a_run(home: Path, repo: Path, tmp_path: Path, kind: str = "worktree") -> tuple[str, Path]:
    """A completed run with a workspace of its own (of ``repo``), and that workspace."""
    async with Harness(tmp_path / "runs", home / "demo", client=Scripted("nothing to do"),
                       workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo, kind), "look")
    ws = out.state.run_workspace
    assert ws is not None and ws.path is not None
    return out.state.run_id, Path(ws.path)


def shell(command: str, cwd: Path) -> None:
    """A write by another process: what a shell command of the agent's would do."""
    subprocess.run(["sh", "-c", command], cwd=cwd, check=True)


def listed(pane: ChangesPane) -> dict[str, str]:
    files = pane.query_one("#changes-files", OptionList)
    return {f.path: str(files.get_option_at_index(i).prompt) for i, f in enumerate(pane.files)}


def diff_shown(pane: ChangesPane) -> str:
    return str(pane.query_one("#changes-diff", Static).render())


async def test_the_pane_lists_a_runs_files_and_shows_a_write_by_another_process(
        home: Path, repo: Path, tmp_path: Path) -> None:
    rid, tree = await a_run(home, repo, tmp_path)
    shell("printf 'one\\n' > notes.txt", tree)  # changed before the console opens
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.select(rid)
        await pilot.press("c")
        pane = app.changes_pane
        assert pane.display and not app.console_screen.query_one("#traces").display
        await wait_for(pilot, lambda: "notes.txt" in listed(pane), "notes.txt in the Changes pane")
        assert listed(pane)["notes.txt"] == "M notes.txt  +0 \u22121"
        await wait_for(pilot, lambda: "-two" in diff_shown(pane), "notes.txt's diff")
        assert pane.border_subtitle == "+0 \u22121 in 1 file"
        # Written by another process while the pane is shown: it shows, and the runs list says so.
        shell("printf 'a\\nb\\nc\\n' > made.txt && rm sub/inner.txt", tree)
        await wait_for(pilot, lambda: {"made.txt", "sub/inner.txt"} <= set(listed(pane)), "the new writes")
        assert listed(pane)["made.txt"] == "A made.txt  +3 \u22120"
        assert listed(pane)["sub/inner.txt"] == "D sub/inner.txt  +0 \u22121"
        assert pane.border_subtitle == "+3 \u22122 in 3 files"
        await wait_for(pilot, lambda: "+3 \u22122 in 3 files" in app.model.row(rid).cells()["run"].plain,
                       "the counts in the runs list")
        # The highlighted file's diff follows the highlight.
        pane.query_one("#changes-files", OptionList).focus()
        await pilot.press("down")
        await wait_for(pilot, lambda: "+a" in diff_shown(pane) or "-inner" in diff_shown(pane), "another file's diff")
        # c again: the trace is back, and the watch has ended.
        await pilot.press("c")
        assert not pane.display and app.console_screen.query_one("#traces").display
        await wait_for(pilot, lambda: not app.changes_pane.following, "the follow to end")


async def test_the_highlighted_files_diff_updates_as_it_is_written(home: Path, repo: Path, tmp_path: Path) -> None:
    rid, tree = await a_run(home, repo, tmp_path, "copy")
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.select(rid)
        await pilot.press("c")
        pane = app.changes_pane
        await wait_for(pilot, lambda: "no changes yet" in diff_shown(pane), "a run that changed nothing")
        assert pane.border_subtitle == "no changes"
        shell("printf 'one\\ntwo\\nmine\\nours\\n' > notes.txt", tree)
        await wait_for(pilot, lambda: "+ours" in diff_shown(pane), "the first write's diff")
        shell("printf 'one\\ntwo\\nmine\\nours\\nmore\\n' > notes.txt", tree)
        await wait_for(pilot, lambda: "+more" in diff_shown(pane), "the second write's diff")
        assert listed(pane) == {"notes.txt": "M notes.txt  +2 \u22120"}


async def test_a_run_without_a_workspace_says_so_in_words(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        from tether.tui.screens.new_run import NewRunRequest

        rid = app.create_run(NewRunRequest("plan"), run_id="plan-a")
        await wait_for(pilot, lambda: not app.active, "the run to end")
        app.select(rid)
        await pilot.press("c")
        pane = app.changes_pane
        await wait_for(pilot, lambda: "no workspace of its own" in diff_shown(pane), "the words")
        assert not app.changes_pane.following
