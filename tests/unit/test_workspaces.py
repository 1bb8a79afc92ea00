"""A workspace of each run's own (docs/workspaces.md): a git worktree on ``tether/RUN_ID`` or a
copy, made when the run starts, found again when it goes on, read for what the run changed,
listed and discarded; with real git repositories made in the test's folder."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from tether.agents.agent import Agent, AgentError, Isolation
from tether.agents.config import load_config
from tether.agents.configfile import ConfigError
from tether.harness import Harness
from tether.vocab.cancel import CancelSignal
from tether.vocab.state import Cancelled, Policies, StateError, Status
from tether.workspaces.changes import changes, diff
from tether.workspaces.git import BRANCH_PREFIX, GitError
from tether.workspaces.merge import merge_check
from tests.support import Scripted, cli_here, git, home  # noqa: F401 (home: a fixture)

FILE_TOOLS = ["tether:list_files", "tether:read_file", "tether:write_file", "tether:delete_file"]
WRITES = Policies(auto_approve=["write_file", "delete_file"])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository on ``main`` with a commit, and the user's work in progress in it: one change
    staged, one file not yet added."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("one\ntwo\n")
    (repo / "old.txt").write_text("old\n")
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "sub").mkdir()
    (repo / "sub" / "inner.txt").write_text("inner\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    (repo / "notes.txt").write_text("one\ntwo\nmine\n")
    git(repo, "add", "notes.txt")
    (repo / "wip.txt").write_text("not added\n")
    return repo


def users(repo: Path) -> dict[str, object]:
    """What of the user's checkout Tether must never touch."""
    return {"index": (repo / ".git" / "index").read_bytes(), "head": git(repo, "rev-parse", "HEAD"),
            "branch": git(repo, "symbolic-ref", "HEAD"), "status": git(repo, "status", "--porcelain"),
            "staged": git(repo, "diff", "--cached"), "notes": (repo / "notes.txt").read_text(),
            "files": sorted(p.name for p in repo.iterdir())}


def coder(folder: Path, kind: str = "worktree", **isolation: object) -> Agent:
    return Agent(name="coder", model="m", tools=FILE_TOOLS, workspace=folder, policies=WRITES,
                 isolation=Isolation(kind, **isolation))  # type: ignore[arg-type]


def harness(home: Path, model: Scripted) -> Harness:
    return Harness(home / "runs", home / "demo", client=model, workspaces_dir=home / "workspaces")


def where(home: Path) -> list[str]:
    return ["--runs-dir", str(home / "runs")]


# ---- a worktree of its own ----------------------------------------------------------------

async def test_a_run_writes_in_its_own_worktree_and_the_users_checkout_is_untouched(home: Path, repo: Path) -> None:
    before = users(repo)
    model = Scripted([("write_file", {"path": "notes.txt", "content": "one\n2\nthree\n"})],
                     [("delete_file", {"path": "old.txt"}), ("write_file", {"path": "new.txt", "content": "new\n"})],
                     "done")
    async with harness(home, model) as h:
        out = await h.start(coder(repo), "edit")
    assert out.state.status is Status.COMPLETED, out.state.error
    ws = out.state.run_workspace
    assert ws is not None and ws.stage == "ready" and ws.branch == f"{BRANCH_PREFIX}{out.state.run_id}"
    tree = Path(ws.path or "")
    assert tree.parent == (home / "workspaces").resolve()
    assert (tree / "notes.txt").read_text() == "one\n2\nthree\n"
    assert not (tree / "old.txt").exists() and (tree / "new.txt").read_text() == "new\n"
    assert users(repo) == before  # index, HEAD, branch, status, staged change, files: as they were
    assert ws.base_commit == git(repo, "rev-parse", "main").strip()
    assert ws.changes is not None and {k: ws.changes[k] for k in ("files", "added", "deleted")} == \
        {"files": 3, "added": 3, "deleted": 2}


