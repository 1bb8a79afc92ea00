"""The real OpenCode (``make agents``) in workspaces of its own (``isolation = "worktree"``),
offline, against the scripted endpoint: two runs of one repository at once, each in its own
worktree, each run's diff its own change only, and the repository as it was.

Without the agents (no npm) this skips with one reason; with ``CI`` set it fails.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from tether.agents.agent import AcpCommand, Agent, Isolation
from tether.demo.agents import DEMO
from tether.demo.provider.server import running_app
from tether.harness import Harness
from tether.vocab.state import Status
from tether.workspaces.changes import changes, diff
from tests.acp import installed as agents
from tests.acp.driving import waiting
from tests.acp.endpoint import ScriptedEndpoint
from tests.acp.procs import alive_in
from tests.support import git

CAP_S = 180.0


async def test_two_opencode_runs_of_one_repository_at_once_each_in_its_own_worktree(tmp_path: Path) -> None:
    agents.require_agents()
    repo, home = tmp_path / "repo", tmp_path / "home"
    home.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("notes\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first")
    before = (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"), (repo / ".git" / "index").read_bytes())
    endpoint = ScriptedEndpoint()
    spaces = (tmp_path / "workspaces").resolve()
    async with running_app(endpoint.app()) as base_url, \
            Harness(tmp_path / "runs", agent_sets=(DEMO,), workspaces_dir=spaces) as harness:
        launch = agents.launch_opencode(home, base_url)
        coder = Agent(name="opencode", model="scripted", acp=AcpCommand(tuple(launch.command), launch.env, 10.0),
                      workspace=repo, isolation=Isolation("worktree"))
        runs, tasks = [], []
        for who in ("first", "second"):  # staggered: the second starts while the first waits on its edit
            state = harness.create(coder, f"WRITE {spaces / f'{who}-run' / 'notes.txt'} CONTENT by the {who} run",
                                   run_id=f"{who}-run")
            runs.append(state.run_id)
            tasks.append(asyncio.create_task(harness.run(state.run_id, wait_for_decision=0)))
            await asyncio.wait_for(waiting(harness, state.run_id), CAP_S)
        for run_id in runs:  # both wait at once, each in its own worktree
            assert (await harness.decide(run_id, "approve", by="alice")).ok
        finals = [(await asyncio.wait_for(task, CAP_S)).state for task in tasks]
    for final, who, other in zip(finals, ("first", "second"), ("second", "first")):
        assert final.status is Status.COMPLETED, final.error
        ws = final.run_workspace
        assert ws is not None and ws.path == str(spaces / final.run_id) and ws.branch == f"tether/{final.run_id}"
        assert (Path(ws.path) / "notes.txt").read_text().strip() == f"by the {who} run"
        found = await changes(ws)
        assert [f.path for f in found.files] == ["notes.txt"]
        shown = await diff(ws)
        assert f"+by the {who} run" in shown and f"by the {other} run" not in shown, shown
        assert not alive_in(Path(ws.path))
    assert (repo / "notes.txt").read_text() == "notes\n"
    assert (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"),
            (repo / ".git" / "index").read_bytes()) == before, "the repository is untouched"
