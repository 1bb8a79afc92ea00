"""``tether demo --acp``'s tour, played headlessly with the four real agents (OpenCode, Qwen
Code, Claude and Codex, ``make agents``) on the scripted endpoint: it reaches every step, and
each step leaves on the store what its caption promises. The approved writes are in their
files, each rejected run's next prompt carried the operator's words (and the model was sent
them), the stopped run is interrupted mid-stream, and no agent process is left.

Without the agents this skips with one reason (and fails with ``CI`` set); without them,
``tether demo --acp`` says in one line how to get them, and exits 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.screen import ModalScreen
from textual.widgets import Static

import tether.demo.acp as acp_demo
from tether.demo.acp import (EDIT_PROMPT, EXPLANATION, GREET_AFTER, GREET_BEFORE, PACKAGE_PROMPT, TASKS, TEST_GREET,
                             TEST_PROMPT, WRITE_PROMPT)
from tether.agents.config import load_config
from tether.demo.provider.coding import ScriptedEndpoint
from tether.demo.provider.server import running_app
from tether.vocab.state import Cancelled, Status
from tether.store.trace import read_trace
from tether.tui.screens.decision import ApproveDialog
from tether.tui.cli.demo import run_demo
from tether.tui.cli.tour import ACP_AGENTS, ACP_REJECTION, ACP_STEPS, CODEX_REJECTION, AcpTour, Caption

from tests.acp import installed as agents
from tests.acp.procs import alive_in
from tests.console.test_tour import times_drawn
from tests.support import SIZE, finish, make_app, settle, transcript


class Watching(AcpTour):
    """The tour, noting what the approval dialog showed while the tour read it, and how
    often its caption was drawn while a dialog was up."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.captions_on_dialogs: list[tuple[str, int]] = []
        self.diffs_shown: list[str] = []
        self.diffs_in_sight: list[bool] = []


    async def read(self, pilot: Pilot[Any], paces: float = 1.0) -> None:
        screen = pilot.app.screen
        if isinstance(screen, ApproveDialog) and screen.armed:
            diff = str(screen.query_one("#diff", Static).render())
            if diff not in self.diffs_shown:
                self.diffs_shown.append(diff)
                # In sight as the viewer reads it: every line, above the note and the buttons.
                frame = screen.query_one("#decision").content_region
                region = screen.query_one("#diff").region
                self.diffs_in_sight.append(region.height == len(diff.splitlines()) and frame.contains_region(region)
                                           and region.bottom <= screen.query_one("#decision-actions").region.y)
        await super().read(pilot, paces)
        if isinstance(pilot.app.screen, ModalScreen) and pilot.app.screen.query(Caption):
            self.captions_on_dialogs.append((type(pilot.app.screen).__name__,
                                             times_drawn(pilot.app, self._caption[:12])))


