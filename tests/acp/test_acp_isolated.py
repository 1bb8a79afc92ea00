"""ACP agents in a workspace of their own (``isolation``; docs/workspaces.md): the agent's
process, its session, Tether's fs guard and its sandbox all have the run's workspace, made and
set up before the agent starts, and found again by a follow-up. Against the fake agent."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tether.agents.agent import AcpCommand, Agent, Isolation
from tether.agents.sandbox import BACKENDS
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.store.trace import read_trace
from tether.vocab.state import NeedsApproval, Status
from tether.workspaces.changes import changes
from tests.acp.conftest import fake_agent
from tests.acp.driving import waiting
from tests.acp.fake_agent import WRITE_NAME, WRITE_TEXT
from tests.support import git, processes_with


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("notes\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    return repo


def isolated(folder: Path, mode: str = "normal", kind: str = "worktree", **kw: object) -> Agent:
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    setup = kw.pop("setup", ())
    return Agent(name="fake", model="acp:fake", acp=AcpCommand(tuple(fake_agent(mode)), env), workspace=folder,
                 isolation=Isolation(kind, setup=setup), **kw)  # type: ignore[arg-type]


def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path / "runs", agent_sets=(DEMO,), workspaces_dir=tmp_path / "workspaces")


def trace(tmp_path: Path, run_id: str) -> list[dict]:
    return list(read_trace(tmp_path / "runs" / run_id / "trace.jsonl"))


def said(state) -> str:
    return "\n".join(str(m.get("content")) for m in state.messages if m.get("role") == "assistant")


async def test_an_isolated_acp_run_works_in_its_own_worktree_and_the_repository_is_untouched(
        tmp_path: Path, repo: Path) -> None:
    """The fake agent's session cwd is the worktree, so its write is there; Tether's fs guard
    lets it through (the worktree is its root); the diff shows it; the repository has none of it."""
    status = git(repo, "status", "--porcelain")
    async with harness(tmp_path) as h:
        state = h.create(isolated(repo), "write the file")
        running = asyncio.create_task(h.run(state.run_id, wait_for_decision=0))
        pending = await waiting(h, state.run_id)
        ws = h.store.load(state.run_id).run_workspace
        assert ws is not None and ws.path is not None
        assert json.loads(pending.args)["path"] == str(Path(ws.path) / WRITE_NAME), "session/new's cwd"
        assert (await h.decide(state.run_id, "approve")).ok
        final = (await running).state
    assert final.status is Status.COMPLETED, final.error
    tree = Path(ws.path)
    assert tree.parent == (tmp_path / "workspaces").resolve() and ws.branch == f"tether/{state.run_id}"
    assert (tree / WRITE_NAME).read_text() == WRITE_TEXT
    assert not (repo / WRITE_NAME).exists() and git(repo, "status", "--porcelain") == status
    found = await changes(final.run_workspace)
    assert [(f.path, f.status, f.added) for f in found.files] == [(WRITE_NAME, "added", 1)]
    assert final.run_workspace.changes["files"] == 1, "tether runs' counts, noted at the run's end"
    kinds = [r["kind"] for r in trace(tmp_path, state.run_id)]
    assert kinds.index("workspace_ready") < kinds.index("agent_session")
    written = next(r for r in trace(tmp_path, state.run_id) if r["kind"] == "file_write")
    assert not written.get("refused") and written["path"] == str(tree / WRITE_NAME)
    assert not processes_with(str(tree)), "the agent's process is gone"


async def test_the_agents_process_runs_in_the_workspace_and_its_setup_ran_before(tmp_path: Path, repo: Path) -> None:
    """The agent's own process has the workspace as its current folder, and what the setup
    made is there when the agent starts (the fake agent reports its cwd)."""
    async with harness(tmp_path) as h:
        out = await h.start(isolated(repo, "escape", setup=("echo ready > setup.txt",)), "ESCAPE")
    final = out.state
    assert final.status is Status.COMPLETED, final.error
    tree = Path(final.run_workspace.path)
    assert f"cwd {tree}" in said(final)
    assert f"wrote {tree / 'inside.txt'}" in said(final)
    assert (tree / "setup.txt").read_text() == "ready\n" and not (repo / "setup.txt").exists()
    kinds = [r["kind"] for r in trace(tmp_path, final.run_id)]
    assert kinds.index("workspace_setup") < kinds.index("agent_session")


async def test_a_failed_setup_ends_the_run_in_words_and_no_agent_starts(tmp_path: Path, repo: Path) -> None:
    async with harness(tmp_path) as h:
        out = await h.start(isolated(repo, setup=("echo broken; exit 4",)), "write the file")
    final = out.state
    assert final.status is Status.FAILED
    assert "exit" in final.error and "4" in final.error and "broken" in final.error, final.error
    assert "The workspace is kept" in final.error
    assert "agent_session" not in [r["kind"] for r in trace(tmp_path, final.run_id)]
    assert Path(final.run_workspace.path).is_dir()


async def test_a_copy_for_a_folder_that_is_no_repository(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    async with harness(tmp_path) as h:
        out = await h.start(isolated(folder, "escape", kind="copy"), "ESCAPE")
    final = out.state
    tree = Path(final.run_workspace.path)
    assert final.status is Status.COMPLETED and f"cwd {tree}" in said(final)
    assert (tree / "inside.txt").exists() and not (folder / "inside.txt").exists()
    assert [f.path for f in (await changes(final.run_workspace)).files] == ["inside.txt"]


async def test_a_follow_up_goes_on_in_the_same_workspace(tmp_path: Path, repo: Path) -> None:
    async with harness(tmp_path) as h:
        state = h.create(isolated(repo, "loads"), "write the file")
        running = asyncio.create_task(h.run(state.run_id, wait_for_decision=0))
        await waiting(h, state.run_id)
        await h.decide(state.run_id, "approve")
        first = (await running).state
        tree = Path(first.run_workspace.path)
        (tree / WRITE_NAME).unlink()
        again = asyncio.create_task(h.run(state.run_id, message="once more", wait_for_decision=0))
        for _ in range(600):
            pending = h.store.load(state.run_id).interruption
            if isinstance(pending, NeedsApproval) and pending.call_id == "call_1#2":
                break
            await asyncio.sleep(0.05)
        assert json.loads(pending.args)["path"] == str(tree / WRITE_NAME), "session/load's cwd"
        assert (await h.decide(state.run_id, "approve")).ok
        final = (await again).state
    assert final.status is Status.COMPLETED and final.turns == 2
    assert final.run_workspace.path == str(tree) and (tree / WRITE_NAME).exists()
    ready = [r for r in trace(tmp_path, state.run_id) if r["kind"] == "workspace_ready"]
    assert [r["made"] for r in ready] == [True, False], "made once, found again"
    assert not (repo / WRITE_NAME).exists()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sandboxed_isolated_run_writes_only_its_workspace(backend: str, tmp_path: Path, repo: Path,
                                                            fake_env: dict) -> None:
    """``tether run --isolate worktree --sandbox``: the sandbox's writable folder is the run's
    worktree, so the agent's own write into the repository it came from is refused by the kernel."""
    config = tmp_path / "tether.toml"
    env = {**fake_env, "HOME": str(tmp_path / "agent-home")}
    config.write_text(textwrap.dedent(f"""
        [agents.escaper]
        acp = {json.dumps(fake_agent("escape"))}
        workspace = "./repo"
        env = {{ {", ".join(f'{k} = {json.dumps(v)}' for k, v in env.items())} }}
    """))
    full = {**os.environ, "TETHER_HOME": str(tmp_path / "home"), "TETHER_SANDBOX_BACKEND": backend}
    done = subprocess.run([sys.executable, "-m", "tether.tui.cli", "run", "--agent", "escaper", "--config",
                           str(config), "--isolate", "worktree", "--sandbox", "--run-id", "r1", "--json",
                           "--prompt", f"ESCAPE {repo / 'escaped.txt'}"],
                          capture_output=True, text=True, env=full, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    tree = (tmp_path / "home" / "workspaces" / "r1").resolve()
    assert (tree / "inside.txt").exists()
    assert not (repo / "escaped.txt").exists() and not (repo / "inside.txt").exists()
    shown = subprocess.run([sys.executable, "-m", "tether.tui.cli", "diff", "r1", "--stat"], capture_output=True,
                           text=True, env=full, cwd=tmp_path, timeout=60)
    assert "inside.txt" in shown.stdout and "escaped" not in shown.stdout, shown.stdout + shown.stderr
    session = next(r for r in read_trace(tmp_path / "home" / "runs" / "r1" / "trace.jsonl")
                   if r["kind"] == "agent_session")
    assert session["sandbox"]["backend"] == backend
    assert str(tree) in json.dumps(session["sandbox"]), session["sandbox"]


def test_isolation_in_an_acp_agents_file_is_taken(tmp_path: Path, repo: Path) -> None:
    from tether.agents.config import load_config

    config = tmp_path / "tether.toml"
    config.write_text(f'[agents.oc]\nacp = ["{sys.executable}", "acp"]\nworkspace = "{repo}"\nisolation = "worktree"\n'
                      'setup = ["true"]\n')
    agent = load_config(config).agent("oc")
    assert agent.isolation.kind == "worktree" and agent.isolation.setup == ("true",)


def test_an_isolated_run_of_a_missing_command_is_one_line_and_no_run(tmp_path: Path, repo: Path) -> None:
    """The agent starts in its workspace once that is made; its command is looked for before
    the run is made: a missing one is still one line, exit 2, and no run, no workspace."""
    config = tmp_path / "tether.toml"
    config.write_text(f'[agents.bad]\nacp = ["no-such-agent-here"]\nworkspace = "{repo}"\nisolation = "worktree"\n')
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home"), "TETHER_CONFIG": str(config)}
    done = subprocess.run([sys.executable, "-m", "tether.tui.cli", "run", "--agent", "bad", "--prompt", "x"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert f"{config}: agents.bad.acp: " in line and "no command 'no-such-agent-here'" in line, line
    runs = tmp_path / "home" / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "no run was made"
    assert not (tmp_path / "home" / "workspaces").exists()
