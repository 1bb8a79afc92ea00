"""A queued run with a workspace of its own (``isolation = "worktree"``), on a real PostgreSQL:
the worker that takes it makes the worktree; after that worker's death, the worker that goes
on with the run (an approval decided meanwhile) works in the same worktree, on the same host,
and makes no second one. docs/workspaces.md, "Every source of runs"."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.demo.provider import create_app
from tether.vocab.state import NeedsApproval, Status
from tether.store.postgres.store import PgStore
from tether.workers.view import _workflow_status
from tests.campaign.server import CountingApp, serving
from tests.support import git
from tests.workerproc import Fleet, clean_slate, wait_for


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    with serving(CountingApp(create_app())) as base:
        yield base


@pytest.fixture
def store(pg_url: str) -> Iterator[PgStore]:
    clean_slate(pg_url)
    pg = PgStore(pg_url)
    try:
        yield pg
    finally:
        pg.close()


def test_a_worker_that_goes_on_with_a_run_keeps_its_worktree(pg_url: str, store: PgStore, provider: str,
                                                            tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for name in ("access.log", "notes.txt"):
        (repo / name).write_text(f"{name}\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    config = tmp_path / "tether.toml"
    config.write_text(textwrap.dedent(f"""
        [agents.cleaner]
        model = "destructive"
        base_url = "{provider}/isolated/v1"
        tools = ["tether:list_files", "tether:read_file", "tether:delete_file"]
        workspace = "{repo}"
        isolation = "worktree"
    """))
    with Fleet(pg_url, tmp_path / "fleet", env={"TETHER_CONFIG": str(config)}) as fleet:
        first = fleet.start()
        run_id = fleet.submit("cleaner", "--prompt", "Clean up the logs")
        wait_for(lambda: isinstance(store.load(run_id).interruption, NeedsApproval)
                 and not (store.owner(run_id) and store.owner(run_id).alive), "the run to wait for approval", 60)
        made = store.load(run_id).run_workspace
        assert made is not None and made.stage == "ready" and made.host is not None
        tree = Path(made.path or "")
        assert tree == (tmp_path / "fleet" / "home" / "workspaces").resolve() / run_id
        assert (tree / "access.log").exists()
        first.kill()  # the workflow's wait is in the database
        approved = fleet.tether("approve", run_id, "--store", fleet.url, "--as", "alice")
        assert approved.returncode == 0, approved.stderr
        second = fleet.start()
        wait_for(lambda: _workflow_status(store, run_id) == "SUCCESS", "the next worker to finish the run", 90)
    state = store.load(run_id)
    assert state.status is Status.COMPLETED, state.error
    ws = state.run_workspace
    assert ws is not None and ws.path == made.path and ws.branch == made.branch and ws.host == made.host
    assert not (tree / "access.log").exists(), "deleted in the run's worktree"
    assert (repo / "access.log").exists() and git(repo, "status", "--porcelain") == ""
    ready = [r for r in store.read_trace(run_id) if r["kind"] == "workspace_ready"]
    assert ready[0]["made"] is True and all(r["made"] is False for r in ready[1:]) and len(ready) >= 2
    started = [r["pid"] for r in store.read_trace(run_id) if r["kind"] == "run_started"]
    assert second.pid in started and first.pid in started
    worktrees = [line for line in git(repo, "worktree", "list", "--porcelain").splitlines()
                 if line.startswith("worktree ")]
    assert worktrees == [f"worktree {repo.resolve()}", f"worktree {tree}"], "no second worktree"
    assert ws.changes is not None and ws.changes["files"] == 1


def test_a_worker_runs_a_queued_acp_agent_in_its_own_worktree(pg_url: str, store: PgStore, tmp_path: Path) -> None:
    """An ACP agent with ``isolation`` from the queue: the worker makes the worktree and starts
    the agent there (the fake agent writes in its session's folder and reports its process's)."""
    import json
    import os

    from tests.acp.conftest import fake_agent

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("notes\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    config = tmp_path / "tether.toml"
    config.write_text(f'[agents.fake]\nacp = {json.dumps(fake_agent("escape"))}\nworkspace = "{repo}"\n'
                      f'isolation = "worktree"\nenv = {{ {", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())} }}\n')
    with Fleet(pg_url, tmp_path / "fleet", env={"TETHER_CONFIG": str(config)}) as fleet:
        fleet.start()
        run_id = fleet.submit("fake", "--prompt", "ESCAPE")
        wait_for(lambda: _workflow_status(store, run_id) == "SUCCESS", "the worker to finish the run", 90)
    state = store.load(run_id)
    assert state.status is Status.COMPLETED, state.error
    tree = (tmp_path / "fleet" / "home" / "workspaces").resolve() / run_id
    assert state.run_workspace is not None and state.run_workspace.path == str(tree)
    said = "\n".join(str(m.get("content")) for m in state.messages if m.get("role") == "assistant")
    assert f"cwd {tree}" in said and (tree / "inside.txt").exists(), said
    assert not (repo / "inside.txt").exists() and git(repo, "status", "--porcelain") == ""