async def test_changes_count_what_any_process_wrote_untracked_files_and_commits_but_not_ignored_ones(
        home: Path, repo: Path) -> None:
    async with harness(home, Scripted("nothing to do")) as h:
        out = await h.start(coder(repo), "look")
    ws = out.state.run_workspace
    assert ws is not None and ws.path is not None
    tree = Path(ws.path)
    # What a shell command would do, not a file tool: Tether sees it all the same.
    (tree / "notes.txt").write_text("one\n")
    (tree / "made.txt").write_text("a\nb\n")
    (tree / "build.log").write_text("ignored\n")
    (tree / "blob.bin").write_bytes(b"\x00\x01\x02")
    (tree / "sub" / "inner.txt").unlink()
    git(tree, "add", "made.txt")
    git(tree, "-c", "user.name=a", "-c", "user.email=a@x", "commit", "-qm", "the agent's own commit")
    found = await changes(ws)
    assert {f.path: (f.status, f.added, f.deleted) for f in found.files} == {
        "notes.txt": ("changed", 0, 1), "made.txt": ("added", 2, 0), "blob.bin": ("added", None, None),
        "sub/inner.txt": ("deleted", 0, 1)}
    assert found.words() == "+2 \u22122 in 4 files"
    one = await diff(ws, ("notes.txt",))
    assert one.startswith("diff --git a/notes.txt b/notes.txt") and "-two" in one and "made.txt" not in one
    # The worktree's own index (the agent's) is as the agent left it: Tether staged nothing in it.
    assert set(git(tree, "status", "--porcelain").splitlines()) == {"?? blob.bin", " D sub/inner.txt", " M notes.txt"}


async def test_the_file_tools_work_in_the_agents_folder_inside_the_worktree(home: Path, repo: Path) -> None:
    model = Scripted([("write_file", {"path": "inner.txt", "content": "changed\n"})], "done")
    async with harness(home, model) as h:
        out = await h.start(coder(repo / "sub"), "edit")
    ws = out.state.run_workspace
    assert ws is not None and ws.subdir == "sub" and ws.root == f"{ws.path}/sub"
    assert (Path(ws.path or "") / "sub" / "inner.txt").read_text() == "changed\n"
    assert (repo / "sub" / "inner.txt").read_text() == "inner\n"
    assert [f.path for f in (await changes(ws)).files] == ["sub/inner.txt"]


async def test_a_base_ref_is_where_the_worktree_starts_and_a_wrong_one_fails_the_run_in_words(
        home: Path, repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "second")  # the staged change
    async with harness(home, Scripted("ok", "ok")) as h:
        out = await h.start(coder(repo, base="HEAD~1"), "look")
        assert out.state.run_workspace is not None and out.state.run_workspace.base_commit == first
        assert (Path(out.state.run_workspace.path or "") / "notes.txt").read_text() == "one\ntwo\n"
        wrong = await h.start(coder(repo, base="no-such-branch"), "look")
    assert wrong.state.status is Status.FAILED
    assert "no commit named 'no-such-branch'" in (wrong.state.error or "")
    assert git(repo, "branch", "--list", f"{BRANCH_PREFIX}*").count(BRANCH_PREFIX) == 1  # only the first run's


# ---- setup ----------------------------------------------------------------------------------

async def test_setup_runs_in_the_new_workspace_and_its_output_is_in_the_trace_and_shown(home: Path, repo: Path) -> None:
    agent = coder(repo, setup=('echo "preparing $TETHER_RUN_ID"; touch ready.flag',))
    async with harness(home, Scripted([("list_files", {})], "done")) as h:
        out = await h.start(agent, "look")
        trace = list(h.store.read_trace(out.state.run_id))
    assert out.state.status is Status.COMPLETED
    kinds = [r["kind"] for r in trace]
    assert kinds.index("workspace_ready") < kinds.index("workspace_setup") < kinds.index("run_started")
    setup = next(r for r in trace if r["kind"] == "workspace_setup")
    assert setup["exit_code"] == 0 and setup["output"] == f"preparing {out.state.run_id}\n"
    assert "ready.flag" in out.state.messages[3]["content"]  # the agent saw what setup made
    shown = cli_here("show", out.state.run_id, *where(home))
    assert shown.returncode == 0, shown.stderr
    assert f"workspace: worktree {out.state.run_workspace.path}" in shown.stdout  # type: ignore[union-attr]
    assert "setup: echo \"preparing $TETHER_RUN_ID\"; touch ready.flag  (exit 0" in shown.stdout
    assert f"  | preparing {out.state.run_id}" in shown.stdout


