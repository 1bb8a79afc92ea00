"""``tether demo --merge``'s tour (issue 38, item 7), played headlessly once with both real agents
(OpenCode and Qwen Code, ``make agents``) on the scripted endpoint: each edits greet.py in a
worktree of its own; the Changes pane shows both diffs; OpenCode's merge is asked and approved,
and main has its change; Qwen Code's merge conflicts, said in words, and it is discarded. The
repository's main then holds only OpenCode's change, and no agent process is left.

Without the agents this skips with one reason (and fails with ``CI`` set).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

import tether.demo.acp as acp_demo
from tether.agents.config import load_config
from tether.demo.acp import GREET_AFTER, GREET_BEFORE, GREET_POLITE, MERGE_TASKS
from tether.demo.provider.coding import ScriptedEndpoint
from tether.demo.provider.server import running_app
from tether.vocab.state import Status
from tether.tui.cli.demo import run_demo
from tether.tui.cli.demo_merge import MERGE_STEPS, MergeTour
from tether.tui.cli.tour import Caption

from tests.acp import installed as agents
from tests.acp.procs import alive_in
from tests.support import SIZE, finish, git, home, make_app  # noqa: F401 (home: a fixture)


class Watching(MergeTour):
    """The tour, noting each diff the Changes pane drew while the tour read it."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.diffs: dict[str, str] = {}

    async def read(self, pilot: Pilot[Any], paces: float = 1.0) -> None:
        if self.reached and self.reached[-1] in ("changes", "changes-qwen"):
            self.diffs[self.reached[-1]] = self.diff_shown(pilot)
        await super().read(pilot, paces)


async def test_the_merge_tour_two_worktrees_one_merged_by_a_decision_one_conflicting_and_discarded(
        tmp_path: Path, home: Path) -> None:
    agents.require_agents()
    repo = acp_demo.seed_repository(tmp_path / "project")
    first = git(repo, "rev-parse", "main").strip()
    endpoint = ScriptedEndpoint(MERGE_TASKS)  # no workspace: each agent writes in its own folder
    async with running_app(endpoint.app()) as base_url:
        config = load_config(acp_demo.write_agent_file(tmp_path / "tether.toml", base_url=base_url,
                                                       home=tmp_path / "agents", workspace=repo,
                                                       isolation="worktree"))
        app = make_app(tmp_path, config=config, grace_s=0.2)
        tour = Watching(pace=0, stay=True)
        try:
            async with app.run_test(size=SIZE) as pilot:
                await tour(pilot)
                assert tour.error is None, tour.error
                assert tour.reached == [step.name for step in MERGE_STEPS]
                assert str(app.console_screen.query_one(Caption).render()) == MERGE_STEPS[-1].caption
                await finish(pilot, app)
        finally:
            await app.harness.aclose()
    store = app.harness.store
    edit, polite = store.load(tour.runs["edit"]), store.load(tour.runs["polite"])
    assert (edit.agent.name, polite.agent.name) == ("opencode", "qwen")
    assert edit.status is Status.COMPLETED and polite.status is Status.COMPLETED, (edit.error, polite.error)

    # Two worktrees of one repository, on branches of their own.
    spaces = [run.run_workspace for run in (edit, polite)]
    assert all(ws is not None and ws.kind == "worktree" for ws in spaces)
    assert spaces[0].path != spaces[1].path and spaces[0].branch == f"tether/{edit.run_id}"  # type: ignore[union-attr]

    # Two diffs, each of its own run, in the Changes pane.
    assert "+    greeting = f\"Hello, {name}\"" in tour.diffs["changes"]
    assert "-    return 'Hello ' + name" in tour.diffs["changes"] and "Good day" not in tour.diffs["changes"]
    assert "+    return 'Good day, ' + name + '.'" in tour.diffs["changes-qwen"]
    assert "excited" not in tour.diffs["changes-qwen"]

    # OpenCode's merge: asked, approved by the operator, made.
    (asked, asked_words), (merged_title, conflict_words), (discarded, discarded_words) = tour.outcomes
    assert asked == "Asked: waiting for a decision" and "waits for a decision by a person" in asked_words
    assert spaces[0].merge is not None and spaces[0].merge["stage"] == "merged"  # type: ignore[union-attr]
    assert [(d.verdict, d.by) for d in edit.approvals.values()][-1] == ("approved", app.operator)
    assert "Merge the work of the Tether run" in git(repo, "log", "-1", "--format=%s", "main")

    # Qwen Code's merge: the conflict in words, nothing changed; then discarded.
    assert merged_title == "Not merged" and "it conflicts with main in greet.py" in conflict_words
    assert discarded == "Discarded" and polite.run_workspace is not None
    assert polite.run_workspace.stage == "discarded" and discarded_words
    assert not Path(spaces[1].path).exists()  # type: ignore[union-attr, arg-type]
    assert f"tether/{polite.run_id}" not in git(repo, "branch", "--list")
    assert polite.messages  # the transcript stays

    # main: the first commit, then OpenCode's change only; the checkout clean.
    assert (repo / "greet.py").read_text() == GREET_AFTER != GREET_BEFORE
    assert GREET_POLITE.strip() not in git(repo, "log", "-p", "main")
    assert first in git(repo, "rev-list", "main") and git(repo, "status", "--porcelain") == ""
    assert not alive_in(tmp_path), alive_in(tmp_path)


def test_without_the_agents_tether_demo_merge_says_how_to_get_them_and_exits_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(acp_demo, "OPENCODE", tmp_path / "nowhere" / "opencode")
    args = argparse.Namespace(acp=False, merge=True, pace=0.0, stay=False, runs_dir=None, latency_ms=0.0)
    assert run_demo(args) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith("tether demo --merge: the real ACP agents are not installed")