async def test_the_acp_tour_supervises_four_agents_through_every_step(tmp_path: Path) -> None:
    agents.require_agents()
    agents.require_new_agents()
    workspace = acp_demo.seed_workspace(tmp_path / "project")
    endpoint = ScriptedEndpoint(TASKS, workspace)
    async with running_app(endpoint.app()) as base_url:
        config = load_config(acp_demo.write_agent_file(tmp_path / "tether.toml", base_url=base_url,
                                                       home=tmp_path / "agents", workspace=workspace,
                                                       agents=ACP_AGENTS))
        app = make_app(tmp_path, config=config, grace_s=0.2)  # the dialogs' grace period, as an operator has it
        tour = Watching(pace=0, stay=True)
        try:
            async with app.run_test(size=SIZE, notifications=True) as pilot:  # the toasts a viewer sees
                await tour(pilot)
                assert tour.error is None, tour.error
                assert tour.reached == [step.name for step in ACP_STEPS]
                assert str(app.console_screen.query_one(Caption).render()) == ACP_STEPS[-1].caption
                # One caption in sight over each dialog, the tall approval with its diff included.
                assert {name for name, _ in tour.captions_on_dialogs} >= {"NewRunDialog", "ApproveDialog"}
                assert [seen for seen in tour.captions_on_dialogs if seen[1] != 1] == []
                assert list(tour.runs) == ["edit", "write", "test", "package", "explain"]
                app.select(tour.runs["write"])
                await settle(pilot, app)
                shown = transcript(app)
                await finish(pilot, app)
        finally:
            await app.harness.aclose()
    store = app.harness.store
    edit, write, test, package, explain = (store.load(tour.runs[name]) for name in tour.runs)
    assert [run.agent.name for run in (edit, write, test, package, explain)] == \
        ["opencode", "qwen", "claude", "codex", "opencode"]

    # OpenCode's edit: the dialog showed its diff; allowed once, it is in the file.
    edit_diff, test_diff = tour.diffs_shown
    assert tour.diffs_in_sight == [True, True], "each diff was read in full, without scrolling"
    assert "+    greeting = f\"Hello, {name}\"" in edit_diff and "-    return 'Hello ' + name" in edit_diff
    assert edit.status is Status.COMPLETED, edit.error
    assert (workspace / "greet.py").read_text() == GREET_AFTER != GREET_BEFORE
    assert [(d.verdict, d.by) for d in edit.approvals.values()] == [("approved", app.operator)]
    trace = list(read_trace(store.root / edit.run_id / "trace.jsonl"))
    assert any(r["kind"] == "file_write" and r["path"] == str(workspace / "greet.py") for r in trace)
    assert {"role": "user", "content": EDIT_PROMPT} in edit.messages

    # Qwen Code's write: rejected in words, which went in as its next prompt, and it answered them.
    assert write.status is Status.COMPLETED, write.error
    assert not (workspace / "CHANGELOG.md").exists()
    assert {"role": "user", "content": WRITE_PROMPT} in write.messages
    told = [m for m in write.messages if m.get("tether") == "rejection"]
    assert len(told) == 1 and ACP_REJECTION in told[0]["content"]
    said_to_model = json.dumps([m.get("content") for body in endpoint.requests for m in body.get("messages") or []])
    assert ACP_REJECTION in said_to_model
    assert write.answer is not None and ACP_REJECTION[1:] in write.answer and "CHANGELOG.md" in write.answer
    assert ACP_REJECTION[1:] in shown and "Understood" in shown  # on the console, the words and the answer

    # Claude's new test file: allowed once from the dialog that showed it, and Claude wrote it itself.
    assert "+++ b/test_greet.py" in test_diff and '+    assert greet("Ada") == "Hello, Ada."' in test_diff
    assert test.status is Status.COMPLETED, test.error
    assert (workspace / "test_greet.py").read_text() == TEST_GREET
    assert [(d.verdict, d.by) for d in test.approvals.values()] == [("approved", app.operator)]
    assert test.cost_usd > 0  # Claude's own cost (usage_update), at the model the agent file chose
    configs = [r["options"] for r in read_trace(store.root / test.run_id / "trace.jsonl") if r["kind"] == "config_options"]
    assert [(o["id"], o["value"]) for o in configs[-1] if o["id"] == "model"] == [("model", "haiku")], configs

    # Codex's write: rejected in words; it cancelled its turn, and the words went to it all the same.
    assert package.status is Status.COMPLETED, package.error
    assert not (workspace / "pyproject.toml").exists()
    assert {"role": "user", "content": PACKAGE_PROMPT} in package.messages
    assert [m["content"] for m in package.messages if m.get("tether") == "rejection"] != []
    assert CODEX_REJECTION in json.dumps(endpoint.requests)
    assert package.answer is not None and CODEX_REJECTION[1:] in package.answer and "pyproject.toml" in package.answer
    assert {"role": "user", "content": TEST_PROMPT} in test.messages

    # OpenCode's long answer: stopped by the console's Stop mid-stream.
    assert explain.status is Status.INTERRUPTED
    assert explain.interruption == Cancelled(explain.interruption.reason, app.operator)
    assert endpoint.held_closed.is_set()  # the model's stream was still open when the Stop came
    assert EXPLANATION not in json.dumps(explain.messages)

    assert not alive_in(tmp_path), alive_in(tmp_path)


def test_without_the_agents_tether_demo_acp_says_how_to_get_them_and_exits_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(acp_demo, "OPENCODE", tmp_path / "nowhere" / "opencode")
    args = argparse.Namespace(acp=True, pace=0.0, stay=False, runs_dir=None, latency_ms=0.0)
    assert run_demo(args) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and said.startswith("tether demo --acp: the real ACP agents are not installed")
    assert "make agents" in said and str(acp_demo.AGENTS_DIR) in said