async def test_a_failed_setup_ends_the_run_in_words_keeps_the_workspace_and_runs_again_on_a_follow_up(
        home: Path, repo: Path) -> None:
    agent = coder(repo, setup=("test -f fixed.txt || { echo 'fixed.txt is missing' >&2; exit 3; }",))
    model = Scripted("done")
    async with harness(home, model) as h:
        out = await h.start(agent, "look")
        ws = out.state.run_workspace
        assert out.state.status is Status.FAILED and ws is not None
        assert "exited with 3: fixed.txt is missing" in (out.state.error or "")
        assert f"kept at {ws.path}" in (out.state.error or "")
        assert ws.stage == "made" and Path(ws.path or "").is_dir()  # kept for a look
        assert model.requests == []  # the agent never started
        (Path(ws.path or "") / "fixed.txt").write_text("")  # the operator fixes it in the workspace
        again = await h.run(out.state.run_id, message="try again")
    assert again.state.status is Status.COMPLETED
    assert again.state.run_workspace is not None and again.state.run_workspace.stage == "ready"
    assert again.state.run_workspace.path == ws.path  # type: ignore[union-attr]


# ---- the run owns it: resume, another host ---------------------------------------------------

async def test_a_resumed_run_goes_on_in_the_same_workspace(home: Path, repo: Path) -> None:
    agent = Agent(name="coder", model="m", tools=FILE_TOOLS, workspace=repo, isolation=Isolation("worktree"))
    model = Scripted([("write_file", {"path": "a.txt", "content": "first\n"})], "done")
    async with harness(home, model) as h:
        waiting = await h.start(agent, "write")
        assert waiting.state.status is Status.INTERRUPTED  # write_file waits for approval
        path = waiting.state.run_workspace.path  # type: ignore[union-attr]
        assert not (Path(path or "") / "a.txt").exists()
    async with harness(home, model) as again:  # another process: the agent rebuilt, the workspace found
        done = await again.approve(waiting.state.run_id)
        trace = list(again.store.read_trace(waiting.state.run_id))
    assert done.state.status is Status.COMPLETED
    assert done.state.run_workspace.path == path  # type: ignore[union-attr]
    assert (Path(path or "") / "a.txt").read_text() == "first\n" and not (repo / "a.txt").exists()
    assert [r["made"] for r in trace if r["kind"] == "workspace_ready"] == [True, False]
    assert git(repo, "worktree", "list").count(BRANCH_PREFIX) == 1


async def test_a_process_on_another_host_refuses_in_words(home: Path, repo: Path) -> None:
    async with harness(home, Scripted([("write_file", {"path": "a.txt", "content": "x"})])) as h:
        # write_file waits for approval here, so the run stops resumable
        agent = Agent(name="coder", model="m", tools=FILE_TOOLS, workspace=repo, isolation=Isolation("worktree"))
        out = await h.start(agent, "write")
        state, handle = h.store.open(out.state.run_id)
        state.run_workspace.host = "elsewhere"  # type: ignore[union-attr]
        handle.save(state)
        handle.release()
        with pytest.raises(StateError, match=f"on the host elsewhere .*: use it there"):
            await h.run(out.state.run_id)
    diffed = cli_here("diff", out.state.run_id, *where(home))
    assert diffed.returncode == 2 and "on the host elsewhere" in diffed.stderr


