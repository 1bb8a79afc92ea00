"""The console's merge (``M``) and discard (``X``) of a run's own workspace (issue 38, item 4):
the same operation as ``tether merge`` and ``tether discard``, the result said in a dialog,
and a merge that waits for a decision is in the approvals like any call."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Button, Input, Static

from tether.vocab.state import NeedsApproval, Status
from tether.tui.screens.decision import ApproveDialog
from tether.tui.screens.rules import ConfirmDialog
from tether.tui.screens.workspace import MergeDialog, OutcomeDialog
from tests.console.test_tui_changes import a_run, shell
from tests.support import SIZE, git, home, make_app, open_armed, settle, wait_for  # noqa: F401 (home: a fixture)
from tests.unit.test_workspaces import repo  # noqa: F401 (repo: a fixture)


def composed(app: object, kind: type, part: str) -> bool:
    """A dialog of ``kind`` on the screen with ``part`` composed: under load a screen is pushed a
    moment before its widgets are mounted, and reading it then finds nothing."""
    screen = app.screen  # type: ignore[attr-defined]
    return isinstance(screen, kind) and bool(screen.query(part))


def outcome(app: object) -> tuple[str, str]:
    screen = app.screen  # type: ignore[attr-defined]
    assert isinstance(screen, OutcomeDialog), screen
    title = str(screen.query_one(".dialog-title").render())
    return title, str(screen.query_one("#outcome-words", Static).render())


async def merge_from_console(pilot: object, app: object, into: str = "") -> tuple[str, str]:
    await pilot.press("M")  # type: ignore[attr-defined]
    await wait_for(pilot, lambda: composed(app, MergeDialog, "#into"), "the merge dialog")  # type: ignore[arg-type, attr-defined]
    app.screen.query_one("#into", Input).value = into  # type: ignore[attr-defined]
    await pilot.press("enter")  # type: ignore[attr-defined]
    await wait_for(pilot, lambda: composed(app, OutcomeDialog, "#outcome-words"), "the merge's outcome")  # type: ignore[arg-type, attr-defined]
    return outcome(app)


async def test_m_asks_the_merge_it_waits_in_the_approvals_and_a_merges_it(home: Path, repo: Path, tmp_path: Path) -> None:
    rid, tree = await a_run(home, repo, tmp_path)
    shell("printf 'made\\n' > made.txt", tree)
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        app.select(rid)
        title, words = await merge_from_console(pilot, app)
        assert title == "Asked: waiting for a decision"
        assert f"run {rid}: its merge into main waits for a decision by a person" in words
        assert "+1 \u22120 in 1 file" in words and "checks: none" in words
        assert not (repo / "made.txt").exists()  # nothing merged yet
        await pilot.press("enter")  # closes the outcome
        await wait_for(pilot, lambda: not isinstance(app.screen, OutcomeDialog), "the outcome to close")
        assert [(p.run_id, p.tool) for p in app.pending_approvals()] == [(rid, "merge")]
        assert app.can_decide(rid)
        dialog = await open_armed(pilot, app, "a", ApproveDialog)
        said = "\n".join(str(w.render()) for w in dialog.query(Static) if not isinstance(w, Button))
        assert "merge" in said and '"into": "main"' in said, said
        await pilot.press("enter")
        await settle(pilot, app, "the approved merge")
        await wait_for(pilot, lambda: app.states[rid].status is Status.COMPLETED, "the run to be as it was")
        assert (repo / "made.txt").read_text() == "made\n"
        assert "Merge the work of the Tether run" in git(repo, "log", "-1", "--format=%s", "main")
        assert app.states[rid].messages[-1]["content"].startswith("Merged into main as ")
        assert not app.pending_approvals()


async def test_m_says_a_conflict_and_a_dirty_target_in_words_and_changes_nothing(
        home: Path, repo: Path, tmp_path: Path) -> None:
    rid, tree = await a_run(home, repo, tmp_path)
    shell("printf 'theirs\\n' > old.txt && printf 'one\\nX\\n' > notes.txt", tree)
    (repo / "old.txt").write_text("ours\n")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "ours", "old.txt")
    before = git(repo, "rev-parse", "main")
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.select(rid)
        title, words = await merge_from_console(pilot, app)
        assert title == "Not merged"
        assert "it conflicts with main in old.txt" in words
        assert "main is checked out at" in words and "with uncommitted changes to notes.txt" in words
        assert "(they are kept)" in words and "nothing was changed" in words
        await pilot.press("escape")
        assert not app.pending_approvals() and app.states[rid].status is Status.COMPLETED
    assert git(repo, "rev-parse", "main") == before
    assert (repo / "notes.txt").read_text() == "one\ntwo\nmine\n"  # the user's change, kept


async def test_m_into_a_branch_that_is_not_there_is_refused_in_the_dialog_words(
        home: Path, repo: Path, tmp_path: Path) -> None:
    rid, tree = await a_run(home, repo, tmp_path)
    shell("printf 'made\\n' > made.txt", tree)
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.select(rid)
        title, words = await merge_from_console(pilot, app, into="nowhere")
        assert title == "Not merged" and "there is no branch 'nowhere'" in words


async def test_x_asks_first_then_discards_the_workspace_and_keeps_the_transcript(
        home: Path, repo: Path, tmp_path: Path) -> None:
    rid, tree = await a_run(home, repo, tmp_path)
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.select(rid)
        await pilot.press("X")
        await wait_for(pilot, lambda: composed(app, ConfirmDialog, "#yes"), "the confirmation")
        question = str(app.screen.query_one(".dialog-title").render())
        assert question.startswith(f"Remove {tree} and the branch tether/{rid} of run {rid}")
        await pilot.press("n")  # kept
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmDialog), "the confirmation to close")
        assert tree.is_dir()
        await pilot.press("X")
        await wait_for(pilot, lambda: composed(app, ConfirmDialog, "#yes"), "the confirmation")
        await pilot.click(f"#{app.screen.query_one('#yes', Button).id}")
        await wait_for(pilot, lambda: composed(app, OutcomeDialog, "#outcome-words"), "the discard's outcome")
        title, words = outcome(app)
        assert title == "Discarded" and words == f"run {rid}: removed {tree} and the branch tether/{rid}; its transcript stays"
        assert not tree.exists() and git(repo, "branch", "--list", f"tether/{rid}") == ""
        assert app.states[rid].messages  # the transcript stays
        await pilot.press("escape")
        assert app.check_action("discard", ()) is None and app.check_action("merge", ()) is None  # greyed out now



async def test_the_agent_files_checks_run_first_and_their_failure_is_in_the_outcome(
        home: Path, repo: Path, tmp_path: Path) -> None:
    from tether.harness import Harness
    from tests.support import Scripted
    from tests.unit.test_workspaces import coder

    async with Harness(tmp_path / "runs", home / "demo", client=Scripted("nothing to do"),
                       workspaces_dir=home / "workspaces") as h:
        out = await h.start(coder(repo, "worktree", checks=["echo 2 tests failed; exit 1"]), "look")
    rid, tree = out.state.run_id, Path(out.state.run_workspace.path)  # type: ignore[union-attr, arg-type]
    shell("printf 'made\\n' > made.txt", tree)
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        app.select(rid)
        await pilot.press("M")
        await wait_for(pilot, lambda: composed(app, MergeDialog, "#into"), "the merge dialog")
        shown = "\n".join(str(w.render()) for w in app.screen.query(Static))
        assert "echo 2 tests failed; exit 1 (run before it asks)" in shown
        await pilot.press("enter")
        await wait_for(pilot, lambda: composed(app, OutcomeDialog, "#outcome-words"), "the merge's outcome")
        title, words = outcome(app)
    assert title == "Asked: waiting for a decision"  # a failed check does not refuse: people decide
    assert "checks: 'echo 2 tests failed; exit 1' failed (exit 1): 2 tests failed" in words
    assert not (repo / "made.txt").exists()
