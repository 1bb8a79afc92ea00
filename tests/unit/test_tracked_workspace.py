"""A program's run in a workspace (``Harness.track(workspace=, isolation=)``, docs/workspaces.md):
``run.workspace`` is made as an agent run's is, the run's diff shows what the program changed
there, and the folder it came from is untouched."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tether.harness import Harness
from tether.store.trace import read_trace
from tether.vocab.state import Status
from tether.workspaces.changes import changes
from tether.workspaces.lifecycle import WorkspaceError
from tests.support import git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("one\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    return repo


def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path / "runs", workspaces_dir=tmp_path / "workspaces")


async def test_a_programs_run_gets_a_worktree_of_its_own_as_run_workspace(tmp_path: Path, repo: Path) -> None:
    async with harness(tmp_path) as h:
        async with h.track("fixer", "fix notes", workspace=repo, isolation="worktree") as run:
            assert isinstance(run.workspace, Path)
            assert run.workspace == (tmp_path / "workspaces").resolve() / run.run_id
            assert (run.workspace / "notes.txt").read_text() == "one\n"
            (run.workspace / "notes.txt").write_text("one\ntwo\n")  # the program's own tools
            await run.answer("fixed")
        state = h.store.load(run.run_id)
        summary = h.store.summary(run.run_id)
    assert state.status is Status.COMPLETED
    ws = state.run_workspace
    assert ws is not None and ws.kind == "worktree" and ws.branch == f"tether/{run.run_id}" and ws.stage == "ready"
    assert [(f.path, f.added) for f in (await changes(ws)).files] == [("notes.txt", 1)]
    assert ws.changes is not None and ws.changes["files"] == 1, "noted as the block ended, for tether runs"
    assert summary.workspace is not None and summary.workspace["path"] == str(run.workspace)
    assert (repo / "notes.txt").read_text() == "one\n" and git(repo, "status", "--porcelain") == ""
    assert "workspace_ready" in [r["kind"] for r in read_trace(tmp_path / "runs" / run.run_id / "trace.jsonl")]


async def test_a_copy_and_a_reporter_that_attaches_later_finds_the_same_workspace(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    async with harness(tmp_path) as h:
        async with h.track("hooked", "work", workspace=folder, isolation="copy", keep_open=True) as first:
            (first.workspace / "b.txt").write_text("b\n")
        async with h.track("hooked", run_id=first.run_id, attach=True) as again:
            assert again.workspace == first.workspace, "the same workspace, found again"
            (again.workspace / "a.txt").unlink()
            await again.answer("done")
        state = h.store.load(first.run_id)
    found = await changes(state.run_workspace)
    assert {(f.path, f.status) for f in found.files} == {("b.txt", "added"), ("a.txt", "deleted")}
    assert (folder / "a.txt").exists() and not (folder / "b.txt").exists()


async def test_without_isolation_run_workspace_is_the_folder_itself(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        async with h.track("plain", "work", workspace=tmp_path) as run:
            assert run.workspace == tmp_path
        async with h.track("nothing", "work") as other:
            assert other.workspace is None
        assert h.store.load(run.run_id).run_workspace is None


@pytest.mark.parametrize(("options", "words"), [
    ({"isolation": "worktree"}, "isolation='worktree' needs the folder"),
    ({"isolation": "sandbox", "workspace": "."}, "isolation is one of none, worktree, copy"),
    ({"isolation": "worktree", "workspace": "PLAIN"}, "a worktree needs a git repository"),
])
async def test_bad_options_are_refused_in_words_before_any_run_is_made(tmp_path: Path, options: dict,
                                                                       words: str) -> None:
    (tmp_path / "plain").mkdir()
    if options.get("workspace") == "PLAIN":
        options["workspace"] = tmp_path / "plain"
    async with harness(tmp_path) as h:
        with pytest.raises(ValueError, match=words):
            async with h.track("bad", "x", **options):
                pass
    assert not (tmp_path / "runs").exists() or not any(p.is_dir() for p in (tmp_path / "runs").iterdir())


async def test_a_workspace_that_cannot_be_made_fails_the_run_in_words_and_the_program_is_told(
        tmp_path: Path, repo: Path) -> None:
    (tmp_path / "workspaces" / "r1").mkdir(parents=True)  # not the run's: nothing is written over
    async with harness(tmp_path) as h:
        with pytest.raises(WorkspaceError, match="is there already and is not this run's"):
            async with h.track("fixer", "x", run_id="r1", workspace=repo, isolation="worktree"):
                raise AssertionError("the block does not run")
        state = h.store.load("r1")
    assert state.status is Status.FAILED and "is there already" in (state.error or ""), state.error