# ---- a copy ---------------------------------------------------------------------------------

async def test_a_copy_is_diffed_against_the_folder_as_the_run_started(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    (folder / "keep.txt").write_text("keep\n")
    model = Scripted([("write_file", {"path": "a.txt", "content": "a\nb\n"})], "done")
    async with harness(home, model) as h:
        out = await h.start(coder(folder, "copy"), "edit")
    ws = out.state.run_workspace
    assert ws is not None and ws.kind == "copy" and ws.branch is None
    copy = Path(ws.path or "")
    assert sorted(p.name for p in copy.iterdir()) == ["a.txt", "keep.txt"]  # no .git of its own
    assert (folder / "a.txt").read_text() == "a\n"  # the original is untouched
    (folder / "keep.txt").write_text("changed in the original meanwhile\n")
    found = await changes(ws)
    assert [(f.path, f.status, f.added, f.deleted) for f in found.files] == [("a.txt", "changed", 1, 0)]


# ---- bad input ------------------------------------------------------------------------------

def test_a_worktree_of_a_folder_in_no_repository_is_refused_as_the_file_is_loaded(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    path = tmp_path / "tether.toml"
    path.write_text('[agents.a]\nmodel = "m"\nworkspace = "plain"\nisolation = "worktree"\n')
    with pytest.raises(ConfigError, match=r"agents\.a\.isolation: \"worktree\" needs a git repository, and .*plain "
                                          r"is not in one: use isolation = \"copy\""):
        load_config(path).agent("a")


@pytest.mark.parametrize(("lines", "said"), [
    ('isolation = "sandbox"', r"agents\.a\.isolation: input should be 'none', 'worktree' or 'copy'"),
    ('setup = ["make"]', r"agents\.a: setup apply to a run's own workspace: add isolation"),
    ('isolation = "copy"\nbase = "main"', r"agents\.a: base names a commit of a repository"),
    ('isolation = "copy"\nsetup = ["  "]', r"agents\.a\.setup: an empty command"),
    ('isolation = "copy"\nsetup = "make"', r"agents\.a\.setup: input should be a valid list"),
])
def test_bad_isolation_keys_are_refused_naming_the_key(tmp_path: Path, lines: str, said: str) -> None:
    (tmp_path / "plain").mkdir()
    path = tmp_path / "tether.toml"
    path.write_text(f'[agents.a]\nmodel = "m"\nworkspace = "plain"\n{lines}\n')
    with pytest.raises(ConfigError, match=said):
        load_config(path).agent("a")


def test_run_isolate_worktree_of_a_folder_in_no_repository_is_a_usage_error(home: Path, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    done = cli_here("run", "plan", "--workspace", str(tmp_path / "plain"), "--isolate", "worktree", *where(home))
    assert done.returncode == 2
    assert "--isolate worktree: a worktree needs a git repository" in done.stderr
    assert not (home / "runs").exists() or cli_here("runs", *where(home)).stdout.startswith("no runs")


async def wait_for_file(path: Path) -> None:
    """Until ``path`` exists (a setup command's sign that it has started), or fail after a generous cap."""
    async def seen() -> None:
        while not path.exists():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(seen(), 30)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: it waits only for its parent to read its status.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


async def test_a_stop_during_setup_ends_it_and_the_run_is_interrupted_then_setup_runs_again(
        home: Path, repo: Path, tmp_path: Path) -> None:
    started = tmp_path / "started"
    agent = coder(repo, setup=(f"if [ -e {tmp_path}/once ]; then exit 0; fi; touch {tmp_path}/once; "
                               f"echo $$ > {started}.pid; mv {started}.pid {started}; exec sleep 300",))
    signal = CancelSignal()
    async with harness(home, Scripted("done")) as h:
        running = asyncio.ensure_future(h.start(agent, "look", signal=signal))
        await wait_for_file(started)
        signal.cancel("enough", by="tester")
        out = await running
        pid = int(started.read_text())
        assert out.state.status is Status.INTERRUPTED and out.state.interruption == Cancelled("enough", "tester")
        assert not alive(pid)  # the setup's process went with the Stop
        assert out.state.run_workspace is not None and out.state.run_workspace.stage == "made"
        again = await h.run(out.state.run_id)
        trace = list(h.store.read_trace(out.state.run_id))
    assert again.state.status is Status.COMPLETED
    assert again.state.run_workspace is not None and again.state.run_workspace.stage == "ready"
    assert [r["exit_code"] for r in trace if r["kind"] == "workspace_setup"] == [0]  # the second, whole run


async def test_what_a_setup_command_leaves_running_is_stopped_with_it(home: Path, repo: Path, tmp_path: Path) -> None:
    """A daemon started with ``&`` holds the setup's output open: the run goes on when the
    command ends, not when the daemon does, and the daemon goes with the command. (The shell
    lingers a moment so that Tether is already waiting on it when it ends: a wait that also
    waited for the output to close would see the daemon live out its 20 s and leave its mark.)"""
    lived = tmp_path / "lived-out"
    agent = coder(repo, setup=(f"(sleep 20; touch {lived}) & echo $! > {tmp_path}/daemon.pid; echo ready; sleep 0.5",))
    async with harness(home, Scripted("done")) as h:
        out = await h.start(agent, "look")
        trace = list(h.store.read_trace(out.state.run_id))
    assert out.state.status is Status.COMPLETED
    assert not alive(int((tmp_path / "daemon.pid").read_text()))
    assert not lived.exists()  # it was stopped, not waited for
    assert [(r["exit_code"], r["output"].strip()) for r in trace if r["kind"] == "workspace_setup"] == [(0, "ready")]


async def test_git_variables_in_tethers_environment_point_no_command_at_another_repository_or_index(
        home: Path, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As if Tether were started from a git hook of another repository: GIT_DIR, GIT_WORK_TREE and
    GIT_INDEX_FILE set. The run's worktree is still of the agent's repository, and no index is
    written but Tether's own."""
    other = tmp_path / "other"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "stray-index"))
    before = {k: os.environ.pop(k) for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
    mine = users(repo)  # read with git, without the variables
    os.environ.update(before)
    agent = coder(repo, setup=("git status --porcelain > status.txt",))
    async with harness(home, Scripted([("write_file", {"path": "x.txt", "content": "x\n"})], "done")) as h:
        out = await h.start(agent, "write")
    ws = out.state.run_workspace
    assert out.state.status is Status.COMPLETED and ws is not None and ws.repo == str(repo.resolve())
    assert [f.path for f in (await changes(ws)).files] == ["status.txt", "x.txt"]
    assert not (tmp_path / "stray-index").exists()
    assert not list((other / ".git" / "refs" / "heads").iterdir())  # no branch made there
    for k in before:
        monkeypatch.delenv(k)
    assert users(repo) == mine


# ---- the merge's dry run ---------------------------------------------------------------------

def refs(repo: Path) -> str:
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


async def test_merge_check_of_clean_work_changes_nothing(home: Path, repo: Path) -> None:
    model = Scripted([("write_file", {"path": "sub/inner.txt", "content": "inner\nmore\n"})], "done")
    async with harness(home, model) as h:
        out = await h.start(coder(repo), "edit")
    ws = out.state.run_workspace
    assert ws is not None
    (Path(ws.path or "") / "shell.txt").write_text("made by a shell command, not committed\n")
    before, branches = users(repo), refs(repo)
    check = await merge_check(ws, "main")
    assert check.ok and check.conflicts == () and check.dirty == () and check.words() == ""
    assert check.checked_out == (str(repo.resolve()),) and check.target == git(repo, "rev-parse", "main").strip()
    assert git(repo, "ls-tree", "-r", "--name-only", check.tree or "").split() == [
        ".gitignore", "notes.txt", "old.txt", "shell.txt", "sub/inner.txt"]
    assert users(repo) == before and refs(repo) == branches  # nothing checked out, staged or moved


async def test_merge_check_lists_conflicts_and_uncommitted_changes_the_merge_would_overwrite(
        home: Path, repo: Path) -> None:
    model = Scripted([("write_file", {"path": "notes.txt", "content": "one\nTWO\n"}),
                      ("write_file", {"path": "old.txt", "content": "new\n"})], "done")
    async with harness(home, model) as h:
        out = await h.start(coder(repo), "edit")
    ws = out.state.run_workspace
    assert ws is not None
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "mine")  # notes.txt: one two mine
    (repo / "notes.txt").write_text("one\n2\nmine\n")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qam", "mine again")  # conflicts with TWO
    (repo / "old.txt").write_text("my uncommitted edit\n")  # the run changes old.txt too
    before = users(repo)
    check = await merge_check(ws, "main")
    assert not check.ok and check.tree is None
    assert check.conflicts == ("notes.txt",)
    assert check.dirty == ("old.txt",)  # wip.txt, uncommitted too, is none of the merge's business
    assert "it conflicts with main in notes.txt" in check.words()
    assert f"main is checked out at {repo.resolve()} with uncommitted changes to old.txt" in check.words()
    assert users(repo) == before and (repo / "old.txt").read_text() == "my uncommitted edit\n"


async def test_merge_check_finds_the_target_checked_out_in_another_worktree(
        home: Path, repo: Path, tmp_path: Path) -> None:
    git(repo, "branch", "feature")
    other = tmp_path / "feature-checkout"
    git(repo, "worktree", "add", "-q", str(other), "feature")
    (other / "old.txt").write_text("work in progress elsewhere\n")
    model = Scripted([("delete_file", {"path": "old.txt"})], "done")
    async with harness(home, model) as h:
        out = await h.start(coder(repo), "delete")
    ws = out.state.run_workspace
    assert ws is not None
    check = await merge_check(ws, "feature")
    assert check.checked_out == (str(other.resolve()),) and check.dirty == ("old.txt",) and check.conflicts == ()
    assert (other / "old.txt").read_text() == "work in progress elsewhere\n"
    with pytest.raises(GitError, match="there is no branch 'nope'"):
        await merge_check(ws, "nope")


async def test_merge_check_refuses_a_copy_in_words(home: Path, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    async with harness(home, Scripted("done")) as h:
        out = await h.start(coder(tmp_path / "plain", "copy"), "look")
    with pytest.raises(GitError, match="a copy has no repository of its own"):
        await merge_check(out.state.run_workspace, "main")  # type: ignore[arg-type]


async def test_diff_says_why_when_a_run_has_no_workspace_or_not_yet(home: Path, repo: Path) -> None:
    async with harness(home, Scripted("done")) as h:
        waiting = h.create(coder(repo), "look")  # made, never started
        shared = await h.start(coder(repo), "look", isolation="none")  # --isolate none: the agent's own folder
    assert shared.state.run_workspace is None
    none = cli_here("diff", shared.state.run_id, *where(home))
    assert none.returncode == 2 and "has no workspace of its own: its agent works in its folder" in none.stderr
    later = cli_here("diff", waiting.run_id, "--stat", *where(home))
    assert later.returncode == 2 and "its workspace is not made yet (it is made when the run first starts)" \
        in later.stderr


async def test_discarding_a_run_that_never_started_removes_nothing_and_says_so(home: Path, repo: Path) -> None:
    async with harness(home, Scripted()) as h:
        state = h.create(coder(repo), "look")
    done = cli_here("discard", state.run_id, "--yes", *where(home))
    assert done.returncode == 0 and "had not been made (the run never started); nothing to remove" in done.stdout
    assert git(repo, "branch", "--list", f"{BRANCH_PREFIX}*") == ""
    refused = cli_here("resume", state.run_id, *where(home))
    assert refused.returncode == 2 and "its workspace was discarded" in refused.stderr
