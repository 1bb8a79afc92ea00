"""A checkpoint after every step that changed a run's workspace (docs/checkpoints.md): a commit
on the private ref ``refs/tether/RUN/N`` made with an index of Tether's own, in a worktree and
in a copy; the user's checkout never touched; ``tether checkpoints`` lists them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tether.store.files.store import RunStore
from tether.workspaces.checkpoints import Checkpointer, listing, ref_of
from tests.support import Scripted, cli_here, git, home  # noqa: F401 (home: a fixture)
from tests.unit.test_workspaces import coder, harness, repo, users, where  # noqa: F401 (repo: a fixture)


def script() -> Scripted:
    return Scripted([("write_file", {"path": "notes.txt", "content": "one\n2\n"})],
                    [("read_file", {"path": "notes.txt"})],  # read-only: no checkpoint
                    [("write_file", {"path": "notes.txt", "content": "one\n2\n"})],  # the same: nothing changed
                    [("delete_file", {"path": "old.txt"}), ("write_file", {"path": "new.txt", "content": "n\n"})],
                    "done")


async def test_each_step_that_changed_the_worktree_is_a_checkpoint_on_a_private_ref(home: Path, repo: Path) -> None:
    before = users(repo)
    async with harness(home, script()) as h:
        out = await h.start(coder(repo), "edit")
    st = out.state
    ws = st.run_workspace
    assert ws is not None
    found = await listing(ws, st.run_id)
    assert [(c.step, c.tool) for c in found] == [(1, "write_file"), (2, "delete_file"), (3, "write_file")]
    assert [f["path"] for f in found[0].files] == ["notes.txt"]
    assert found[1].files == [{"path": "old.txt", "status": "deleted", "added": 0, "deleted": 1, "binary": False}]
    assert found[2].files[0]["path"] == "new.txt" and found[2].files[0]["status"] == "added"
    # Each one's transcript length: after its call's result.
    assert st.messages[found[0].messages - 1]["role"] == "tool"
    # The commits are in the user's repository, on refs that are no branch; their tree is the workspace's.
    assert git(repo, "rev-parse", ref_of(st.run_id, 3)).strip() == found[2].commit
    assert git(repo, "show", f"{found[0].commit}:notes.txt") == "one\n2\n"
    assert f"refs/tether/{st.run_id}" not in git(repo, "branch", "-a")
    assert users(repo) == before
    records = list(RunStore(home / "runs").read_trace(st.run_id))
    taken = [(r["step"], r["tool"], r["files"]) for r in records if r["kind"] == "checkpoint"]
    assert taken == [(1, "write_file", 1), (2, "delete_file", 1), (3, "write_file", 1)]


async def test_a_copy_is_checkpointed_in_tethers_own_repository(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "notes.txt").write_text("one\n")
    (folder / "old.txt").write_text("old\n")
    async with harness(home, script()) as h:
        out = await h.start(coder(folder, "copy"), "edit")
    ws = out.state.run_workspace
    assert ws is not None and ws.kind == "copy"
    found = await listing(ws, out.state.run_id)
    assert [c.step for c in found] == [1, 2, 3]
    assert not (Path(str(ws.path)) / ".git").exists()  # the agent sees the folder as it was
    assert (folder / "notes.txt").read_text() == "one\n"


async def test_a_shell_made_change_is_caught_and_a_step_that_changed_nothing_makes_none(home: Path, repo: Path) -> None:
    async with harness(home, Scripted("nothing to do")) as h:
        out = await h.start(coder(repo), "look")
    st = out.state
    ws = st.run_workspace
    assert ws is not None
    taker = Checkpointer(ws, st.run_id)
    assert await taker.take(st) is None  # nothing changed since the base
    tree = Path(str(ws.path))
    (tree / "made.txt").write_text("by a shell\n")
    (tree / "build.log").write_text("ignored\n")
    subprocess.run(["sh", "-c", "rm sub/inner.txt"], cwd=tree, check=True)
    event = await taker.take(st, label="by hand")
    assert event is not None and event.step == 1 and event.files == 2
    assert await taker.take(st) is None
    assert (await Checkpointer(ws, st.run_id).take(st, always=True)).step == 2  # type: ignore[union-attr]
    names = git(repo, "ls-tree", "-r", "--name-only", ref_of(st.run_id, 1)).split()
    assert "made.txt" in names and "build.log" not in names and "sub/inner.txt" not in names
    # The worktree's own index is the agent's, untouched.
    assert "?? made.txt" in git(tree, "status", "--porcelain")


async def test_ignored_files_are_checkpointed_and_rewound_when_the_agent_says_so(home: Path, repo: Path,
                                                                                 tmp_path: Path) -> None:
    """``checkpoint_ignored = true`` in the agent file: ignored files (``*.log`` here) are in each
    checkpoint, so a rewind takes them back and its undo brings them again."""
    from tether.agents.config import load_config
    from tether.workspaces.rewinding import rewind_run

    config = tmp_path / "tether.toml"
    config.write_text(f'[agents.keeper]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nworkspace = "{repo}"\n'
                      'isolation = "worktree"\ncheckpoint_ignored = true\n')
    assert load_config(config).agent("keeper").isolation.ignored is True
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[agents.b]\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\nworkspace = "{repo}"\n'
                   'checkpoint_ignored = true\n')
    with pytest.raises(Exception, match="checkpoint_ignored apply to a run's own workspace"):
        load_config(bad).agent("b")
    async with harness(home, Scripted("nothing to do")) as h:
        out = await h.start(coder(repo, ignored=True), "look")
        st = out.state
        ws = st.run_workspace
        assert ws is not None and ws.ignored
        tree = Path(str(ws.path))
        (tree / "build.log").write_text("kept\n")
        event = await Checkpointer(ws, st.run_id).take(st, label="by hand")
        assert event is not None and "build.log" in git(repo, "ls-tree", "-r", "--name-only", ref_of(st.run_id, 1))
        await rewind_run(h.store, st.run_id, to=0, by="test")
        assert not (tree / "build.log").exists(), "an ignored file made after checkpoint 0 is taken back"
        await rewind_run(h.store, st.run_id, to=None, by="test")
        assert (tree / "build.log").read_text() == "kept\n"
    async with harness(home, Scripted("nothing to do")) as h:  # without the key: ignored files stay out
        plain = (await h.start(coder(repo), "look")).state
        plain_tree = Path(str(plain.run_workspace.path))  # type: ignore[union-attr]
        (plain_tree / "build.log").write_text("left\n")
        await Checkpointer(plain.run_workspace, plain.run_id).take(plain, label="by hand")  # type: ignore[arg-type]
        await rewind_run(h.store, plain.run_id, to=0, by="test")
        assert (plain_tree / "build.log").read_text() == "left\n", "ignored files are left alone by default"


async def test_tether_checkpoints_lists_them(home: Path, repo: Path) -> None:
    async with harness(home, script()) as h:
        out = await h.start(coder(repo), "edit")
    run_id = out.state.run_id
    done = cli_here("checkpoints", run_id, *where(home))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[0] == "1" and "write_file" in lines[0]
    assert any("deleted" in line and "old.txt" in line for line in lines)
    data = json.loads(cli_here("checkpoints", run_id, "--json", *where(home)).stdout)
    assert [c["step"] for c in data["checkpoints"]] == [1, 2, 3]


@pytest.mark.parametrize("kind", ["none"])
async def test_a_run_with_no_workspace_of_its_own_has_no_checkpoints_in_words(home: Path, tmp_path: Path,
                                                                             kind: str) -> None:
    async with harness(home, Scripted("done")) as h:
        out = await h.start(coder(tmp_path, kind), "look")
    done = cli_here("checkpoints", out.state.run_id, *where(home))
    assert done.returncode == 2 and "no workspace of its own" in done.stderr


async def test_a_program_takes_its_own_checkpoints_with_run_checkpoint(tmp_path: Path) -> None:
    from tether.harness import Harness
    from tether.vocab.state import StateError

    folder = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(folder)], check=True)
    (folder / "notes.txt").write_text("one\n")
    git(folder, "add", "-A")
    git(folder, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    async with Harness(tmp_path / "runs", workspaces_dir=tmp_path / "workspaces") as h:
        async with h.track("fixer", "fix notes", workspace=folder, isolation="worktree") as run:
            assert await run.checkpoint("nothing yet") is None  # nothing changed
            (run.workspace / "notes.txt").write_text("one\ntwo\n")  # type: ignore[operator]
            assert await run.checkpoint("notes fixed") == 1
            await run.answer("fixed")
        async with h.track("plain", "no workspace") as bare:
            with pytest.raises(StateError, match="has no workspace of its own to checkpoint"):
                await bare.checkpoint()
            await bare.answer("ok")
        state = h.store.load(run.run_id)
    found = await listing(state.run_workspace, run.run_id)  # type: ignore[arg-type]
    assert [(c.step, c.label, [f["path"] for f in c.files]) for c in found] == [(1, "notes fixed", ["notes.txt"])]
