"""The Changes pane's timeline (issue 39): ``←`` ``→`` move between the selected run's
checkpoints, each showing its step's files and diff; ``B`` rewinds the run to the one shown
after a confirmation, as ``tether rewind`` does."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Button

from tether.harness import Harness
from tether.vocab.state import Status
from tether.tui.screens.rules import ConfirmDialog
from tether.tui.screens.workspace import OutcomeDialog
from tests.console.test_tui_changes import diff_shown, listed
from tests.console.test_tui_merge import outcome
from tests.support import SIZE, Scripted, home, make_app, wait_for  # noqa: F401 (home: a fixture)
from tests.unit.test_workspaces import coder, repo  # noqa: F401 (repo: a fixture)


def shown(app: object) -> bool:
    """An outcome dialog on the screen, composed (its words there to read)."""
    screen = app.screen  # type: ignore[attr-defined]
    return isinstance(screen, OutcomeDialog) and bool(screen.query("#outcome-words"))


async def test_arrows_move_between_checkpoints_and_b_rewinds_to_the_one_shown(
        home: Path, repo: Path, tmp_path: Path) -> None:
    model = Scripted([("write_file", {"path": "notes.txt", "content": "one\n2\n"})],
                     [("write_file", {"path": "new.txt", "content": "n\n"})], "done")
    async with Harness(tmp_path / "runs", home / "demo", client=model, workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo), "edit")
    rid = out.state.run_id
    tree = Path(str(out.state.run_workspace.path))  # type: ignore[union-attr]
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.select(rid)
        assert app.check_action("checkpoint_earlier", ()) is False  # the pane is hidden: ← is the widget's
        await pilot.press("c")
        pane = app.changes_pane
        await wait_for(pilot, lambda: "new.txt" in listed(pane), "the live changes")
        assert app.check_action("rewind_here", ()) is None  # greyed: no checkpoint shown
        await pilot.press("left")
        await wait_for(pilot, lambda: app.changes_pane.timeline_at == 1, "the last checkpoint")
        assert str(pane.border_subtitle).startswith("checkpoint 2 of 2 · write_file")
        assert list(listed(pane)) == ["new.txt"]
        await wait_for(pilot, lambda: "+n" in diff_shown(pane), "the step's diff")
        await pilot.press("left")
        await wait_for(pilot, lambda: app.changes_pane.timeline_at == 0, "checkpoint 1")
        assert list(listed(pane)) == ["notes.txt"]
        await wait_for(pilot, lambda: "-two" in diff_shown(pane) and "+2" in diff_shown(pane), "checkpoint 1's diff")
        await pilot.press("F")  # a fork at checkpoint 1 first: the run itself is only read
        await wait_for(pilot, lambda: shown(app), "the fork's outcome")
        title, words = outcome(app)
        assert title == "Forked" and f"forked from {rid} at checkpoint 1" in words
        forked = words.split(" ")[1]
        assert app.states[forked].forked_from == {**app.states[forked].forked_from, "run_id": rid, "step": 1}
        await wait_for(pilot, lambda: f"fork of {rid}@1" in app.model.row(forked).cells()["run"].plain,
                       "the fork's lineage in the runs list")
        assert "fork of" not in app.model.row(rid).cells()["run"].plain
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, OutcomeDialog), "the outcome to close")
        assert (tree / "new.txt").exists() and app.changes_pane.timeline_at == 0
        await pilot.press("B")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirmation")
        assert str(app.screen.query_one(".dialog-title").render()) == f"Rewind {rid} to checkpoint 1?"
        await pilot.click(f"#{app.screen.query_one('#yes', Button).id}")
        await wait_for(pilot, lambda: shown(app), "the rewind's outcome")
        title, words = outcome(app)
        assert title == "Rewound" and f"run {rid} rewound to checkpoint 1" in words
        assert (tree / "notes.txt").read_text() == "one\n2\n" and not (tree / "new.txt").exists()
        assert app.states[rid].status is Status.INTERRUPTED and app.changes_pane.timeline_at is None
        await pilot.press("escape")
        await wait_for(pilot, lambda: "new.txt" not in listed(pane), "the live view, rewound")
        await pilot.press("left", "left", "right", "right")  # to checkpoint 2 of 3 and back past the last: live
        await wait_for(pilot, lambda: app.changes_pane.timeline_at is None, "the live view again")
