"""``tether demo --merge``: the tour of contained runs (issue 38), on the real OpenCode and Qwen
Code (``make agents``) at the scripted endpoint.

Both agents change the same lines of ``greet.py`` in one repository, each in a git worktree of
its own (``isolation = "worktree"`` in the agent file), so the repository stays as it was. The
Changes pane (``c``) shows each run's diff. ``M`` asks to merge OpenCode's work into ``main``:
the merge is a decision, approved with ``a``. Qwen Code's merge then conflicts with ``main``,
said in words, and ``X`` discards its worktree and branch (its transcript stays).

Like the other tours it drives the console with the operator's keys and dialogs, and waits on
what the console knows, never on the clock.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.screen import ModalScreen

from tether.tui.cli.tour import AcpTour, Step
from tether.tui.screens.decision import ApproveDialog
from tether.tui.screens.rules import ConfirmDialog
from tether.tui.screens.workspace import MergeDialog, OutcomeDialog
from tether.agents.config import load_config
from tether.demo.acp import EDIT_PROMPT, MERGE_TASKS, POLITE_PROMPT, missing, seed_repository, write_agent_file
from tether.demo.agents import DEMO
from tether.demo.provider.coding import endpoint_process
from tether.tui.app import TetherApp
from tether.tui.state.options import ConsoleOptions

__all__ = ["MERGE_STEPS", "MergeTour", "run_merge_demo"]

MERGE_STEPS: tuple[Step, ...] = (
    Step("opencode", "1/4 · n starts OpenCode in a git worktree of its own: it edits greet.py (a allows it)"),
    Step("qwen", "1/4 · Qwen Code edits the same lines of greet.py, in another worktree: the repository is untouched"),
    Step("changes", "2/4 · c shows what a run changed: OpenCode's diff of greet.py…"),
    Step("changes-qwen", "2/4 · …and Qwen Code's, of the same lines"),
    Step("merge", "3/4 · M merges OpenCode's work into main: checked, then asked, as a decision"),
    Step("approve", "3/4 · a shows the merge in the approvals; Enter approves it, and main has OpenCode's change"),
    Step("conflict", "4/4 · M on Qwen Code's run: it conflicts with main in greet.py, said in words; nothing changes"),
    Step("discard", "4/4 · X discards it: its worktree and branch go, its transcript stays"),
    Step("end", "Two agents, two worktrees: one merge decided, one conflict discarded, main as decided"),
)


class MergeTour(AcpTour):
    """The tour, on the agent file :func:`tether.demo.acp.write_agent_file` writes with
    ``isolation="worktree"`` and the endpoint's :data:`tether.demo.acp.MERGE_TASKS`.
    ``runs``: ``edit`` (OpenCode, merged) and ``polite`` (Qwen Code, discarded);
    ``outcomes``: each outcome dialog's title and words, in order."""

    steps = MERGE_STEPS

    def __init__(self, pace: float = 1.6, *, stay: bool = False, cap_s: float = 120.0) -> None:
        super().__init__(pace, stay=stay, cap_s=cap_s)
        self.outcomes: list[tuple[str, str]] = []

    async def play(self, pilot: Pilot[Any]) -> None:
        app: Any = pilot.app
        await self.step(pilot, "opencode")
        edit = await self.new_run(pilot, "edit", agent="opencode", prompt=EDIT_PROMPT)
        await self._allow(pilot, edit, "OpenCode")
        await self.step(pilot, "qwen")
        polite = await self.new_run(pilot, "polite", agent="qwen", prompt=POLITE_PROMPT)
        await self._allow(pilot, polite, "Qwen Code")

        app.select(edit)
        await self.step(pilot, "changes")
        await pilot.press("c")
        await self._diff_shows(pilot, "greeting = f\"Hello, {name}\"", "OpenCode's diff")
        await self.read(pilot, 2)
        app.select(polite)
        await self.step(pilot, "changes-qwen")
        await self._diff_shows(pilot, "Good day, ", "Qwen Code's diff")
        await self.read(pilot, 2)

        app.select(edit)
        await self.step(pilot, "merge")
        await self.read(pilot, 0.6)
        await self._merge(pilot, edit)
        await self._close(pilot)
        await self._until(pilot, lambda: app.can_decide(edit), "the merge to wait in the approvals")
        await self.step(pilot, "approve")
        await pilot.press("a")
        await self._until(pilot, lambda: isinstance(app.screen, ApproveDialog) and app.screen.armed,
                          "the merge's approval dialog")
        self._show_caption(app.screen)
        await self.read(pilot, 2)
        await pilot.press("enter")
        await self._until(pilot, lambda: self._merged(pilot, edit), "the approved merge to be made")
        await self.read(pilot, 2)

        app.select(polite)
        await self.step(pilot, "conflict")
        await self.read(pilot, 0.6)
        await self._merge(pilot, polite)
        await self._close(pilot)
        await self.step(pilot, "discard")
        await pilot.press("X")
        await self._until(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the discard's question")
        self._show_caption(app.screen)
        await self.read(pilot, 1.5)
        await pilot.press("y")
        await self._outcome(pilot)
        await self._close(pilot)
        await self.read(pilot, 1.5)

    async def _allow(self, pilot: Pilot[Any], rid: str, who: str) -> None:
        """The run's write asked for, allowed from the approval dialog, and the run finished."""
        await self._until_run(pilot, rid, lambda: self._asks(pilot, rid), f"{who} to ask to write greet.py")
        await self.approve(pilot, rid, f"{who} to write greet.py and finish", reading=1.2)

    async def _diff_shows(self, pilot: Pilot[Any], text: str, what: str) -> None:
        await self._until(pilot, lambda: text in self.diff_shown(pilot), what)
        pilot.app.clear_notifications()  # the toasts of the approvals would cover the diff

    @staticmethod
    def diff_shown(pilot: Pilot[Any]) -> str:
        """The Changes pane's diff, as drawn."""
        app: Any = pilot.app
        if not app.changes_shown:
            return ""
        return str(app.changes_pane.query_one("#changes-diff").render())

    async def _merge(self, pilot: Pilot[Any], rid: str) -> None:
        """``M`` on the selected run, the dialog read and Enter pressed: its outcome shown."""
        app: Any = pilot.app
        await self._until(pilot, lambda: app.can_merge(rid), f"run {rid} to be mergeable")
        await pilot.press("M")
        await self._until(pilot, lambda: isinstance(app.screen, MergeDialog), "the merge dialog")
        self._show_caption(app.screen)
        await self.read(pilot, 1.5)
        await pilot.press("enter")
        await self._outcome(pilot)

    async def _outcome(self, pilot: Pilot[Any]) -> None:
        app: Any = pilot.app
        await self._until(pilot, lambda: isinstance(app.screen, OutcomeDialog) and bool(app.screen.query("#outcome-words")),
                          "the outcome")  # pushed, and composed
        app.clear_notifications()
        screen = app.screen
        self.outcomes.append((str(screen.query_one(".dialog-title").render()),
                              str(screen.query_one("#outcome-words").render())))
        self._show_caption(screen)
        await self.read(pilot, 2.5)

    async def _close(self, pilot: Pilot[Any]) -> None:
        app: Any = pilot.app
        await pilot.press("enter")
        await self._until(pilot, lambda: not isinstance(app.screen, ModalScreen), "the dialog to close")

    @staticmethod
    def _merged(pilot: Pilot[Any], rid: str) -> bool:
        state = pilot.app.states.get(rid)  # type: ignore[attr-defined]
        ws = None if state is None else state.run_workspace
        return ws is not None and (ws.merge or {}).get("stage") == "merged"


def run_merge_demo(args: Any) -> int:
    """``tether demo --merge``: :class:`MergeTour` on a console of its own, in a temporary folder
    (the repository, Tether's home with the runs' worktrees, the agents' own homes), the agents at
    the scripted endpoint (a child process). Without the agents, one line that says how to get
    them, and exit 2."""

    why = missing()
    if why is not None:
        print(f"tether demo --merge: {why}", file=sys.stderr)
        return 2
    tour = MergeTour(args.pace, stay=args.stay)
    with contextlib.ExitStack() as stack:
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tether-demo-")))
        stack.callback(_restore, "TETHER_HOME", os.environ.get("TETHER_HOME"))
        os.environ["TETHER_HOME"] = str(home / "tether")  # the runs' worktrees: in the tour's folder
        repo = seed_repository(home / "project")
        url = stack.enter_context(endpoint_process(tasks=MERGE_TASKS))  # no --workspace: each agent's own folder
        config = load_config(write_agent_file(home / "tether.toml", base_url=url, home=home / "agents",
                                              workspace=repo, isolation="worktree"))
        app = TetherApp(ConsoleOptions(runs_dir=args.runs_dir or home / "runs", workspace=home / "workspace",
                                       config=config, grace_s=0.5, operator="the demo", agent_sets=(DEMO,)))
        app.run(auto_pilot=tour)
    return app.return_code or 0


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
